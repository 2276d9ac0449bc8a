"""Spans and metrics for runs, model calls, tool calls and sub-agents (GenAI semantic conventions).

* ``invoke_agent {agent}`` — one turn (a run): ``gen_ai.agent.name``, ``gen_ai.conversation.id``,
  token totals, ``clawkit.run.outcome``; a run started inside a tool call is a child of that
  tool's span (a sub-agent: ``clawkit.agent.subagent = true``).
* ``chat {model}`` — each model call, from the kernel's ``llm.call`` / ``llm.failed`` events (its
  own start time and duration): ``gen_ai.request.model`` (without the provider prefix, like
  ``gen_ai.response.model``), ``gen_ai.provider.name``, ``server.address``/``server.port``,
  ``gen_ai.response.id``, ``gen_ai.usage.input_tokens``/``output_tokens`` (omitted when unknown),
  ``gen_ai.response.finish_reasons``, ``clawkit.usage.cost``, ``clawkit.usage.estimated`` (true
  when the provider reported no usage and the tokens were counted locally); a failed call has
  ``error.type`` and an error status.
* ``execute_tool {tool}`` — each tool call: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``clawkit.tool.risk``, ``clawkit.tool.decision`` (allowed, approved, denied, blocked).

A run joins an incoming W3C trace: the ``traceparent`` header of the served request that started
it, else (outside serve) the ``TRACEPARENT`` environment variable.

Spans are recorded as plain objects and exported by :mod:`clawkit_otel.export` (never blocking a run).

Metrics: ``gen_ai.client.operation.duration`` (s, failed calls included, with ``error.type``)
and ``gen_ai.client.token.usage`` (tokens, when known) per model call, ``clawkit.tool.duration`` (s) per tool call, ``clawkit.run.duration`` (s) and
``clawkit.usage.cost`` (USD) per run.
"""

from __future__ import annotations

import contextvars
import json
import os
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from .export import TRACEPARENT, Exporter, Rec

_tool_span: contextvars.ContextVar[Any] = contextvars.ContextVar("clawkit_otel_tool_span", default=None)
NS = 1_000_000_000
# where a provider is when the agent names no api_base (server.address / server.port)
_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com", "gemini": "generativelanguage.googleapis.com",
          "mistral": "api.mistral.ai", "groq": "api.groq.com", "openrouter": "openrouter.ai", "deepseek": "api.deepseek.com"}


def _provider_name(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


def _bare(model: str) -> str:
    """``openai/gpt-4o`` → ``gpt-4o``: the model as the provider names it (as in its responses)."""
    return model.split("/", 1)[1] if "/" in model else model


def _server(endpoint: Any, provider: str) -> dict[str, Any]:
    if endpoint:
        try:
            parts = urlsplit(str(endpoint))
            if parts.hostname:
                return {"server.address": parts.hostname, "server.port": parts.port or (443 if parts.scheme == "https" else 80)}
        except ValueError:
            return {}
        return {}
    host = _HOSTS.get(provider)
    return {"server.address": host, "server.port": 443} if host else {}


def _tokens(usage: dict[str, Any]) -> dict[str, int]:
    """Token attributes when the usage is known (reported or estimated); none at all when not."""
    if not (usage.get("total_tokens") or usage.get("prompt_tokens") or usage.get("completion_tokens")):
        return {}
    return {"gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0),
            "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0)}


def incoming_parent() -> str | None:
    """The caller's W3C ``traceparent``: a served request's header, else ``TRACEPARENT`` (CLI)."""
    from clawkit.context import incoming_traceparent

    value = incoming_traceparent.get()
    if value is None:  # not inside a served request
        value = os.environ.get("TRACEPARENT")
    value = (value or "").strip().lower()
    return value if TRACEPARENT.match(value) else None


class Telemetry:
    def __init__(self, exporter: Exporter, *, capture_content: bool = False):
        self.exporter = exporter
        self.capture_content = capture_content
        self._runs: dict[str, Rec] = {}  # run_id -> its span
        self._tools: dict[tuple[str, str], tuple[Rec, float, str]] = {}
        self._inputs: dict[str, Any] = {}
        self._trees: dict[int, list[Rec]] = {}  # id(root) -> the spans of that trace, in creation order
        self._points: list[tuple[str, str, str, float, dict[str, Any]]] = []
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> "Telemetry":
        """Exported as the standard ``OTEL_*`` variables say (OTLP over HTTP by default)."""
        capture = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").lower() == "true"
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        if protocol != "http/protobuf":
            from .export import log

            log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: clawkit-otel exports OTLP over HTTP (http/protobuf) only", protocol)
        t = cls(Exporter(), capture_content=capture)
        import atexit

        atexit.register(t.flush)
        return t

    def flush(self) -> None:
        self.exporter.flush()

    def shutdown(self) -> None:
        self.exporter.shutdown()

    # recording --------------------------------------------------------------------------------

    def _start(self, name: str, kind: str, attrs: dict[str, Any], parent: Any = None, start: int | None = None) -> Rec:
        rec = Rec(name, kind, attrs, parent, start)
        with self._lock:
            self._trees.setdefault(id(rec.root), []).append(rec)
        return rec

    def _end(self, rec: Rec, end: int | None = None) -> None:
        rec.end = end if end is not None else time.time_ns()
        if rec.root is not rec:
            return
        with self._lock:  # a whole trace finished: out it goes
            spans = self._trees.pop(id(rec), [])
            points, self._points = self._points, []
        for s in spans:
            if s.end is None:  # (a child left open: ends with its trace)
                s.end = rec.end
        self.exporter.submit(spans, points)

    def _point(self, kind: str, name: str, unit: str, value: float, attrs: dict[str, Any]) -> None:
        with self._lock:
            self._points.append((kind, name, unit, value, attrs))

    # runs -------------------------------------------------------------------------------------

    def run_start(self, ctx: Any, message: Any) -> None:
        # a sub-agent's run names the step (tool call) that spawned it; else the tool span of this task
        parent = None
        step = (getattr(ctx, "parent_run_id", None), getattr(ctx, "parent_step_id", None))
        if step[0] and step[1]:
            with self._lock:
                found = self._tools.get(step)
            parent = found[0] if found else None
        if parent is None:
            parent = _tool_span.get()
        subagent = parent is not None
        if parent is None:
            parent = incoming_parent()  # the caller's trace (a traceparent string), if any
        model = ctx.agent.model.name
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": ctx.agent.name,
                 "gen_ai.conversation.id": ctx.session.id, "gen_ai.provider.name": _provider_name(model),
                 "gen_ai.request.model": _bare(model), "clawkit.run.id": ctx.run_id, "clawkit.trace.id": ctx.trace_id,
                 "clawkit.channel": ctx.channel, "clawkit.agent.subagent": subagent}
        if self.capture_content:
            attrs["gen_ai.input.messages"] = json.dumps([{"role": "user", "content": message.content}])
        span = self._start(f"invoke_agent {ctx.agent.name}", "internal", attrs, parent)
        with self._lock:
            self._runs[ctx.run_id] = span

    def _run_end(self, event: Any, outcome: str) -> None:
        with self._lock:
            span = self._runs.pop(event.run_id, None)
            self._inputs.pop(event.run_id, None)
        if span is None:
            return
        usage = event.data.get("usage") or {}
        span.attributes.update(_tokens(usage))
        if usage.get("estimated"):  # the provider reported none: the tokens were counted locally
            span.set_attribute("clawkit.usage.estimated", True)
        agent = str(event.data.get("agent", ""))
        if usage.get("cost") is not None:
            span.set_attribute("clawkit.usage.cost", float(usage["cost"]))
            self._point("counter", "clawkit.usage.cost", "USD", float(usage["cost"]), {"gen_ai.agent.name": agent})
        span.set_attribute("clawkit.run.outcome", outcome)
        if outcome == "failed":
            span.set_error(str(event.data.get("error", "")))
            span.set_attribute("error.type", str(event.data.get("error_type") or event.data.get("error", "")))
        if event.data.get("duration") is not None:
            self._point("histogram", "clawkit.run.duration", "s", float(event.data["duration"]),
                        {"gen_ai.agent.name": agent, "clawkit.run.outcome": outcome})
        self._end(span)

    # model calls ------------------------------------------------------------------------------

    def model_input(self, ctx: Any, request: Any) -> None:
        self._inputs[ctx.run_id] = json.dumps([{"role": m.role, "content": m.content} for m in request.messages][-20:])

    def _model_call(self, event: Any, failed: bool = False) -> None:
        d = event.data
        with self._lock:
            run = self._runs.get(event.run_id)
        model = str(d.get("model") or "")
        provider, request_model = _provider_name(model), _bare(model)
        usage = d.get("usage") or {}
        started = float(d.get("started") or event.ts)
        duration = float(d.get("duration") or 0.0)
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                                 "gen_ai.request.model": request_model, **_server(d.get("endpoint"), provider),
                                 "clawkit.model.latency": duration}
        if failed:
            # the ProviderError kind (timeout, rate_limit, connection…); a plain HTTP error: its status code
            kind = str(d.get("error_type") or "error")
            attrs["error.type"] = str(d["status"]) if kind == "http" and d.get("status") else kind
            if d.get("status"):
                attrs["http.response.status_code"] = int(d["status"])
        else:
            attrs["gen_ai.response.model"] = _bare(str(d.get("response_model") or model))
            if d.get("response_id"):
                attrs["gen_ai.response.id"] = str(d["response_id"])
            attrs.update(_tokens(usage))
            attrs["gen_ai.response.finish_reasons"] = [str(d.get("finish_reason") or "stop")]
            attrs["clawkit.model.tool_calls"] = int(d.get("tool_calls") or 0)
        if d.get("fallback_to"):  # model fallbacks (docs/fallbacks.md): which model took the request over
            attrs["clawkit.model.fallback_to"] = str(d["fallback_to"])
        if d.get("fallback_from"):
            attrs["clawkit.model.fallback_from"] = [str(m) for m in d["fallback_from"]]
        if usage.get("cost") is not None:
            attrs["clawkit.usage.cost"] = float(usage["cost"])
        if usage.get("estimated"):  # the provider reported none: the tokens were counted locally
            attrs["clawkit.usage.estimated"] = True
        if self.capture_content and event.run_id in self._inputs:
            attrs["gen_ai.input.messages"] = self._inputs[event.run_id]
        span = self._start(f"chat {request_model}", "client", attrs, run, start=int(started * NS))
        if failed:
            span.set_error(f"{attrs['error.type']}: the model call failed")
        metric_attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, "gen_ai.request.model": request_model,
                        **{k: v for k, v in attrs.items() if k in ("server.address", "server.port", "error.type", "gen_ai.response.model")}}
        self._point("histogram", "gen_ai.client.operation.duration", "s", duration, metric_attrs)
        if "gen_ai.usage.input_tokens" in attrs:
            for kind in ("input", "output"):
                self._point("histogram", "gen_ai.client.token.usage", "{token}", attrs[f"gen_ai.usage.{kind}_tokens"],
                            {**metric_attrs, "gen_ai.token.type": kind})
        self._end(span, int((started + duration) * NS))

    # tool calls -------------------------------------------------------------------------------

    def tool_start(self, ctx: Any, call: Any) -> None:
        with self._lock:
            run = self._runs.get(ctx.run_id)
        risk = "safe"
        tool = ctx.tools.get(call.name) if ctx.tools is not None else None
        if tool is not None:
            risk = tool.definition.risk.value
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.id,
                 "gen_ai.tool.type": "function", "clawkit.tool.risk": risk, "clawkit.tool.decision": "allowed"}
        if self.capture_content:
            attrs["gen_ai.tool.call.arguments"] = json.dumps(call.arguments, default=str)
        span = self._start(f"execute_tool {call.name}", "internal", attrs, run)
        with self._lock:
            self._tools[(ctx.run_id, call.id)] = (span, time.monotonic(), call.name)
        _tool_span.set(span)  # a run started inside this call (a sub-agent) nests under it

    def tool_end(self, ctx: Any, call: Any, result: Any) -> None:
        self._tool_done(ctx.run_id, call.id, error=bool(getattr(result, "is_error", False)),
                        content=getattr(result, "content", None))

    def _tool_done(self, run_id: str | None, call_id: str | None, *, error: bool = False, decision: str | None = None,
                   reason: str | None = None, content: str | None = None) -> None:
        with self._lock:
            found = self._tools.pop((run_id, call_id), None)
        if found is None:
            return
        span, started, name = found
        if _tool_span.get() is span:
            _tool_span.set(None)
        if decision:
            span.set_attribute("clawkit.tool.decision", decision)
        if error:
            span.set_error(reason or "tool error")
        if self.capture_content and content is not None:
            span.set_attribute("gen_ai.tool.call.result", content[:8000])
        duration = time.monotonic() - started
        self._point("histogram", "clawkit.tool.duration", "s", duration,
                    {"gen_ai.tool.name": name, "clawkit.tool.decision": decision or ("error" if error else "allowed")})
        self._end(span)

    # events -----------------------------------------------------------------------------------

    def event(self, event: Any) -> None:
        # the types handled here are the plugin's on_event filter (clawkit_otel.on_event's @on_events): keep both in step
        t, d = event.type, event.data
        if t == "llm.call":
            self._model_call(event)
        elif t == "llm.failed":
            self._model_call(event, failed=True)
        elif t == "turn.end":
            self._run_end(event, str(d.get("stop_reason") or "done"))
        elif t == "turn.failed":
            self._run_end(event, "failed")
        elif t == "tool.approval":
            key = (event.run_id, d.get("call_id"))
            with self._lock:
                found = self._tools.get(key)
            if found is not None:
                found[0].set_attribute("clawkit.tool.decision", "approved" if d.get("approved") else "denied")
                found[0].set_attribute("clawkit.tool.approval_by", str(d.get("by") or ""))
                if not d.get("approved"):
                    self._tool_done(event.run_id, d.get("call_id"), error=True, decision="denied", reason="not approved")
        elif t == "tool.blocked":
            self._tool_done(event.run_id, d.get("call_id"), error=True, decision="blocked", reason=str(d.get("reason") or "blocked"))
        elif t == "agent.close":
            self.flush()
