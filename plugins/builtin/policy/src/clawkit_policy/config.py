"""The ``plugins.policy`` section of the agent YAML: grants and approval settings."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clawkit.types import Risk


class Grant(BaseModel):
    """A capability beyond a tool's default scope, for the tools it names.

    ``paths``: absolute globs or directories (relative ones are taken from the
    workspace, ``~`` is expanded); a path without wildcards covers everything below
    it. ``hosts``: host-name globs, ``host:port``, or CIDR networks, letting
    ``web_fetch`` reach non-public addresses. ``commands``: globs over the command
    line that ``shell_exec`` may run without asking.

    What a command pattern grants: the matched command line runs without approval,
    within the workspace. It never covers a line with shell control operators
    (``;``, ``|``, ``&&``, ``$(``, backticks, redirections), and never one whose
    arguments or option values (``--output=/x``, ``-C/x``, ``/etc/hostname``,
    ``../x``, ``~/x``) name a path outside the workspace and this grant's
    ``paths`` — such a line is asked about like any other. A pattern is matched
    against the whole line, so ``git diff*`` also matches ``git diff --no-index``:
    write patterns as narrowly as you mean them. While the session holds untrusted
    content (clawkit.provenance) nothing that can send data off the machine is
    pre-approved.
    """

    model_config = ConfigDict(extra="forbid")

    tools: list[str] = Field(default_factory=lambda: ["*"], description="tool-name globs this grant applies to")
    paths: list[str] = Field(default_factory=list, description="path globs or directories beyond the workspace")
    hosts: list[str] = Field(default_factory=list, description="host globs, host:port or CIDR networks for web_fetch")
    commands: list[str] = Field(default_factory=list, description="command-line globs shell_exec runs without approval")
    access: Literal["rw", "ro"] = Field(
        "rw", description="for paths: rw, or ro (a sandbox mounts them read-only for the tools it confines)")
    reason: str = Field("", description="why the agent needs it (recorded in the audit ledger)")

    @field_validator("tools")
    @classmethod
    def _some_tools(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("a grant must name at least one tool (use '*' for all)")
        return v


class PolicyConfig(BaseModel):
    """Deny by default; grants widen a tool's scope; risk levels decide approvals."""

    model_config = ConfigDict(extra="forbid")

    grants: list[Grant] = Field(default_factory=list, description="task-level capability grants")
    risk: dict[str, Risk] = Field(default_factory=dict, description="override a tool's risk level: {tool glob: safe|guarded|unsafe}")
    guarded_approval: Literal["call", "tool"] = Field(
        "call", description="a guarded approval covers the exact call (call) or every call of that tool (tool) for the session"
    )
    approval_ttl: float = Field(3600.0, gt=0, description="seconds a guarded approval stays valid in its session")
    approval_timeout: float = Field(120.0, gt=0, description="seconds the terminal approver waits for an answer")
    step_grants: bool = Field(True, description="a call beyond its scope may be approved as a one-step grant (else it is blocked)")
    step_grant_scope: Literal["step", "run", "persistent"] = Field(
        "step", description="how long an approved one-step grant lasts: that call, the rest of the run, or stored for the agent"
    )
    audit: bool = Field(True, description="record decisions, approvals, executions and security events in the ledger")
    redact_results: bool = Field(True, description="replace secrets in tool results before the model (and the transcript) sees them")
    egress_tools: list[str] = Field(
        default_factory=lambda: ["web_fetch", "web_search", "shell_exec", "mcp__*", "agent_*", "*http*", "*fetch*", "*request*",
                                 "*mail*", "*send*", "*post*", "*upload*", "*webhook*", "*browser*", "*curl*"],
        description="tool-name globs that can move data off the machine or change what runs next: while the session "
                    "holds untrusted content each call needs approval (a confined tool whose sandbox has no network excepted)")
    untrusted_egress: Literal["ask", "alarm-only"] = Field(
        "ask", description="ask: while the session holds untrusted content (provenance) every call that can send data off "
        "the machine needs approval; alarm-only: only a scanner's detection (the shield's tainted alarm) does — the "
        "weaker rule before provenance, for throwaway environments and for tests of what the sandbox alone stops")
    trusted_paths: list[str] = Field(
        default_factory=list,
        description="path globs (relative to the workspace, or absolute; a path without wildcards covers everything "
                    "below it) the user vouches for: reading them does not mark the session as holding untrusted "
                    "content, e.g. [\"src/**\", \"tests/**\"]; '.' trusts the whole workspace")
    trusted_commands: list[str] = Field(
        default_factory=list,
        description="command-line globs (like a grant's commands) whose output the user vouches for, e.g. "
                    "[\"python3 -m pytest*\"]: it does not mark the session; never a line with shell operators or a "
                    "path outside the workspace")
    secret_env: list[str] = Field(default_factory=list, description="extra environment variable name globs whose values are secrets")
