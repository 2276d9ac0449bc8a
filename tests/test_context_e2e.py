"""The context plugins end to end: truncator, compaction and directives together, through the real
litellm provider talking HTTP to the loopback ``model_server`` (no internet)."""

from __future__ import annotations

import asyncio
import json

import pytest

import clawkit_compaction
import clawkit_directives
import clawkit_litellm
import clawkit_truncator
from clawkit import hookimpl
from clawkit.config import collect_sections, validate_agent
from clawkit.hooks import HookRunner
from clawkit.loop import Agent
from clawkit.testing import plugin_manager, unwrapped
from clawkit.testing.server import Fault, Reply
from clawkit_compaction.compactor import SUMMARY_SYSTEM
from clawkit_truncator import store as output_store
from clawkit.tokens import get_counter

pytestmark = pytest.mark.filterwarnings("ignore:.*is using the `ReadOnly` qualifier:UserWarning")

MODEL = "openai/gpt-4o-mini"
TEN_MB = 10 * 1024 * 1024
TRACE = 'Traceback (most recent call last):\n  File "/srv/job/run.py", line 88, in main\nRuntimeError: database is locked\n'


class BigOutput:
    """A tool returning 10 MB of log text (optionally ending in an error trace)."""

    def __init__(self, trace: bool = False):
        line = "2026-01-01T00:00:00Z INFO request served path=/api/items status=200 ms=12\n"
        body = line * (TEN_MB // len(line) + 1)
        self.text = body[: TEN_MB - (len(TRACE) if trace else 0)] + (TRACE if trace else "")

    @hookimpl
    def register_tools(self, register, agent):
        def tail_logs() -> str:
            """Return the service logs."""
            return self.text

        register(tail_logs)


@pytest.fixture
def agent_for(workspace, model_server):
    agents = []

    def factory(*extra, window=16_000, plugin_config=None, tools=(), model=MODEL):
        data = {
            "name": "ctx-agent",
            "model": {"name": model, "api_base": model_server.url, "retry_base_delay": 0.001, "timeout": 10},
            "workspace": str(workspace),
            "tools": list(tools),
            "limits": {"context_window": window},
            "plugins": plugin_config or {},
        }
        plugins = (clawkit_litellm, clawkit_truncator, clawkit_compaction, clawkit_directives, *extra)
        pm = plugin_manager(*plugins, plugin_config=plugin_config)  # the full install, as a user's run
        agent = Agent(validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm))), pm=pm)
        agents.append(agent)
        return agent

    yield factory
    output_store.wait()
    for a in agents:
        a.store.close()


def body_tokens(req) -> int:
    counter = get_counter(MODEL)
    msgs = req.messages
    return sum(4 + counter.count(m.get("content") or "") + counter.count(json.dumps(m.get("tool_calls") or "")) for m in msgs)


def tool_contents(req) -> list[str]:
    return [m["content"] for m in req.messages if m.get("role") == "tool"]


def is_summary(req) -> bool:
    return any(m.get("role") == "system" and m.get("content") == SUMMARY_SYSTEM for m in req.messages)


def test_ten_megabyte_tool_result_is_cut_to_budget_and_readable(agent_for, model_server):
    big = BigOutput()
    read_back = {}

    def script(req):
        n = len(model_server.requests)
        if n == 1:
            return Reply.tool_calls([("tail_logs", {})])
        if n == 2:
            content = tool_contents(req)[-1]
            read_back["id"] = content.split('output_id="')[1].split('"')[0]
            read_back["offset"] = int(content.split("offset=")[1].split(",")[0])
            return Reply.tool_calls([("read_tool_output", {"output_id": read_back["id"], "offset": read_back["offset"], "limit": 300})])
        return "The logs show normal traffic."

    model_server.script(script)
    agent = agent_for(big, tools=["tail_logs", "read_tool_output"])
    result = agent.run("check the logs")
    assert result.reply == "The logs show normal traffic."
    second = model_server.requests[1]
    [content] = tool_contents(second)
    assert get_counter(MODEL).count(content) <= 0.3 * 16_000
    content = unwrapped(content)  # the full install's shield wraps it as data
    assert content.startswith("2026-01-01T00:00:00Z INFO request served")
    assert "[... clawkit truncated this output:" in content and "tokens removed" in content
    assert "RuntimeError" not in content  # no error at the end: head only
    page = unwrapped(tool_contents(model_server.requests[2])[-1])
    assert page.split("\n", 1)[1] == big.text[read_back["offset"] : read_back["offset"] + 300]


def test_error_trace_at_the_end_of_ten_megabytes_keeps_the_tail(agent_for, model_server):
    model_server.script(Reply.tool_calls([("tail_logs", {})]), "The job failed: the database is locked.")
    agent = agent_for(BigOutput(trace=True), tools=["tail_logs"])
    assert agent.run("why did the job fail?").reply.startswith("The job failed")
    [content] = tool_contents(model_server.requests[1])
    assert content.startswith("2026-01-01T00:00:00Z INFO") and content.endswith(TRACE)
    assert get_counter(MODEL).count(content) <= 0.3 * 16_000
    assert "read_tool_output tool is not enabled" in content


def answer_or_summarize(req):
    if is_summary(req):
        return Reply.text("Summary: the user asked numbered questions about modules under /srv/app; each was answered.")
    last = req.messages[-1]["content"] or ""
    # one stream delta per reply: litellm's per-chunk cost would dominate a 200-turn test
    return Reply.text(f"Answer about {last[:30]}: " + "the module parses input and writes output. " * 8, chunk_chars=4096)


def test_two_hundred_turn_session_stays_within_the_window(agent_for, model_server):
    window = 4000
    model_server.script(answer_or_summarize)
    agent = agent_for(window=window)

    async def session() -> str:  # one event loop for the whole session, as a long-running agent has
        sid = None
        for i in range(200):
            r = await agent.turn(f"Turn {i}: what does /srv/app/mod_{i}.py do? Explain in detail please. " * 2, session_id=sid)
            sid = r.session_id
            assert r.reply.startswith("Answer about Turn")
        return sid

    sid = asyncio.run(session())
    turns = [q for q in model_server.requests if not is_summary(q)]
    assert len(turns) == 200
    assert max(body_tokens(q) for q in turns) <= window
    assert any(is_summary(q) for q in model_server.requests)
    after = [e["data"] for e in agent.store.events(sid, "compaction.after")]
    assert after and all(a["tokens_after"] < a["tokens_before"] for a in after)
    first = agent.store.messages(sid)[0]
    assert first.metadata["compaction_summary"] and "/srv/app" in first.content


def test_context_overflow_from_the_server_compacts_and_the_turn_succeeds(agent_for, model_server):
    items = [answer_or_summarize] * 6 + [Fault.context_overflow(limit=1500, requested=2400), answer_or_summarize, answer_or_summarize]
    model_server.script(*items)
    agent = agent_for(window=16_000)  # the window is believed large: only the server's error reveals the limit
    sid = None
    for i in range(6):
        sid = agent.run(f"Question {i} about /srv/app/mod_{i}.py, in detail please. " * 3, session_id=sid).session_id
    r = agent.run("And the last one?", session_id=sid)
    assert r.reply.startswith("Answer about And the last one?")
    assert model_server.requests[6].body  # the request that overflowed
    summarize, retried = model_server.requests[7], model_server.requests[8]
    assert is_summary(summarize)
    # (the full install sends its system prompt first; the summary is the first message after it)
    first = next(m for m in retried.messages if m["role"] != "system")
    assert first["content"].startswith("[Summary of") and body_tokens(retried) < body_tokens(model_server.requests[6])
    [after] = [e["data"] for e in agent.store.events(sid, "compaction.after")]
    assert after["trigger"] == "overflow" and after["window"] == 1500
    assert agent.store.events(sid, "llm.retry")


def test_think_directive_reaches_the_server_as_reasoning_effort(agent_for, model_server):
    model_server.script("ok", "ok")
    agent = agent_for(model="openai/o3-mini")
    sid = agent.run("/think high").session_id
    agent.run("prove it /verbose", session_id=sid)
    body = model_server.requests[0].body
    assert body.get("reasoning_effort") == "high"
    assert body["messages"][-1]["content"] == "prove it"
    assert "Think carefully and thoroughly" in body["messages"][0]["content"]
