"""Fallback models end to end through the CLI, every builtin loaded, against the loopback model
server (docs/fallbacks.md): a 500, a refused connection and a 429 fall back (OpenAI and Anthropic
wire, clawkit-http and clawkit-litellm), 401 and 400 do not, a context overflow goes to the next
model with a larger window; the llm.fallback event, the ledger (rows and cost of the model that
answered), the OpenTelemetry spans and ``--json`` say which model answered; a stream that already
showed text does not fall back."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawkit.testing.server import Fault, ModelServer, Reply

pytestmark = pytest.mark.e2e


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(ws: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install
    env.update(CLAWKIT_HOME=str(ws / "home"), LITELLM_LOCAL_MODEL_COST_MAP="True", CLAWKIT_AUDIT_HOME=str(ws / "audit"))
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=ws, env=env, capture_output=True,
                          text=True, timeout=300)


def agent(ws: Path, name: str, model: str) -> str:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / name).write_text("name: fb\ninstructions: Be brief.\nmodel:\n" + textwrap.indent(textwrap.dedent(model), "  "))
    return name


def by_model(**answers):
    """A server script answering by the request's model (a Fault, a Reply or text)."""
    def respond(request):
        return answers.get(str(request.json.get("model")), Fault.status(400, "unexpected model"))
    return respond


def models_asked(server: ModelServer) -> list[str]:
    return [r.json.get("model") for r in server.requests]


@pytest.fixture(scope="module")
def server():
    with ModelServer() as srv:
        yield srv


def test_500_falls_back_event_ledger_json_and_spans(server, tmp_path):
    server.reset()
    server.script(by_model(**{"gpt-4o": Fault.status(500), "gpt-4o-mini": Reply.text("from mini", model="gpt-4o-mini",
                                                                                      prompt_tokens=1000, completion_tokens=100)}))
    name = agent(tmp_path, "a.yaml", f"""\
        name: openai/gpt-4o
        api_base: "{server.url}"
        api_key: sk-test
        max_retries: 0
        fallbacks:
          - {{name: openai/gpt-4o-mini, api_base: "{server.url}", api_key: sk-test}}
        """)
    proc = run_cli(tmp_path, "run", name, "hi", "--json", CLAWKIT_OTEL="1", OTEL_TRACES_EXPORTER="console",
                   OTEL_METRICS_EXPORTER="none")
    assert proc.returncode == 0, proc.stderr
    assert models_asked(server) == ["gpt-4o", "gpt-4o-mini"]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["reply"] == "from mini" and out["model"] == "openai/gpt-4o-mini"
    assert out["fallbacks"] == [{"from": "openai/gpt-4o", "to": "openai/gpt-4o-mini", "error_type": "http", "status": 500}]
    # priced as the model that answered (litellm's table: gpt-4o-mini $0.15/M in, $0.60/M out; gpt-4o costs more)
    assert out["usage"]["cost"] == pytest.approx(1000 * 0.15e-6 + 100 * 0.6e-6, rel=1e-6)
    assert "falling back to openai/gpt-4o-mini" in proc.stderr
    db = sqlite3.connect(tmp_path / ".clawkit" / "state.db")
    events = {t: json.loads(d) for t, d in db.execute("SELECT type, data FROM events WHERE type LIKE 'llm.%'")}
    assert events["llm.fallback"]["from_model"] == "openai/gpt-4o" and events["llm.fallback"]["to_model"] == "openai/gpt-4o-mini"
    assert events["llm.failed"]["model"] == "openai/gpt-4o" and events["llm.failed"]["status"] == 500
    assert events["llm.call"]["model"] == "openai/gpt-4o-mini" and events["llm.call"]["fallback_from"] == ["openai/gpt-4o"]
    steps = db.execute("SELECT name, status FROM steps WHERE kind = 'llm' ORDER BY started").fetchall()
    assert steps == [("openai/gpt-4o", "failed"), ("gpt-4o-mini", "ok")]
    rows = db.execute("SELECT model, cost FROM usage").fetchall()
    assert rows == [("gpt-4o-mini", pytest.approx(out["usage"]["cost"]))]
    # OpenTelemetry: a failed chat span for the first model, a chat span for the one that answered
    spans = [json.loads(chunk) for chunk in _json_objects(proc.stdout) if '"name": "chat ' in chunk]
    failed = next(s for s in spans if s["name"] == "chat gpt-4o")
    ok = next(s for s in spans if s["name"] == "chat gpt-4o-mini")
    assert failed["status"]["status_code"] == "ERROR" and failed["attributes"]["error.type"] == "500"
    assert ok["status"]["status_code"] != "ERROR" and ok["attributes"]["gen_ai.response.model"] == "gpt-4o-mini"
    assert failed["attributes"]["clawkit.model.fallback_to"] == "openai/gpt-4o-mini"
    assert ok["attributes"]["clawkit.model.fallback_from"] == ["openai/gpt-4o"]


def _json_objects(text: str) -> list[str]:
    """The pretty-printed JSON objects the console span exporter wrote (each starts at a '{' line)."""
    out, current = [], []
    for line in text.splitlines():
        if line == "{":
            current = [line]
        elif current:
            current.append(line)
            if line == "}":
                out.append("\n".join(current))
                current = []
    return out


def test_refused_connection_anthropic_streams_transparently(server, tmp_path):
    server.reset()
    server.script(by_model(**{"claude-3-5-haiku-20241022": Reply.text("haiku answers", model="claude-3-5-haiku-20241022")}))
    name = agent(tmp_path, "a.yaml", f"""\
        name: anthropic/claude-sonnet-4-5
        api_base: "http://127.0.0.1:{closed_port()}"
        api_key: sk-ant-test
        max_retries: 0
        fallbacks: [{{name: anthropic/claude-3-5-haiku-20241022, api_base: "{server.base_url}", api_key: sk-ant-test}}]
        """)
    proc = run_cli(tmp_path, "run", name, "hi")  # streamed to stdout: the failure came before any text
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "haiku answers"
    assert "claude-sonnet-4-5 failed" in proc.stderr and "falling back" in proc.stderr


def test_429_falls_back_to_a_litellm_model(server, tmp_path):
    server.reset()
    server.script(by_model(**{"gpt-a": Fault.rate_limit(retry_after=0), "gpt-b": "b via litellm"}))
    name = agent(tmp_path, "a.yaml", f"""\
        name: openai/gpt-a
        api_base: "{server.url}"
        api_key: sk-test
        max_retries: 0
        fallbacks: [{{name: openai/gpt-b, provider: litellm, api_base: "{server.url}", api_key: sk-test}}]
        """)
    proc = run_cli(tmp_path, "run", name, "hi", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["reply"] == "b via litellm" and out["model"] == "openai/gpt-b"
    assert out["fallbacks"][0]["error_type"] == "rate_limit"


@pytest.mark.parametrize("fault,kind", [(Fault.status(401, "invalid x-api-key"), "auth"),
                                        (Fault.status(400, "messages: bad"), "bad_request")])
def test_auth_and_bad_request_do_not_fall_back(server, tmp_path, fault, kind):
    server.reset()
    server.script(by_model(**{"gpt-a": fault, "gpt-b": "should not be asked"}))
    name = agent(tmp_path, "a.yaml", f"""\
        name: openai/gpt-a
        api_base: "{server.url}"
        api_key: sk-test
        max_retries: 0
        fallbacks: [{{name: openai/gpt-b, api_base: "{server.url}"}}]
        """)
    proc = run_cli(tmp_path, "run", name, "hi", "--json")
    assert proc.returncode != 0
    assert models_asked(server) == ["gpt-a"]
    assert "falling back" not in proc.stderr


def test_context_overflow_goes_to_a_larger_window(server, tmp_path):
    server.reset()
    server.script(by_model(**{"gpt-a": Fault.context_overflow(), "gpt-small": "too small", "gpt-big": "big window"}))
    name = agent(tmp_path, "a.yaml", f"""\
        name: openai/gpt-a
        api_base: "{server.url}"
        api_key: sk-test
        max_retries: 0
        context_window: 8000
        fallbacks:
          - {{name: openai/gpt-small, api_base: "{server.url}", context_window: 4000}}
          - {{name: openai/gpt-big, api_base: "{server.url}", context_window: 200000}}
        """)
    proc = run_cli(tmp_path, "run", name, "hi", "--json")
    assert proc.returncode == 0, proc.stderr
    assert models_asked(server) == ["gpt-a", "gpt-big"]
    out = json.loads(proc.stdout)
    assert out["model"] == "openai/gpt-big" and out["fallbacks"][0]["error_type"] == "context_overflow"


def test_no_fallback_after_text_was_shown(server, tmp_path):
    server.reset()
    server.script(by_model(**{"gpt-a": Fault.cut_stream(after_chunks=2, reply="one two three four five"),
                              "gpt-b": "should not be asked"}))
    name = agent(tmp_path, "a.yaml", f"""\
        name: openai/gpt-a
        api_base: "{server.url}"
        api_key: sk-test
        max_retries: 0
        fallbacks: [{{name: openai/gpt-b, api_base: "{server.url}"}}]
        """)
    proc = run_cli(tmp_path, "run", name, "hi")
    assert models_asked(server) == ["gpt-a"]
    assert proc.stdout.startswith("one two")


def test_anthropic_wire_500_falls_back_and_401_does_not(server, tmp_path):
    server.reset()
    server.script(by_model(**{"claude-sonnet-4-5": Fault.status(500), "claude-3-5-haiku-20241022": "haiku here",
                              "claude-opus-4-1": Fault.status(401, "invalid x-api-key")}))
    name = agent(tmp_path, "a.yaml", f"""\
        name: anthropic/claude-sonnet-4-5
        api_base: "{server.base_url}"
        api_key: sk-ant-test
        max_retries: 0
        fallbacks: [{{name: anthropic/claude-3-5-haiku-20241022, api_base: "{server.base_url}", api_key: sk-ant-test}}]
        """)
    proc = run_cli(tmp_path, "run", name, "hi", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["reply"] == "haiku here" and out["model"] == "anthropic/claude-3-5-haiku-20241022"
    assert server.requests[0].path == "/v1/messages" and models_asked(server) == ["claude-sonnet-4-5", "claude-3-5-haiku-20241022"]
    server.requests.clear()
    name = agent(tmp_path, "b.yaml", f"""\
        name: anthropic/claude-opus-4-1
        api_base: "{server.base_url}"
        api_key: sk-ant-test
        max_retries: 0
        fallbacks: [{{name: anthropic/claude-3-5-haiku-20241022, api_base: "{server.base_url}"}}]
        """)
    proc = run_cli(tmp_path, "run", name, "hi", "--json")
    assert proc.returncode != 0 and "invalid x-api-key" in proc.stderr
    assert models_asked(server) == ["claude-opus-4-1"]
