"""GenAI semantic conventions on every model call, failed ones included, decoded by a loopback OTLP
receiver (``opentelemetry-proto``) from a real ``clawkit run``; and an incoming W3C ``traceparent``
(``TRACEPARENT`` for the CLI, the request header for ``clawkit serve``) joins the caller's trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import clawkit_otel
from clawkit.testing.server import Fault, ModelServer, Reply

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


class Receiver(BaseHTTPRequestHandler):
    posts: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        type(self).posts.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def _attrs(kv) -> dict:
    out = {}
    for a in kv:
        v = a.value
        kind = v.WhichOneof("value")
        out[a.key] = [x.string_value for x in v.array_value.values] if kind == "array_value" else getattr(v, kind)
    return out


@pytest.mark.e2e
def test_a_failed_model_call_has_its_chat_span_and_duration_point_over_otlp(tmp_path):
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

    Receiver.posts = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    ws = tmp_path / "ws"
    ws.mkdir()
    with ModelServer() as model:
        # one call that works (a tool call), then the model server fails with a 503
        model.script(Reply.tool_calls([("list_dir", {"path": "."})]), Fault.status(503, "upstream is down"))
        agent = tmp_path / "agent.yaml"
        agent.write_text(json.dumps({"name": "helper", "model": {"name": "openai/test-model", "api_base": model.url, "api_key": "sk-test",
                                                                  "max_retries": 0}, "instructions": "Help.", "workspace": str(ws),
                                     "tools": ["list_dir"]}))
        env = {**os.environ, "CLAWKIT_OTEL": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{httpd.server_address[1]}",
               "CLAWKIT_HOME": str(tmp_path / "home"), "TRACEPARENT": f"00-{TRACE_ID}-{CALLER_SPAN}-01"}
        try:
            r = subprocess.run([sys.executable, "-m", "clawkit", "run", str(agent), "look around"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120)
        finally:
            httpd.shutdown()
            httpd.server_close()
        port = int(model.url.rsplit(":", 1)[1].split("/")[0])
    assert r.returncode != 0 and "503" in r.stderr, r.stderr
    spans = [s for p, b in Receiver.posts if p == "/v1/traces"
             for rs in ExportTraceServiceRequest.FromString(b).resource_spans for ss in rs.scope_spans for s in ss.spans]
    chats = sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time_unix_nano)
    assert [s.name for s in chats] == ["chat test-model", "chat test-model"]
    ok, failed = chats[0], _attrs(chats[1].attributes)
    good = _attrs(ok.attributes)
    assert ok.kind == Span.SPAN_KIND_CLIENT and chats[1].kind == Span.SPAN_KIND_CLIENT
    assert good["gen_ai.request.model"] == "test-model" == good["gen_ai.response.model"]  # no provider prefix on either
    assert good["gen_ai.provider.name"] == "openai" and good["gen_ai.response.id"].startswith("chatcmpl-")
    assert good["server.address"] == "127.0.0.1" and good["server.port"] == port
    assert good["gen_ai.usage.input_tokens"] > 0 and good["gen_ai.response.finish_reasons"] == ["tool_calls"]
    # the failed call: a chat span with error.type and an error status, no made-up tokens
    assert failed["gen_ai.request.model"] == "test-model" and failed["error.type"] == "503"
    assert failed["http.response.status_code"] == 503 and failed["server.port"] == port
    assert "gen_ai.usage.input_tokens" not in failed and "gen_ai.usage.output_tokens" not in failed
    assert chats[1].status.code == Status.STATUS_CODE_ERROR
    assert chats[1].end_time_unix_nano > chats[1].start_time_unix_nano
    run = next(s for s in spans if s.name == "invoke_agent helper")
    assert _attrs(run.attributes)["clawkit.run.outcome"] == "failed" and run.status.code == Status.STATUS_CODE_ERROR
    # TRACEPARENT: the run is a child of the caller's span, in the caller's trace
    assert run.trace_id.hex() == TRACE_ID and run.parent_span_id.hex() == CALLER_SPAN
    assert all(s.trace_id.hex() == TRACE_ID for s in spans)
    assert {c.parent_span_id for c in chats} == {run.span_id}
    points = [(m.name, _attrs(p.attributes)) for pth, b in Receiver.posts if pth == "/v1/metrics"
              for rm in ExportMetricsServiceRequest.FromString(b).resource_metrics for sm in rm.scope_metrics for m in sm.metrics
              for p in (m.histogram.data_points if m.WhichOneof("data") == "histogram" else ())]
    durations = [a for name, a in points if name == "gen_ai.client.operation.duration"]
    assert {a.get("error.type", "") for a in durations} == {"", "503"}  # the failed call's point too
    assert all(a["gen_ai.request.model"] == "test-model" for a in durations)


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    clawkit_otel.install(tp, MeterProvider(metric_readers=[InMemoryMetricReader()]))
    yield exporter
    clawkit_otel.uninstall()


@pytest.mark.e2e
def test_a_served_request_with_a_traceparent_joins_the_callers_trace(spans, tmp_path, monkeypatch):
    import openai
    from clawkit_serve.testing import make_key, respond, serve, write_agent

    monkeypatch.delenv("TRACEPARENT", raising=False)
    with ModelServer() as model:
        model.script(respond)
        db = tmp_path / "server.db"
        key = make_key(db, "full")
        served = serve([write_agent(tmp_path, model, "helper", tools=[])], db)
        try:
            client = openai.OpenAI(base_url=served.url + "/v1", api_key=key, max_retries=0, timeout=60)
            client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: joined"}],
                                           extra_headers={"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"})
            client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: alone"}])
        finally:
            served.stop()
    runs = [s for s in spans.get_finished_spans() if s.name == "invoke_agent helper"]
    assert len(runs) == 2
    joined, alone = runs
    assert format(joined.context.trace_id, "032x") == TRACE_ID and format(joined.parent.span_id, "016x") == CALLER_SPAN
    assert joined.parent.is_remote
    assert alone.parent is None and format(alone.context.trace_id, "032x") != TRACE_ID  # no header: a trace of its own
    chat = next(s for s in spans.get_finished_spans() if s.name == "chat test-model" and s.parent.span_id == joined.context.span_id)
    assert format(chat.context.trace_id, "032x") == TRACE_ID


def test_a_span_started_after_its_trace_left_stays_its_parents_child(spans):
    """A background sub-agent still going when the run that started it ended: its spans leave later,
    still in the run's trace, under the tool call that started it."""
    t = clawkit_otel._telemetry
    run = t._start("invoke_agent parent", "internal", {})
    tool = t._start("execute_tool spawn", "internal", {}, run)
    t._end(run)  # the run ends first (the tool span ends with it)
    late = t._start("invoke_agent background", "internal", {}, tool)
    t._end(late)
    got = {s.name: s for s in spans.get_finished_spans()}
    assert got["invoke_agent background"].parent.span_id == got["execute_tool spawn"].context.span_id
    assert got["invoke_agent background"].context.trace_id == got["invoke_agent parent"].context.trace_id
    assert t._trees == {}  # nothing kept behind
