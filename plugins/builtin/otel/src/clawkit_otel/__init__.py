"""clawkit-otel: OpenTelemetry traces and metrics for agent runs (GenAI semantic conventions),
and ``clawkit logs`` — recent runs across the workspaces this user has used.

Off unless enabled (``CLAWKIT_OTEL=1`` or ``plugins: {otel: {export: true}}``): until then no
OpenTelemetry module is imported and nothing is sent. Exporters follow the standard
``OTEL_*`` variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``,
``OTEL_TRACES_EXPORTER``…). Message content is never recorded unless ``capture_content``
(or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``). See docs/plugins/otel.md.
"""

from __future__ import annotations

import os
from typing import Any

from clawkit import hook_order, hookimpl
from clawkit.hookspecs import on_events
from clawkit.lazy import lazy_module

_logs = lazy_module(__name__, "logs")  # imported by the first hook call

_telemetry: Any = None  # the running Telemetry, once a turn enabled it
_off: set[int] = set()  # ids of configs seen with telemetry off (cheap repeat check)
_installed = False  # install() was called: on for every agent


def _env_on() -> bool:
    return os.environ.get("CLAWKIT_OTEL", "").lower() in ("1", "true", "yes", "on") and \
        os.environ.get("OTEL_SDK_DISABLED", "").lower() != "true"


def _for(ctx: Any) -> Any:
    """The Telemetry when this turn's agent has it on, else None (no import)."""
    global _telemetry
    if _installed:
        return _telemetry
    cfg = ctx.agent
    if id(cfg) in _off:
        return None
    section = cfg.plugin("otel") if hasattr(cfg, "plugin") else None
    on = _env_on() or bool(getattr(section, "export", False))
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        on = False
    if not on:
        _off.add(id(cfg))
        return None
    if _telemetry is None:
        from .telemetry import Telemetry

        _telemetry = Telemetry.from_env()
    _telemetry.capture_content |= bool(getattr(section, "capture_content", False))
    return _telemetry


def install(tracer_provider: Any, meter_provider: Any, *, capture_content: bool = False) -> Any:
    """Use these SDK providers (tests: in-memory exporters) instead of ones built from ``OTEL_*``."""
    global _telemetry, _installed
    from .export import Exporter
    from .telemetry import Telemetry

    _telemetry = Telemetry(Exporter(tracer_provider, meter_provider), capture_content=capture_content)
    _installed = True
    _off.clear()
    return _telemetry


def uninstall() -> None:
    global _telemetry, _installed
    if _telemetry is not None:
        _telemetry.shutdown()
    _telemetry, _installed = None, False
    _off.clear()


@hookimpl
def register_config(register):
    from .config import OtelConfig

    register("otel", OtelConfig)


@hookimpl
def register_commands(cli):
    from .logs import register

    register(cli)


@hookimpl(tryfirst=True)
@hook_order(5)
def message_received(ctx, message):
    _logs().remember_workspace(ctx)
    t = _for(ctx)
    if t is not None:
        t.run_start(ctx, message)


@hookimpl(trylast=True)
@hook_order(900)
def before_llm_call(ctx, request):
    if _telemetry is not None and _telemetry.capture_content and _for(ctx) is not None:
        _telemetry.model_input(ctx, request)


@hookimpl(trylast=True)
@hook_order(900)
def before_tool_call(ctx, call):
    t = _for(ctx) if _telemetry is not None else None
    if t is not None:
        t.tool_start(ctx, call)


@hookimpl(trylast=True)
@hook_order(900)
def after_tool_call(ctx, call, result):
    if _telemetry is not None:
        _telemetry.tool_end(ctx, call, result)


@hookimpl
@on_events("llm.call", "llm.failed", "turn.end", "turn.failed", "tool.approval", "tool.blocked", "agent.close")
def on_event(event):
    """The event types ``Telemetry.event`` records (the kernel calls this for no other: off by default, it
    was called for every event of every turn)."""
    if _telemetry is not None and (event.run_id is not None or event.type == "agent.close"):
        _telemetry.event(event)
