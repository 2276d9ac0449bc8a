"""The ``plugins.sandbox`` section of the agent YAML."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clawkit import hookimpl

SYSTEM_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"]
# readable by the jail's user (it maps onto the caller's uid, root included): mask them
HIDDEN_PATHS = ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
                "/etc/ssh", "/etc/ssl/private", "/etc/security/opasswd"]


class WasmToolConfig(BaseModel):
    """A WebAssembly tool: a WASI preview 1 module reading JSON arguments on stdin and writing
    its result (JSON or text) on stdout."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="tool name the model sees")
    module: str = Field(description="path of the .wasm (or .wat) file; relative paths are taken from the workspace")
    description: str = Field("", description="what the tool does (shown to the model)")
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}},
                                       description="JSON Schema of the arguments")
    risk: Literal["safe", "guarded", "unsafe"] = Field("guarded", description="risk level for the policy")
    dirs: list[str] = Field(default_factory=list,
                            description="directories preopened for the module: 'HOST[:GUEST][:ro]'; '.' is the workspace")
    host_tools: list[str] = Field(default_factory=list,
                                  description="host tools the module may call through clawkit.call_tool (still gated)")
    memory_mb: int | None = Field(None, gt=0, description="linear memory limit (default: wasm_memory_mb)")
    fuel: int | None = Field(None, gt=0, description="instruction budget per call (default: wasm_fuel)")
    timeout: float | None = Field(None, gt=0, description="wall-clock deadline per call, seconds (default: wasm_timeout)")
    instance: Literal["call", "task"] = Field(
        "call", description="call: a fresh instance for every call; task: one instance per agent run (a WASI reactor "
        "exporting clawkit_alloc and clawkit_handle), its directories fixed at creation, destroyed when the run ends")


class SandboxConfig(BaseModel):
    """How processes and WebAssembly tools are confined."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["bwrap", "off"] = Field(
        "bwrap", description="bwrap: every process a tool starts runs in a bubblewrap jail (refused where bwrap cannot "
        "run); off: processes run unsandboxed, as without this plugin")
    bwrap: str = Field("bwrap", description="the bubblewrap executable")
    system_paths: list[str] = Field(default_factory=lambda: list(SYSTEM_PATHS),
                                    description="host directories mounted read-only in the jail")
    extra_ro_paths: list[str] = Field(default_factory=list, description="more read-only mounts (toolchains, caches)")
    hidden_paths: list[str] = Field(default_factory=lambda: list(HIDDEN_PATHS),
                                    description="paths under the system directories masked in the jail")
    network_grants: Literal["proxy", "all", "refuse"] = Field(
        "proxy", description="a shell_exec grant naming hosts: 'proxy' lets the jail reach only those hosts, through a "
        "proxy that checks each connection against the grant (HTTP_PROXY; other traffic has no route out); 'all' shares "
        "the host network with the jail; 'refuse' keeps the network off regardless")
    cpu_seconds: int = Field(60, gt=0, description="CPU time limit per process (RLIMIT_CPU)")
    memory_mb: int = Field(2048, gt=0, description="address-space limit per process, MiB (RLIMIT_AS)")
    processes: int = Field(128, gt=0, description="processes in the jail (cgroup pids.max; RLIMIT_NPROC where not root)")
    file_size_mb: int = Field(256, gt=0, description="largest file a jailed process may write, MiB (RLIMIT_FSIZE)")
    tmp_size_mb: int = Field(256, gt=0, description="size of the jail's private /tmp, MiB")
    open_files: int = Field(1024, gt=0, description="open file descriptors per process (RLIMIT_NOFILE)")
    wasm_tools: list[WasmToolConfig] = Field(default_factory=list, description="WebAssembly tools for this agent")
    wasm_memory_mb: int = Field(64, gt=0, description="default linear memory limit of a Wasm tool, MiB")
    wasm_fuel: int = Field(500_000_000, gt=0, description="default instruction budget of a Wasm tool call")
    wasm_timeout: float = Field(5.0, gt=0, description="default wall-clock deadline of a Wasm tool call, seconds")
    example_tools: bool = Field(True, description="register the shipped example Wasm tool text_stats")

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_off(cls, v: Any) -> Any:
        return "off" if v is False else v  # YAML 1.1 reads a bare `off` as false


DEFAULT = SandboxConfig()


def settings(ctx: Any) -> SandboxConfig:
    try:
        cfg = ctx.plugin_config("sandbox")
    except Exception:
        cfg = None
    return cfg if isinstance(cfg, SandboxConfig) else DEFAULT


@hookimpl
def register_config(register):
    register("sandbox", SandboxConfig)
