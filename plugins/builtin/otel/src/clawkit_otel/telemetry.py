"""Spans and metrics for runs, model calls, tool calls and sub-agents (GenAI semantic conventions).

* ``invoke_agent {agent}`` — one turn (a run): ``gen_ai.agent.name``, ``gen_ai.conversation.id``,
  token totals, ``clawkit.run.outcome``; a run started inside a tool call is a child of that
  tool's span (a sub-agent: ``clawkit.agent.subagent = true``).
* ``chat {model}`` — each model call, from the kernel's ``llm.call`` event (its own start time
  and duration): ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``/``output_tokens``,
  ``gen_ai.response.finish_reasons``, ``clawkit.usage.cost``, and ``clawkit.usage.estimated``
  (true when the provider reported no usage and the tokens were counted locally).
* ``execute_tool {tool}`` — each tool call: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``clawkit.tool.risk``, ``clawkit.tool.decision`` (allowed, approved, denied, blocked).

Metrics: ``gen_ai.client.operation.duration`` (s) and ``gen_ai.client.token.usage`` (tokens)
per model call, ``clawkit.tool.duration`` (s) per tool call, ``clawkit.run.duration`` (s) and
``clawkit.usage.cost`` (USD) per run.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import threading
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

log = logging.getLogger("clawkit.otel")
_tool_span: contextvars.ContextVar[Any] = contextvars.ContextVar("clawkit_otel_tool_span", default=None)
NS = 1_000_000_000


def _provider_name(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


class Telemetry:
    def __init__(self, tracer_provider: Any, meter_provider: Any, *, capture_content: bool = False):
        self.tracer_provider, self.meter_provider = tracer_provider, meter_provider
        self.tracer = tracer_provider.get_tracer("clawkit")
        meter = meter_provider.get_meter("clawkit")
        self.capture_content = capture_content
        self.op_duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s", description="GenAI operation duration")
        self.token_usage = meter.create_histogram("gen_ai.client.token.usage", unit="{token}", description="tokens used per model call")
        self.tool_duration = meter.create_histogram("clawkit.tool.duration", unit="s", description="tool call duration")
        self.run_duration = meter.create_histogram("clawkit.run.duration", unit="s", description="agent run (turn) duration")
        self.cost = meter.create_counter("clawkit.usage.cost", unit="USD", description="model cost")
        self._runs: dict[str, tuple[Any, Any]] = {}  # run_id -> (span, ctx)
        self._tools: dict[tuple[str, str], tuple[Any, float, str]] = {}
        self._inputs: dict[str, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> "Telemetry":
        """Providers configured by the standard ``OTEL_*`` variables (OTLP over HTTP by default)."""
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "clawkit")})
        tp = TracerProvider(resource=resource)
        traces = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").lower()
        if traces == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        elif traces == "console":
            tp.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        readers = []
        metrics = os.environ.get("OTEL_METRICS_EXPORTER", "otlp").lower()
        if metrics == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
        elif metrics == "console":
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        if protocol != "http/protobuf":
            log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: clawkit-otel exports OTLP over HTTP (http/protobuf) only", protocol)
        capture = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").lower() == "true"
        t = cls(tp, MeterProvider(resource=resource, metric_readers=readers), capture_content=capture)
        import atexit

        atexit.register(t.shutdown)
        return t

    def flush(self) -> None:
        for p in (self.tracer_provider, self.meter_provider):
            try:
                p.force_flush()
            except Exception as exc:  # an unreachable collector never fails a run
                log.warning("telemetry flush failed: %s", exc)

    def shutdown(self) -> None:
        for p in (self.tracer_provider, self.meter_provider):
            try:
                p.shutdown()
            except Exception:
                pass

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
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": ctx.agent.name,
                 "gen_ai.conversation.id": ctx.session.id, "gen_ai.request.model": ctx.agent.model.name,
                 "clawkit.run.id": ctx.run_id, "clawkit.trace.id": ctx.trace_id, "clawkit.channel": ctx.channel,
                 "clawkit.agent.subagent": parent is not None}
        if self.capture_content:
            attrs["gen_ai.input.messages"] = json.dumps([{"role": "user", "content": message.content}])
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(f"invoke_agent {ctx.agent.name}", context=context, kind=SpanKind.INTERNAL, attributes=attrs)
        with self._lock:
            self._runs[ctx.run_id] = (span, trace.set_span_in_context(span))

    def _run_end(self, event: Any, outcome: str) -> None:
        with self._lock:
            found = self._runs.pop(event.run_id, None)
            self._inputs.pop(event.run_id, None)
        if found is None:
            return
        span, _ = found
        usage = event.data.get("usage") or {}
        span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("prompt_tokens") or 0))
        span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("completion_tokens") or 0))
        if usage.get("estimated"):  # the provider reported none: the tokens were counted locally
            span.set_attribute("clawkit.usage.estimated", True)
        if usage.get("cost") is not None:
            span.set_attribute("clawkit.usage.cost", float(usage["cost"]))
            self.cost.add(float(usage["cost"]), {"gen_ai.agent.name": str(event.data.get("agent", ""))})
        span.set_attribute("clawkit.run.outcome", outcome)
        if outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, str(event.data.get("error", ""))))
            span.set_attribute("error.type", str(event.data.get("error", "")))
        if event.data.get("duration") is not None:
            self.run_duration.record(float(event.data["duration"]), {"gen_ai.agent.name": str(event.data.get("agent", "")), "clawkit.run.outcome": outcome})
        span.end()

    # model calls ------------------------------------------------------------------------------

    def model_input(self, ctx: Any, request: Any) -> None:
        self._inputs[ctx.run_id] = json.dumps([{"role": m.role, "content": m.content} for m in request.messages][-20:])

    def _model_call(self, event: Any) -> None:
        d = event.data
        with self._lock:
            found = self._runs.get(event.run_id)
        model = str(d.get("model") or "")
        usage = d.get("usage") or {}
        started = float(d.get("started") or event.ts)
        duration = float(d.get("duration") or 0.0)
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": _provider_name(model), "gen_ai.request.model": model,
                 "gen_ai.response.model": str(d.get("response_model") or model),
                 "gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0),
                 "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0),
                 "gen_ai.response.finish_reasons": [str(d.get("finish_reason") or "stop")],
                 "clawkit.model.latency": duration, "clawkit.model.tool_calls": int(d.get("tool_calls") or 0)}
        if usage.get("cost") is not None:
            attrs["clawkit.usage.cost"] = float(usage["cost"])
        if usage.get("estimated"):  # the provider reported none: the tokens were counted locally
            attrs["clawkit.usage.estimated"] = True
        if self.capture_content and event.run_id in self._inputs:
            attrs["gen_ai.input.messages"] = self._inputs[event.run_id]
        span = self.tracer.start_span(f"chat {model}", context=found[1] if found else None, kind=SpanKind.CLIENT,
                                      attributes=attrs, start_time=int(started * NS))
        span.end(end_time=int((started + duration) * NS))
        metric_attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": attrs["gen_ai.provider.name"], "gen_ai.request.model": model}
        self.op_duration.record(duration, metric_attrs)
        self.token_usage.record(attrs["gen_ai.usage.input_tokens"], {**metric_attrs, "gen_ai.token.type": "input"})
        self.token_usage.record(attrs["gen_ai.usage.output_tokens"], {**metric_attrs, "gen_ai.token.type": "output"})

    # tool calls -------------------------------------------------------------------------------

    def tool_start(self, ctx: Any, call: Any) -> None:
        with self._lock:
            found = self._runs.get(ctx.run_id)
        risk = "safe"
        tool = ctx.tools.get(call.name) if ctx.tools is not None else None
        if tool is not None:
            risk = tool.definition.risk.value
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.id,
                 "gen_ai.tool.type": "function", "clawkit.tool.risk": risk, "clawkit.tool.decision": "allowed"}
        if self.capture_content:
            attrs["gen_ai.tool.call.arguments"] = json.dumps(call.arguments, default=str)
        span = self.tracer.start_span(f"execute_tool {call.name}", context=found[1] if found else None, attributes=attrs)
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
            span.set_status(Status(StatusCode.ERROR, reason or "tool error"))
        if self.capture_content and content is not None:
            span.set_attribute("gen_ai.tool.call.result", content[:8000])
        duration = time.monotonic() - started
        self.tool_duration.record(duration, {"gen_ai.tool.name": name, "clawkit.tool.decision": decision or ("error" if error else "allowed")})
        span.end()

    # events -----------------------------------------------------------------------------------

    def event(self, event: Any) -> None:
        t, d = event.type, event.data
        if t == "llm.call":
            self._model_call(event)
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
