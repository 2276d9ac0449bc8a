"""The ``plugins.tools`` section of the agent YAML."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class WebSearchConfig(BaseModel):
    """``plugins.tools.search``: the backend ``web_search`` asks (docs/web-search.md)."""

    model_config = ConfigDict(extra="forbid")

    backend: str = Field("searxng", description="searxng | brave | tavily | a backend a plugin registers (register_search_backend)")
    base_url: str | None = Field(None, description="the backend's address (brave and tavily have defaults; searxng has none)")
    api_key_env: str | None = Field(None, description="environment variable holding the API key (default BRAVE_API_KEY / "
                                    "TAVILY_API_KEY); the key itself is never written in YAML")
    max_results: int = Field(5, gt=0, le=50, description="results returned at most (the model may ask for fewer)")
    timeout: float = Field(15.0, gt=0, description="seconds a search may take")
    max_bytes: int = Field(2_000_000, gt=0, description="largest backend answer read")
    user_agent: str = Field("clawkit-web-search/0.1", description="User-Agent header of the backend request")
    options: dict[str, Any] = Field(default_factory=dict, description="extra parameters sent to the backend as they are "
                                    "(searxng: categories, language; brave: country; tavily: search_depth)")

    @model_validator(mode="before")
    @classmethod
    def _no_key_in_yaml(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(k in data for k in ("api_key", "key", "token")):
            raise ValueError("an API key is never read from YAML: put it in the environment and name the variable "
                             "in api_key_env")
        return data


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
    search: WebSearchConfig = Field(default_factory=WebSearchConfig, description="web_search's backend")


_DEFAULT = ToolsConfig()


def settings(ctx: Any) -> ToolsConfig:
    """This agent's tools config (defaults when the section is absent)."""
    try:
        cfg = ctx.plugin_config("tools")
    except Exception:
        cfg = None
    return cfg if isinstance(cfg, ToolsConfig) else _DEFAULT
