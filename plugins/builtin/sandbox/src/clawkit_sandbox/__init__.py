"""clawkit-sandbox: processes in a bubblewrap jail, untrusted tools in WebAssembly.

* ``confine_process`` (the kernel's process-execution hook): every process a tool
  starts (``shell_exec``…) runs inside a bubblewrap jail (:mod:`clawkit_sandbox.jail`);
  a grant naming hosts lets it reach only those, through a proxy that checks and audits
  each connection (:mod:`clawkit_sandbox.network`); where bwrap cannot run the process is
  refused with the cause and the setting (``plugins.sandbox.mode: off``) that allows
  unsandboxed execution. Each jail is
  recorded as a ``tool.sandbox`` event, which the policy's audit ledger keeps.
* WebAssembly tools (:mod:`clawkit_sandbox.wasm`): WASI modules declared in
  ``plugins.sandbox.wasm_tools`` (or registered by a plugin with :func:`wasm_tool`),
  run with wasmtime: a fresh instance per call or one per task (an agent run, destroyed
  when it ends); fuel, memory and wall-clock limits per call, only granted directories
  preopened, no network, and host tools reachable only through the kernel's gates.
* ``clawkit doctor``: does the sandbox work here?
"""

from __future__ import annotations

from typing import Any

from clawkit import hookimpl
from clawkit.lazy import loaded

__all__ = ["SandboxConfig", "WasmToolConfig", "wasm_tool", "doctor_report"]


def __getattr__(name: str) -> Any:
    # ``clawkit --help`` imports every plugin: pydantic and wasmtime load on first use
    from importlib import import_module

    where = {"SandboxConfig": ".config", "WasmToolConfig": ".config", "wasm_tool": ".wasm", "doctor_report": ".doctor"}
    if name not in where:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where[name], __name__), name)
    globals()[name] = value
    return value


@hookimpl
def register_config(register):
    from .config import SandboxConfig

    register("sandbox", SandboxConfig)


@hookimpl
def confine_process(ctx, spec):
    from .config import settings

    cfg = settings(ctx)
    if cfg.mode == "off":
        _record(ctx, spec, {"mode": "off", "mounts": [], "network": "host (unsandboxed: plugins.sandbox.mode is off)"})
        return None
    from clawkit.process import ProcessRefused

    from .jail import build

    granted = ((getattr(ctx, "state", None) or {}).get("granted") or {}).get(spec.tool) or {}
    try:
        launch = build(ctx, spec, cfg, granted)
    except ProcessRefused as exc:
        _record(ctx, spec, {"mode": "refused", "reason": str(exc)})
        raise
    _record(ctx, spec, launch.sandbox)
    return launch


@hookimpl
def process_confinement(ctx, tool):
    """Before a call: would ``tool``'s processes be jailed, and could they reach a network from there?
    (The jail has no network unless a grant names hosts for the tool; where bwrap cannot run, the
    process is refused, never run unjailed.)"""
    from .config import settings

    cfg = settings(ctx)
    if cfg.mode == "off":
        return {"confined": False, "network": True, "why": "plugins.sandbox.mode is off: processes run unsandboxed"}
    granted = ((getattr(ctx, "state", None) or {}).get("granted") or {}).get(tool) or {}
    hosts = list(granted.get("hosts") or [])
    if hosts and cfg.network_grants != "refuse":
        return {"confined": True, "network": True,
                "why": f"jailed, but a grant lets it reach {', '.join(hosts[:3])} (network_grants: {cfg.network_grants})"}
    return {"confined": True, "network": False, "why": "jailed by bubblewrap with no network"}


def _record(ctx: Any, spec: Any, sandbox: dict[str, Any]) -> None:
    emit = getattr(ctx, "emit", None)
    if emit is not None:  # a ``tool.*`` event: the policy plugin writes it to the audit ledger
        emit("tool.sandbox", call_id=getattr(ctx, "step_id", None), tool=spec.tool, **sandbox)


@hookimpl
def register_tools(register, agent):
    from .wasm import tools_for

    for t in tools_for(agent):
        register(t)


@hookimpl
def agent_closing(agent, runtime):
    wasm = loaded(__name__ + ".wasm")
    if wasm is not None:  # no Wasm tool ever registered: nothing to release, nothing to import
        wasm.release(runtime)


@hookimpl
def register_commands(cli):
    from .doctor import register

    register(cli)
