"""Getting recorded spans and metric points out of the process, never slowing a run down.

The plugin records spans as plain :class:`Rec` objects (no OpenTelemetry import while a run
is going). A finished trace (a run and everything under it) is handed to :class:`Exporter`:

* tests pass their own SDK providers (``install``): replayed at once, synchronously;
* a long-lived process (``clawkit serve``) exports from a background thread, which builds
  the SDK pipeline (``OTEL_*`` variables) the first time, ``OTEL_BSP_SCHEDULE_DELAY`` (5 s)
  after the first trace;
* a one-shot ``clawkit run`` ends before that: at exit (:meth:`Exporter.flush`) the OTLP
  endpoint is probed first (one TCP connect, bounded); a collector that is down costs that
  connect and ONE warning, the SDK is not even imported. A collector that is up gets the
  spans, with the final flush bounded by ``CLAWKIT_OTEL_EXIT_TIMEOUT`` (default 2 s): the
  exporter's retries never hold the process at exit.

The SDK's own export-failure messages are cut to one per process (with ours).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("clawkit.otel")
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")


class Rec:
    """A span being recorded: name, kind (``internal``/``client``), attributes, times (ns since
    the epoch), parent (a Rec, a W3C ``traceparent`` string, or None) and error description."""

    __slots__ = ("name", "kind", "attributes", "start", "end", "parent", "error", "root", "context")

    def __init__(self, name: str, kind: str, attributes: dict[str, Any], parent: Any = None, start: int | None = None):
        self.name, self.kind, self.attributes, self.parent = name, kind, attributes, parent
        self.start = start if start is not None else time.time_ns()
        self.end: int | None = None
        self.error: str | None = None
        # a trace leaves when its root ends; a span started under a root that already left (a background
        # sub-agent still going) leaves on its own, still a child of its parent
        self.root: Rec = parent.root if isinstance(parent, Rec) and parent.root.end is None else self
        self.context: Any = None  # the exported span's SpanContext, once replayed

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def set_error(self, description: str) -> None:
        self.error = description


class _Once(logging.Filter):
    """Lets one export-failure message through per process (the SDK retries and logs per batch)."""

    said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        if _Once.said:
            return False
        _Once.said = True
        return True


_ONCE = _Once()
for _name in ("clawkit.otel", "opentelemetry.exporter.otlp.proto.http.trace_exporter",
              "opentelemetry.exporter.otlp.proto.http.metric_exporter", "opentelemetry.exporter.otlp.common.http",
              "opentelemetry.sdk.trace.export", "opentelemetry.sdk.metrics._internal.export",
              "opentelemetry.sdk._shared_internal"):
    logging.getLogger(_name).addFilter(_ONCE)


def _float_env(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def otlp_endpoint(signal: str) -> str:
    """The URL the OTLP/HTTP exporter of ``signal`` (traces, metrics) sends to."""
    own = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    if own:
        return own
    return os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318").rstrip("/") + f"/v1/{signal}"


def unreachable(url: str, timeout: float) -> str | None:
    """Why nothing listens at ``url`` (one TCP connect), or None when something does."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        socket.create_connection((parts.hostname or "localhost", port), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return None


class _Pipeline:
    """The SDK side: a tracer and instruments to replay records into."""

    def __init__(self, tracer_provider: Any, meter_provider: Any, owned: bool):
        self.tp, self.mp, self.owned = tracer_provider, meter_provider, owned
        self.tracer = tracer_provider.get_tracer("clawkit")
        self.meter = meter_provider.get_meter("clawkit")
        self.instruments: dict[str, Any] = {}

    @classmethod
    def from_env(cls) -> "_Pipeline":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "clawkit")})
        tp = TracerProvider(resource=resource, shutdown_on_exit=False)  # exit is ours to bound
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
        return cls(tp, MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False), owned=True)

    def replay(self, spans: list[Rec], points: list[tuple[str, str, str, float, dict[str, Any]]]) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        real: dict[int, Any] = {}
        for r in spans:  # in creation order: a parent before its children
            context = None
            if isinstance(r.parent, Rec) and id(r.parent) in real:
                context = trace.set_span_in_context(real[id(r.parent)])
            elif isinstance(r.parent, Rec) and r.parent.context is not None:  # exported earlier
                context = trace.set_span_in_context(trace.NonRecordingSpan(r.parent.context))
            elif isinstance(r.parent, str):
                context = TraceContextTextMapPropagator().extract({"traceparent": r.parent})
            span = self.tracer.start_span(r.name, context=context, kind=SpanKind.CLIENT if r.kind == "client" else SpanKind.INTERNAL,
                                          attributes=r.attributes, start_time=r.start)
            if r.error is not None:
                span.set_status(Status(StatusCode.ERROR, r.error))
            real[id(r)] = span
            r.context = span.get_span_context()
        for r in spans:
            real[id(r)].end(end_time=r.end or time.time_ns())
        for kind, name, unit, value, attrs in points:
            inst = self.instruments.get(name)
            if inst is None:
                make = self.meter.create_counter if kind == "counter" else self.meter.create_histogram
                inst = self.instruments[name] = make(name, unit=unit)
            (inst.add if kind == "counter" else inst.record)(value, attrs)

    def flush(self, timeout: float) -> bool:
        ok = True
        for p in (self.tp, self.mp):
            try:
                ok = p.force_flush(timeout_millis=int(timeout * 1000)) is not False and ok
            except Exception as exc:  # an unreachable collector never fails a run
                log.error("telemetry export failed: %s", exc)
                ok = False
        return ok

    def shutdown(self) -> None:
        for p in (self.tp, self.mp):
            try:
                p.shutdown()
            except Exception:
                pass


class Exporter:
    """Takes finished traces (:meth:`submit`) and gets them out; see the module docstring."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None):
        self._pipeline = _Pipeline(tracer_provider, meter_provider, owned=False) if tracer_provider is not None else None
        self._sync = self._pipeline is not None
        self._queue: list[tuple[list[Rec], list[Any]]] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._worker: threading.Thread | None = None
        self._exported = False  # the background thread replayed traces since the last flush

    def submit(self, spans: list[Rec], points: list[Any]) -> None:
        if self._sync:
            self._pipeline.replay(spans, points)
            return
        with self._lock:
            self._queue.append((spans, points))
            if self._timer is None:
                delay = _float_env("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000
                self._timer = threading.Timer(delay, self._background)
                self._timer.daemon = True
                self._timer.start()

    def _drain(self) -> list[tuple[list[Rec], list[Any]]]:
        with self._lock:
            batches, self._queue, self._timer = self._queue, [], None
        return batches

    def _background(self) -> None:
        """A process that outlives the schedule delay (serve): the SDK pipeline, in this thread."""
        self._worker = threading.current_thread()
        try:
            if self._pipeline is None:
                self._pipeline = _Pipeline.from_env()
            for spans, points in self._drain():
                self._pipeline.replay(spans, points)
                self._exported = True  # (flush: the processor's queue, then)
        except Exception as exc:
            log.error("telemetry export failed: %s", exc)

    def flush(self) -> None:
        """Export what is pending now, within ``CLAWKIT_OTEL_EXIT_TIMEOUT`` seconds (agent close, exit)."""
        if self._sync:
            self._pipeline.flush(5.0)
            return
        limit = _float_env("CLAWKIT_OTEL_EXIT_TIMEOUT", 2.0)
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
        worker = self._worker
        busy = worker is not None and worker.is_alive()
        with self._lock:
            pending = sum(len(spans) for spans, _ in self._queue)
        if not pending and not self._exported and not busy:
            return
        for signal in ("traces", "metrics"):  # first: a collector that is down is not worth any wait
            if os.environ.get(f"OTEL_{signal.upper()}_EXPORTER", "otlp").lower() != "otlp":
                continue
            url = otlp_endpoint(signal)
            why = unreachable(url, min(limit, 1.0))
            if why is not None:
                self._drain()
                log.error("no OTLP collector at %s (%s): %d span(s) of this process not exported", url, why, pending)
                return
        if busy:
            worker.join(limit)
        batches = self._drain()
        self._exported = False
        done = threading.Event()

        def export() -> None:
            try:
                if self._pipeline is None:
                    self._pipeline = _Pipeline.from_env()
                for spans, points in batches:
                    self._pipeline.replay(spans, points)
                if not self._pipeline.flush(limit):
                    log.error("telemetry export did not finish within %gs", limit)
            except Exception as exc:
                log.error("telemetry export failed: %s", exc)
            finally:
                done.set()

        # a daemon thread: the exporter's retries and backoff never hold the process past the limit
        threading.Thread(target=export, name="clawkit-otel-exit", daemon=True).start()
        if not done.wait(limit + 0.5):
            log.error("telemetry export still running after %gs; abandoned", limit)

    def shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._sync:
            self._pipeline.shutdown()
        elif self._pipeline is not None:
            threading.Thread(target=self._pipeline.shutdown, daemon=True).start()
