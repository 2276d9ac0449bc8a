"""The ``plugins.shield`` section of an agent YAML."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .risk import DEFAULT_SENSITIVE_PATHS

# every tool whose result carries text the user did not write: pages, files, command output,
# file names, other agents, MCP servers
DEFAULT_UNTRUSTED = ["web_fetch", "web_search", "read_file", "read_tool_output", "shell_exec", "list_dir", "glob", "mcp__*", "subagent*",
                     "sub_agent*", "delegate*", "spawn_agent*", "ask_agent*", "agent_*"]


class Thresholds(BaseModel):
    """Score bands: below ``log`` allow; from ``log`` record; from ``approve`` require approval."""

    model_config = ConfigDict(extra="forbid")

    log: float = Field(0.3, ge=0, le=1)
    approve: float = Field(0.7, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> "Thresholds":
        if self.log > self.approve:
            raise ValueError(f"thresholds.log ({self.log}) must not exceed thresholds.approve ({self.approve})")
        return self


class Weights(BaseModel):
    """How much each factor adds to the score (each 0..1, combined as a noisy-OR)."""

    model_config = ConfigDict(extra="forbid")

    safe: float = Field(0.05, ge=0, le=1)
    guarded: float = Field(0.25, ge=0, le=1)
    unsafe: float = Field(0.5, ge=0, le=1)
    sensitive_path: float = Field(0.5, ge=0, le=1, description="a sensitive path read, written or named")
    secret: float = Field(0.5, ge=0, le=1, description="a credential in the arguments")
    secret_egress: float = Field(0.7, ge=0, le=1, description="a credential in a network or shell call")


class Trust(BaseModel):
    """Session trust (1.0 = fully trusted) after untrusted content enters the session."""

    model_config = ConfigDict(extra="forbid")

    after_untrusted: float = Field(0.9, ge=0, le=1, description="after any untrusted content")
    after_detection: float = Field(0.4, ge=0, le=1, description="after content that carried an injection")


class ShieldConfig(BaseModel):
    """The Kernel Shield: structural checks, risk scoring, injection scanning."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["strict", "permissive", "audit-only"] = Field(
        "permissive", description="strict: log band needs approval and injections are redacted; audit-only: report, never enforce"
    )
    thresholds: Thresholds = Field(default_factory=Thresholds)
    weights: Weights = Field(default_factory=Weights)
    trust: Trust = Field(default_factory=Trust)
    untrusted_tools: list[str] = Field(
        default_factory=lambda: list(DEFAULT_UNTRUSTED), description="tools (globs) whose results are scanned and wrapped"
    )
    wrap: Literal["always", "detected", "never"] = Field("always", description="when to put untrusted results in data delimiters")
    taint_threshold: float = Field(1.0, gt=0, description="detection score (high 1.0, medium 0.5 per rule) that taints the session")
    sensitive_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_SENSITIVE_PATHS), description="globs of sensitive files")
    extra_sensitive_paths: list[str] = Field(default_factory=list, description="added to sensitive_paths")
    capability_map: dict[str, str] = Field(default_factory=dict, description="tool name -> capability, beyond the standard tools")
    validate_arguments: bool = Field(True, description="check arguments against the tool's JSON Schema")
    max_scan_chars: int = Field(2_000_000, gt=0, description="longer results are scanned at head and tail")
