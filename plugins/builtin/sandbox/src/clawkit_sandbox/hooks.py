"""The sandbox's hooks (the entry point names this module; the kernel reads it without importing
it): confining processes, reporting confinement, Wasm tools; the config section and ``clawkit
doctor`` come from their own modules."""

from __future__ import annotations

from typing import Any

from clawkit import hookimpl
from clawkit.lazy import loaded

from .config import register_config, settings
from .doctor import register as register_commands


@hookimpl
def confine_process(ctx, spec):
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
    wasm = loaded("clawkit_sandbox.wasm")
    if wasm is not None:  # no Wasm tool ever registered: nothing to release, nothing to import
        wasm.release(runtime)
