"""The top-level ``mcp:`` section of the agent YAML: the MCP servers an agent uses, and serving."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clawkit.types import Risk


class ToolOverride(BaseModel):
    """Per-tool settings of one server, keyed by the server's own tool name."""

    model_config = ConfigDict(extra="forbid")

    risk: Risk | None = Field(None, description="risk of this tool (never lowered by the server's annotations)")


class ServerConfig(BaseModel):
    """One MCP server: ``command`` (+``args``, ``env``, ``cwd``) for stdio, or ``url`` (+``headers``) for streamable HTTP."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = Field(None, description="executable that speaks MCP on stdin/stdout")
    args: list[str] = Field(default_factory=list, description="arguments of the command")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment of the server process")
    cwd: str | None = Field(None, description="working directory of the server process (default: the workspace)")
    url: str | None = Field(None, description="streamable HTTP endpoint, e.g. http://127.0.0.1:8931/mcp")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers (e.g. Authorization) sent to the server")
    risk: Risk = Field(Risk.GUARDED, description="risk of this server's tools (the policy asks before guarded ones)")
    trusted: bool = Field(False, description="the user vouches for this server's tool descriptions: they do not mark "
                          "the session as holding untrusted content and are not wrapped as data (its results still are)")
    tools: dict[str, ToolOverride] = Field(default_factory=dict, description="per-tool overrides, by the server's tool name")
    prompts: list[str] = Field(default_factory=list, description="server prompts (without arguments) added to the system prompt")
    resources: bool = Field(True, description="offer mcp__<server>__list_resources/read_resource when the server has resources")
    startup_timeout: float = Field(30.0, gt=0, description="seconds to start and initialise the server")
    call_timeout: float = Field(60.0, gt=0, description="seconds one tool call may take")
    max_restarts: int = Field(5, ge=0, description="restarts after crashes before the server is given up for the agent's life")

    @model_validator(mode="after")
    def _one_transport(self) -> "ServerConfig":
        if bool(self.command) == bool(self.url):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


class ServeConfig(BaseModel):
    """How ``clawkit mcp serve`` answers approvals: MCP clients cannot be asked, so deny unless told."""

    model_config = ConfigDict(extra="forbid")

    approvals: Literal["deny", "allow"] = Field(
        "deny", description="approval requests while serving: deny (default) or allow every one (trusted clients only)"
    )
    tool_name: str = Field("ask_agent", description="name of the one tool the server exposes")


class McpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: dict[str, ServerConfig] = Field(default_factory=dict, description="MCP servers by name; tools are mcp__<name>__<tool>")
    serve: ServeConfig = Field(default_factory=ServeConfig, description="settings of `clawkit mcp serve`")

    @model_validator(mode="after")
    def _names(self) -> "McpConfig":
        import re

        for name in self.servers:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", name) or "__" in name:
                raise ValueError(f"server name {name!r}: use letters, digits, '-' and single '_' (it becomes part of tool names)")
        return self
