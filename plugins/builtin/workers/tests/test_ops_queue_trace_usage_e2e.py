"""Issue 25 gaps of the PostgreSQL mode, through ``clawkit serve --db postgresql://…`` and a
``clawkit worker`` (a real PostgreSQL, every builtin plugin):

* the served request's W3C ``traceparent`` rides the queue: the worker's ``invoke_agent`` span (and
  its ``chat`` spans), decoded by a loopback OTLP receiver, are in the caller's trace, children of
  the caller's span (old main: the worker started a trace of its own);
* a turn waiting for approval shows the tokens of the model call that asked for the tool in the
  panel's session list (old main: 0 until the turn ended: the worker saved usage at the end).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from clawkit_workers.testing import Workers, agent_yaml

pytestmark = pytest.mark.e2e

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


def _serve(url: str, yaml) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "clawkit", "serve", str(yaml), "--db", url, "--dev", "--port", "0"],
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    lines: list[str] = []
    for line in p.stderr:
        lines.append(line)
        m = re.search(r"clawkit serve: (http://\S+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, m.group(1)
    p.kill()
    raise AssertionError("serve did not start:\n" + "".join(lines))


def test_queued_turn_joins_the_callers_trace_and_shows_its_tokens_while_waiting(pg_url, append_model, tmp_path, monkeypatch):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    Receiver.posts = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.delenv("TRACEPARENT", raising=False)
    monkeypatch.setenv("CLAWKIT_OTEL", "1")  # the worker's spans go to the receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{httpd.server_address[1]}")
    monkeypatch.setenv("CLAWKIT_HOME", str(tmp_path / "home"))
    yaml = agent_yaml(tmp_path, append_model.server.url, approve_shell=True)
    workers = Workers(pg_url, [yaml])
    served = None
    try:
        workers.start(1)
        served, base = _serve(pg_url, yaml)
        box: dict = {}

        def ask():
            box["r"] = httpx.post(f"{base}/v1/chat/completions", timeout=120,
                                  headers={"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"},
                                  json={"model": "appender", "messages": [{"role": "user", "content": "please append token tr1"}]})

        asker = threading.Thread(target=ask)
        asker.start()
        deadline = time.monotonic() + 60
        pending: list = []
        while not pending and time.monotonic() < deadline:
            pending = httpx.get(f"{base}/api/approvals", timeout=10).json()["approvals"]
            time.sleep(0.1)
        assert len(pending) == 1, pending
        sid = pending[0]["session_id"]
        # waiting for approval: the first model call's usage is in the panel already
        rows = {r["id"]: r for r in httpx.get(f"{base}/api/panel/sessions", timeout=10).json()["sessions"]}
        waiting = rows[sid]
        assert waiting["tokens"] > 0 and waiting["model_calls"] == 1, waiting
        ok = httpx.post(f"{base}/api/approvals/{pending[0]['id']}", json={"decision": "approve"}, timeout=10)
        assert ok.status_code == 200
        asker.join(120)
        assert box["r"].status_code == 200, box["r"].text
        assert box["r"].json()["choices"][0]["message"]["content"] == "appended tr1"
        done = {r["id"]: r for r in httpx.get(f"{base}/api/panel/sessions", timeout=10).json()["sessions"]}[sid]
        assert done["model_calls"] == 2 and done["tokens"] > waiting["tokens"]  # nothing counted twice
    finally:
        if served is not None:
            served.terminate()
            served.wait(30)
        workers.stop_all()  # the worker flushes its spans as it stops
        httpd.shutdown()
        httpd.server_close()
    spans = [s for p, b in Receiver.posts if p == "/v1/traces"
             for rs in ExportTraceServiceRequest.FromString(b).resource_spans for ss in rs.scope_spans for s in ss.spans]
    runs = [s for s in spans if s.name == "invoke_agent appender"]
    assert len(runs) == 1, [s.name for s in spans]
    run = runs[0]
    assert run.trace_id.hex() == TRACE_ID and run.parent_span_id.hex() == CALLER_SPAN
    chats = [s for s in spans if s.name.startswith("chat ") and s.parent_span_id == run.span_id]
    assert len(chats) == 2 and all(c.trace_id.hex() == TRACE_ID for c in chats)
