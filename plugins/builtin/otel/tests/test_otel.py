"""Telemetry through a real turn (loopback model over HTTP, every builtin plugin loaded): spans and
metrics in the SDK's in-memory exporters, and once over OTLP/HTTP to a loopback receiver."""

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
from clawkit import hookimpl
from clawkit.testing.server import Reply


@pytest.fixture
def otel():
    spans = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])

    def start(capture_content=False):
        clawkit_otel.install(tp, mp, capture_content=capture_content)
        return spans, reader

    yield start
    clawkit_otel.uninstall()


def metrics(reader):
    out = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = list(m.data.data_points)
    return out


class ChildAgentTool:
    """A tool that runs another agent's turn: a sub-agent, as the subagents plugin would."""

    def __init__(self):
        self.child = None

    @hookimpl
    def register_tools(self, register, agent):
        async def ask_child(question: str) -> str:
            """Ask the child agent a question."""
            return (await self.child.turn(question)).reply

        register(ask_child)


def full_agent(tmp_path, url, name="test-agent", tools=(), extra=()):
    """Every installed plugin (entry points) plus ``extra`` plugin objects, on the loopback model."""
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager
    from clawkit.runtime import load_config

    cfg, _ = load_config(_agent_file(tmp_path, url, name, tools=list(tools)))
    return Agent(cfg, pm=get_plugin_manager(extra=extra))


def test_spans_and_metrics_follow_the_genai_conventions(otel, model_server, tmp_path):
    spans, reader = otel()
    child_tool = ChildAgentTool()
    model_server.script(
        Reply.tool_calls([("list_dir", {"path": "."})]),
        Reply.tool_calls([("ask_child", {"question": "secret question"})]),
        "child answer",
        "all done",
    )
    agent = full_agent(tmp_path, model_server.url, "parent", ["list_dir", "ask_child"], (child_tool,))
    child_tool.child = full_agent(tmp_path, model_server.url, "child")
    with agent, child_tool.child:
        result = agent.run("a private user message")
    assert result.reply == "all done"
    got = {s.name: s for s in spans.get_finished_spans()}
    assert set(got) >= {"invoke_agent parent", "invoke_agent child", "chat test-model", "execute_tool list_dir", "execute_tool ask_child"}
    run, child = got["invoke_agent parent"], got["invoke_agent child"]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent" and run.attributes["gen_ai.conversation.id"] == result.session_id
    assert run.attributes["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens > 0
    assert run.attributes["clawkit.run.outcome"] == "done" and run.attributes["clawkit.agent.subagent"] is False
    assert child.parent.span_id == got["execute_tool ask_child"].context.span_id and child.attributes["clawkit.agent.subagent"] is True
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 4 and all(c.attributes["gen_ai.usage.output_tokens"] > 0 for c in chats)
    assert {c.parent.span_id for c in chats} == {run.context.span_id, child.context.span_id}
    # (abs: a float epoch second near 1.7e9 holds ~240 ns, so start and end are each rounded by that much)
    assert all(c.end_time - c.start_time == pytest.approx(c.attributes["clawkit.model.latency"] * 1e9, rel=0.01, abs=2000)
               for c in chats)
    tool = got["execute_tool list_dir"]
    assert tool.attributes["gen_ai.tool.name"] == "list_dir" and tool.attributes["clawkit.tool.risk"] == "safe"
    assert tool.attributes["clawkit.tool.decision"] == "allowed" and tool.parent.span_id == run.context.span_id
    everything = json.dumps([dict(s.attributes) for s in spans.get_finished_spans()])
    assert "private user message" not in everything and "secret question" not in everything  # no content unless enabled
    m = metrics(reader)
    assert sum(p.count for p in m["gen_ai.client.operation.duration"]) == 4
    kinds = {p.attributes["gen_ai.token.type"] for p in m["gen_ai.client.token.usage"]}
    assert kinds == {"input", "output"}
    assert sum(p.count for p in m["clawkit.tool.duration"]) == 2
    assert sum(p.count for p in m["clawkit.run.duration"]) == 2


def test_content_is_recorded_only_when_enabled_and_denials_are_marked(otel, model_server, tmp_path):
    spans, _ = otel(capture_content=True)
    model_server.script(Reply.tool_calls([("shell_exec", {"command": "echo hi"})]), "refused, fine")
    with full_agent(tmp_path, model_server.url, tools=["shell_exec"]) as agent:  # no approver: unsafe calls are denied
        agent.run("please run it")
    got = {s.name: s for s in spans.get_finished_spans()}
    tool = got["execute_tool shell_exec"]
    assert tool.attributes["clawkit.tool.decision"] == "denied" and tool.attributes["clawkit.tool.risk"] == "unsafe"
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"command": "echo hi"}
    assert "please run it" in got["invoke_agent test-agent"].attributes["gen_ai.input.messages"]


def _agent_file(tmp_path, url, name="helper", tools=()):
    ws = tmp_path / f"ws-{name}"
    ws.mkdir()
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps({"name": name, "model": {"name": "openai/test-model", "api_base": url, "api_key": "sk-test",
                                                         "max_retries": 0}, "instructions": "Help.", "workspace": str(ws),
                                "tools": list(tools)}))
    return path


class Receiver(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
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


@pytest.mark.e2e
def test_otlp_http_export_to_a_loopback_receiver(model_server, tmp_path):
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    Receiver.posts = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    model_server.script("hello over otlp")
    env = {**os.environ, "CLAWKIT_OTEL": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{httpd.server_address[1]}",
           "OTEL_SERVICE_NAME": "clawkit-test", "CLAWKIT_HOME": str(tmp_path / "home")}
    try:
        r = subprocess.run([sys.executable, "-m", "clawkit", "run", str(_agent_file(tmp_path, model_server.url)), "hi"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert r.returncode == 0, r.stderr
    traces = [ExportTraceServiceRequest.FromString(b) for p, b in Receiver.posts if p == "/v1/traces"]
    names, service = set(), set()
    for req in traces:
        for rs in req.resource_spans:
            service |= {a.value.string_value for a in rs.resource.attributes if a.key == "service.name"}
            names |= {s.name for ss in rs.scope_spans for s in ss.spans}
    assert service == {"clawkit-test"} and {"invoke_agent helper", "chat test-model"} <= names
    metric_reqs = [ExportMetricsServiceRequest.FromString(b) for p, b in Receiver.posts if p == "/v1/metrics"]
    metric_names = {m.name for req in metric_reqs for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert "gen_ai.client.token.usage" in metric_names


@pytest.mark.e2e
def test_disabled_means_no_import_and_no_traffic(model_server, tmp_path):
    model_server.script("quiet")
    probe = ("import sys; from clawkit.runtime import open_agent; a = open_agent(sys.argv[1]); a.run('hi'); a.close(); "
             "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter', 'clawkit_otel.telemetry'))))")
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_OTEL"}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"  # would fail loudly if anything were sent
    env["CLAWKIT_HOME"] = str(tmp_path / "home")
    r = subprocess.run([sys.executable, "-c", probe, str(_agent_file(tmp_path, model_server.url))], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"  # (the OpenTelemetry API may come with litellm; the SDK never)
    assert len(model_server.requests) == 1


@pytest.mark.e2e
def test_clawkit_logs_lists_runs_across_workspaces(model_server, tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "CLAWKIT_HOME": str(home)}
    env.pop("CLAWKIT_OTEL", None)
    model_server.script("first reply", "second reply")
    for name in ("alpha", "beta"):
        r = subprocess.run([sys.executable, "-m", "clawkit", "run", str(_agent_file(tmp_path, model_server.url, name)), f"hello {name}"],
                           cwd=tmp_path / f"ws-{name}", env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    failing = subprocess.run([sys.executable, "-m", "clawkit", "run", str(tmp_path / "alpha.yaml"), "one more"],
                             cwd=tmp_path / "ws-alpha", env=env, capture_output=True, text=True, timeout=120)
    assert failing.returncode != 0  # the script is exhausted: the model answers 400
    out = subprocess.run([sys.executable, "-m", "clawkit", "logs", "--json"], env=env, capture_output=True, text=True, timeout=60)
    runs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["agent"] for r in runs] == ["alpha", "beta", "alpha"]
    assert runs[0]["outcome"].startswith("failed")
    ok = runs[1]
    assert "test-model" in ok["model"] and ok["prompt_tokens"] > 0 and ok["completion_tokens"] > 0
    assert ok["outcome"] == "done" and ok["duration"] > 0 and ok["workspace"].endswith("ws-beta")
    assert len(home.joinpath("workspaces").read_text().splitlines()) == 2
    text = subprocess.run([sys.executable, "-m", "clawkit", "logs", "-n", "1"], env=env, capture_output=True, text=True, timeout=60)
    assert "alpha" in text.stdout and text.stdout.count("\n") == 1
