"""The ``plugins.tools`` section of the agent YAML."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ToolsConfig(BaseModel):
    """Limits of the standard tools. Scope (what lies beyond the workspace) is a policy grant, not set here."""

    model_config = ConfigDict(extra="forbid")

    max_read_bytes: int = Field(256_000, gt=0, description="read_file returns at most this many bytes")
    max_write_bytes: int = Field(5_000_000, gt=0, description="largest file write_file/edit_file will write")
    max_list_entries: int = Field(1000, gt=0, description="list_dir/glob show at most this many entries")
    glob_timeout: float = Field(5.0, gt=0, description="glob stops searching after this many seconds")
    glob_max_visited: int = Field(200_000, gt=0, description="glob stops after looking at this many entries")
    shell: str = Field("/bin/sh", description="shell used when shell_exec gets a string command")
    shell_timeout: float = Field(30.0, gt=0, description="default shell_exec timeout, seconds")
    shell_max_timeout: float = Field(600.0, gt=0, description="largest timeout the model may ask for")
    shell_output_bytes: int = Field(64_000, gt=0, description="shell_exec keeps this much output; the rest is counted, not kept")
    kill_grace: float = Field(0.5, ge=0, description="seconds between SIGTERM and SIGKILL of a timed-out process group")
    env_deny: list[str] = Field(default_factory=list, description="extra environment variable name globs to remove")
    env_allow: list[str] = Field(default_factory=list, description="names kept even though they look like secrets")
    fetch_timeout: float = Field(20.0, gt=0, description="web_fetch total time limit, seconds")
    fetch_max_bytes: int = Field(2_000_000, gt=0, description="web_fetch reads at most this many bytes of a body")
    fetch_max_redirects: int = Field(5, ge=0, description="redirects web_fetch follows (each one re-checked)")
    fetch_user_agent: str = Field("clawkit-web-fetch/0.1", description="User-Agent header of web_fetch")


_DEFAULT = ToolsConfig()


def settings(ctx: Any) -> ToolsConfig:
    """This agent's tools config (defaults when the section is absent)."""
    try:
        cfg = ctx.plugin_config("tools")
    except Exception:
        cfg = None
    return cfg if isinstance(cfg, ToolsConfig) else _DEFAULT
