"""Anthropic provider features end to end through the CLI, every builtin loaded, against the loopback
model server's Anthropic wire (docs/anthropic.md): prompt-cache breakpoints (none with
``model.cache: off``), cache tokens in usage priced as Anthropic prices them, ``/think`` as extended
thinking with a budget, thinking blocks (and redacted ones) sent back on the tool-result turn, and
the same through clawkit-litellm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

MODEL = "anthropic/claude-sonnet-4-5"  # litellm's table: prompt caching and reasoning, cache prices
THINKING = [{"type": "thinking", "thinking": "The user wants the notes file; read it first.", "signature": "sig-abc123"},
            {"type": "redacted_thinking", "data": "ENCRYPTED-xyz"}]


def run_cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install
    env.update(CLAWKIT_HOME=str(ws / "home"), LITELLM_LOCAL_MODEL_COST_MAP="True", CLAWKIT_AUDIT_HOME=str(ws / "audit"))
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=ws, env=env, capture_output=True,
                          text=True, timeout=300)


def agent(ws: Path, server: ModelServer, name: str, model_extra: str = "", provider: str = "auto") -> str:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "notes.txt").write_text("buy milk\n")
    (ws / name).write_text(textwrap.dedent(f"""\
        name: a
        instructions: You are a careful assistant. {"Keep answers short. " * 40}
        model: {{name: {MODEL}, api_base: "{server.base_url}", api_key: sk-ant-test, max_retries: 0,
                 provider: {provider}, temperature: 0.2{model_extra}}}
        tools: [read_file]
        """))
    return name


def breakpoints(body: dict) -> list[str]:
    """Where the request's cache_control markers are: tools / system / messages[i]."""
    where = [f"tools[{i}]" for i, t in enumerate(body.get("tools") or []) if t.get("cache_control")]
    if isinstance(body.get("system"), list):
        where += ["system" for b in body["system"] if b.get("cache_control")]
    for i, m in enumerate(body["messages"]):
        if isinstance(m["content"], list):
            where += [f"messages[{i}]" for b in m["content"] if isinstance(b, dict) and b.get("cache_control")]
    return where


@pytest.fixture(scope="module")
def server():
    with ModelServer() as srv:
        yield srv


def test_cache_breakpoints_thinking_and_cost_through_http(server, tmp_path):
    server.reset()
    server.script(
        Reply.tool_calls([("read_file", {"path": "notes.txt"})], thinking=THINKING, model="claude-sonnet-4-5",
                         prompt_tokens=100, completion_tokens=40, cache_write_tokens=2000),
        Reply.text("Your notes say: buy milk.", model="claude-sonnet-4-5", prompt_tokens=150, completion_tokens=10,
                   cache_read_tokens=2000),
    )
    name = agent(tmp_path, server, "agent.yaml")
    proc = run_cli(tmp_path, "run", name, "/think high what is in notes.txt?", "--json")
    assert proc.returncode == 0, proc.stderr
    first, second = (r.json for r in server.requests)
    # caching: the tools, the system prompt and the conversation so far; never more than 4
    assert breakpoints(first) == ["tools[0]", "system", "messages[0]"]
    assert len(breakpoints(second)) <= 4 and "messages[2]" in breakpoints(second) and "system" in breakpoints(second)
    # thinking: a budget for "high", max_tokens above it, no temperature (Anthropic refuses one with thinking)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 24000}
    assert first["max_tokens"] > 24000 and "temperature" not in first
    # the tool-result turn sends the thinking blocks back, signatures and redacted data intact, first
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][:2] == THINKING
    assert assistant["content"][2]["type"] == "tool_use"
    assert second["messages"][2]["content"][0]["type"] == "tool_result"
    out = json.loads(proc.stdout)
    usage = out["usage"]
    assert usage["cache_write_tokens"] == 2000 and usage["cache_read_tokens"] == 2000
    assert usage["prompt_tokens"] == 100 + 2000 + 150 + 2000
    assert usage["reasoning_tokens"] > 0
    # priced as Anthropic prices cache tokens (litellm's table: $3/M input, $3.75/M write, $0.30/M read, $15/M output)
    expected = (250 * 3e-6 + 2000 * 3.75e-6 + 2000 * 3e-7 + 50 * 15e-6)
    assert usage["cost"] == pytest.approx(expected, rel=1e-6)
    # clawkit logs shows the cache and thinking tokens with the cost
    logs = run_cli(tmp_path, "logs", "--json", "-n", "1")
    row = json.loads(logs.stdout.splitlines()[0])
    assert row["cache_read_tokens"] == 2000 and row["cache_write_tokens"] == 2000 and row["reasoning_tokens"] > 0
    assert row["cost"] == pytest.approx(expected, rel=1e-6)
    text = run_cli(tmp_path, "logs", "-n", "1").stdout
    assert "cache 2000r/2000w" in text and "think" in text
    shown = run_cli(tmp_path, "sessions", "show", out["session_id"]).stdout
    totals = json.loads(next(line for line in shown.splitlines() if line.startswith("usage: "))[7:])
    assert totals["cache_read_tokens"] == 2000 and totals["cache_write_tokens"] == 2000
    assert totals["cost"] == pytest.approx(expected, rel=1e-6)


def test_cache_off_and_no_think(server, tmp_path):
    server.reset()
    server.script(Reply.text("hello", model="claude-sonnet-4-5"), Reply.text("hello again", model="claude-sonnet-4-5"))
    off = agent(tmp_path, server, "off.yaml", ", cache: off")
    assert run_cli(tmp_path, "run", off, "hi").returncode == 0
    on = agent(tmp_path, server, "on.yaml")
    assert run_cli(tmp_path, "run", on, "hi").returncode == 0
    body_off, body_on = (r.json for r in server.requests)
    assert breakpoints(body_off) == [] and isinstance(body_off["system"], str)
    assert "thinking" not in body_off and body_off["temperature"] == 0.2
    assert breakpoints(body_on) == ["tools[0]", "system", "messages[0]"]


def test_through_litellm(server, tmp_path):
    server.reset()
    server.script(
        Reply.tool_calls([("read_file", {"path": "notes.txt"})], thinking=THINKING[:1], model="claude-sonnet-4-5",
                         prompt_tokens=100, completion_tokens=40, cache_write_tokens=2000),
        Reply.text("Your notes say: buy milk.", model="claude-sonnet-4-5", prompt_tokens=150, completion_tokens=10,
                   cache_read_tokens=2000),
    )
    name = agent(tmp_path, server, "agent.yaml", provider="litellm")
    proc = run_cli(tmp_path, "run", name, "/think high what is in notes.txt?", "--json")
    assert proc.returncode == 0, proc.stderr
    first, second = (r.json for r in server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 24000}
    assert "temperature" not in first
    assert breakpoints(first) and len(breakpoints(first)) <= 4
    assert any(b.get("cache_control") for b in first["system"])
    assistant = second["messages"][1]
    assert assistant["content"][0] == THINKING[0]
    usage = json.loads(proc.stdout)["usage"]
    assert usage["cache_write_tokens"] == 2000 and usage["cache_read_tokens"] == 2000
    assert usage["cost"] == pytest.approx(250 * 3e-6 + 2000 * 3.75e-6 + 2000 * 3e-7 + 50 * 15e-6, rel=1e-6)
