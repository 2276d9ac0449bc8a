"""The truncator through the real agent loop (scripted model), real tiktoken and real SQLite."""

from __future__ import annotations

import json

import pytest

import clawkit_truncator
from clawkit import hookimpl, tokens
from clawkit_truncator import store
from clawkit_truncator.cut import plan_cut, tail_has_signal
from clawkit.testing import ScriptedReply, call, unwrapped

WINDOW = 8000  # budget = 30% = 2400 tokens


def big_log(lines: int, end: str = "") -> str:
    return "".join(f"{i:07d} INFO worker processed item id={i} status=ok\n" for i in range(lines)) + end


def tool_messages(request):
    return [m for m in request.messages if m.role == "tool"]


def count(text: str) -> int:
    return len(tokens.get_counter("scripted/test").encode(text))


@pytest.fixture
def make_agent(workspace):
    """Like the kit's make_agent, but a ``plugin_config`` dict becomes the agent's ``plugins:`` section
    (the kit's factory takes ``plugins=`` for plugin objects, so it cannot pass that key)."""
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.testing import plugin_manager
    from clawkit.testing import ScriptedProvider

    agents = []

    def factory(script=(), *, plugins=(), plugin_config=None, provider=None, narrow=None, **config):
        data = {"name": "test-agent", "model": "scripted/test", "workspace": str(workspace), **config}
        if plugin_config:
            data["plugins"] = plugin_config
        pm = plugin_manager(*plugins, narrow=narrow, plugin_config=plugin_config)  # the full install unless the test says why not
        cfg = validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm)))
        agent = Agent(cfg, pm=pm, provider=provider or ScriptedProvider(script))
        agents.append(agent)
        return agent

    yield factory
    store.wait()
    for a in agents:
        a.store.close()


def make(make_agent, output: str, *, tools=("dump", "read_tool_output"), truncator=None, script=None, plugin_config=None):
    def dump() -> str:
        """Print a big output."""
        return output

    class Dumper:
        @hookimpl
        def register_tools(self, register, agent):
            register(dump)

    cfg = {"limits": {"context_window": WINDOW}, "tools": list(tools)}
    if truncator is not None or plugin_config:
        cfg["plugin_config"] = {**(plugin_config or {}), **({"truncator": truncator} if truncator is not None else {})}
    script = script or [ScriptedReply.calls(call("dump")), "done"]
    return make_agent(script, plugins=(clawkit_truncator, Dumper()), **cfg)


def test_small_result_passes_unchanged(make_agent):
    agent = make(make_agent, "hello\nworld\n")
    agent.run("go")
    [msg] = tool_messages(agent.provider.requests[1])
    assert msg.content == "hello\nworld\n"
    assert "truncated" not in msg.tool_result.metadata


def test_big_result_keeps_head_tail_and_marker_within_budget(make_agent):
    out = big_log(60_000)  # ~3 MB, no error at the end: the tail is kept all the same (keep_tail: always)
    agent = make(make_agent, out)
    agent.run("go")
    [msg] = tool_messages(agent.provider.requests[1])
    assert count(msg.content) <= 0.3 * WINDOW
    assert msg.content.startswith("0000000 INFO worker")
    head, rest = msg.content.split("[... clawkit truncated this output:", 1)
    marker, tail = rest.split("]\n", 1)
    assert head.endswith("status=ok\n") and out.startswith(head)  # cut on a line boundary
    assert tail.startswith(tuple("0123456789")) and out.endswith(tail)  # the last lines, whole
    assert tail.endswith("0059999 INFO worker processed item id=59999 status=ok\n")
    assert len(tail) < len(head)  # tail_share 0.3 of the budget
    assert "tokens removed" in marker and "read_tool_output(output_id=" in marker
    start = len(head)
    assert f"characters {start:,}" in marker  # the marker names where the removed middle starts
    meta = msg.tool_result.metadata
    assert meta["truncated"] and meta["original_chars"] == len(out) and meta["output_id"].startswith("out_")
    assert agent.store.events(agent.provider.requests[1].metadata.get("session_id") or agent._session.id, "truncator.truncated")


def test_keep_tail_auto_drops_a_plain_tail(make_agent):
    out = big_log(60_000)
    agent = make(make_agent, out, truncator={"keep_tail": "auto"})
    agent.run("go")
    [msg] = tool_messages(agent.provider.requests[1])
    head, marker = msg.content.split("[... clawkit truncated this output:", 1)
    assert out.startswith(head) and "0059999" not in msg.content  # no signal at the end: head only
    assert count(msg.content) <= 0.3 * WINDOW


def test_error_at_the_end_keeps_the_tail(make_agent):
    trace = "Traceback (most recent call last):\n  File \"job.py\", line 3, in <module>\nValueError: disk full\n"
    agent = make(make_agent, big_log(60_000, trace))
    agent.run("go")
    [msg] = tool_messages(agent.provider.requests[1])
    assert msg.content.endswith(trace)
    assert msg.content.startswith("0000000 INFO")
    assert count(msg.content) <= 0.3 * WINDOW
    head, rest = msg.content.split("[... clawkit truncated", 1)
    marker, tail = rest.split("]\n", 1)
    assert tail.startswith(tuple("0123456789"))  # the tail starts on a line boundary


def test_json_closing_brace_keeps_tail():
    body = json.dumps({"items": [{"id": i, "name": f"item {i}"} for i in range(50_000)], "total": 50_000})
    assert tail_has_signal(body)
    plan = plan_cut(body, 1000, tokens.get_counter("gpt-4o"))
    assert plan is not None and body[plan.tail_start:].endswith('"total": 50000}')


def test_read_tool_output_pages_the_full_output(make_agent):
    out = big_log(60_000)
    holder = {}

    def reader(request):
        msg = tool_messages(request)[-1]
        holder["id"] = msg.tool_result.metadata["output_id"]
        holder["offset"] = int(msg.content.split("offset=")[1].split(",")[0])
        return ScriptedReply.calls(call("read_tool_output", output_id=holder["id"], offset=holder["offset"], limit=500))

    agent = make(make_agent, out, script=[ScriptedReply.calls(call("dump")), reader, "done"])
    agent.run("go")
    page = unwrapped(tool_messages(agent.provider.requests[2])[-1].content)  # the full install's shield wraps it
    header, text = page.split("\n", 1)
    assert text == out[holder["offset"] : holder["offset"] + 500]
    assert f"of {len(out):,}" in header and f"Next: offset={holder['offset'] + 500}" in header


def test_read_tool_output_pattern_and_session_isolation(make_agent):
    out = big_log(60_000)
    agent = make(make_agent, out)
    result = agent.run("go")
    store.wait()
    ctx_conn = agent.store.conn
    oid = tool_messages(agent.provider.requests[1])[0].tool_result.metadata["output_id"]
    lines, resume, first = store.grep(ctx_conn, result.session_id, oid, __import__("re").compile(r"id=4242\b"), 0, 10_000)
    assert lines == [f"@{out.index('0004242')}: 0004242 INFO worker processed item id=4242 status=ok"]
    assert resume is None and first.chars == len(out)
    with pytest.raises(store.OutputNotFound):
        store.read_range(ctx_conn, "ses_other", oid, 0, 10)


def test_marker_says_when_reader_tool_is_not_enabled(make_agent):
    agent = make(make_agent, big_log(60_000), tools=("dump",))
    agent.run("go")
    [msg] = tool_messages(agent.provider.requests[1])
    assert "read_tool_output tool is not enabled" in msg.content
    assert "read_tool_output" not in [t.name for t in agent.provider.requests[0].tools]


def test_absolute_max_tokens_and_store_off(make_agent):
    agent = make(make_agent, big_log(5_000), truncator={"max_tokens": 500, "store_full": False})
    agent.run("go")
    [msg] = tool_messages(agent.provider.requests[1])
    assert count(msg.content) <= 500
    assert "output_id" not in msg.tool_result.metadata and "read_tool_output(" not in msg.content


def test_no_tokenizer_falls_back_to_characters_and_says_so():
    counter = tokens.TokenCounter("cl100k_base", None, reason="no cache file")
    text = big_log(10_000)
    plan = plan_cut(text, 1000, counter)
    assert plan is not None and "estimated from characters" in plan.note and "no cache file" in plan.note
    assert plan.head_end <= 1000 * tokens.CHARS_PER_TOKEN and text[plan.head_end - 1] == "\n"
    assert not plan.exact


def test_tokenizer_failure_on_whitespace_run_falls_back(monkeypatch):
    # o200k cannot encode ~1M consecutive spaces (ValueError here; a pyo3 panic in some builds)
    monkeypatch.setattr(tokens, "WINDOW_CHARS", 2_000_000)
    counter = tokens.get_counter("gpt-4o")
    text = " " * 1_000_000 + "tail\n"
    plan = plan_cut(text, 150_000, counter)
    assert plan is not None and "tokenizer failed" in plan.note


def test_whitespace_run_with_default_windows_is_exact():
    plan = plan_cut(" " * 2_000_000, 1000, tokens.get_counter("gpt-4o"))
    assert plan is not None and plan.note == ""


def test_cost_is_bounded_by_budget_not_size():
    import time

    counter = tokens.get_counter("gpt-4o")
    small = big_log(20_000)
    huge = small * 50  # ~50 MB
    plan_cut(small, 2000, counter)  # warm up
    t0 = time.perf_counter()
    plan_cut(small, 2000, counter)
    t_small = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = plan_cut(huge, 2000, counter)
    t_huge = time.perf_counter() - t0
    assert p.total_chars == len(huge) and p.removed_tokens > 10_000_000
    assert t_huge < max(0.05, 10 * t_small)  # loose: the real ratio is in the benchmark


def test_history_trimming_spares_recent_turns_and_session(make_agent):
    out = big_log(2_000)  # ~100 kB per call, each cut to ~2400 tokens by after_tool_call
    script = []
    for _ in range(6):
        script += [ScriptedReply.calls(call("dump")), "ok"]
    # Compaction off: under the full install its (background) summarizer uses the agent's model, i.e. this
    # scripted provider, and would eat scripted replies meant for the turns (turns 2 and 4 then make no tool
    # call, so the previous turn has no result to spare). This test is about the truncator's own trimming.
    agent = make(make_agent, out, script=script, truncator={"history_keep_turns": 2},
                 plugin_config={"compaction": {"enabled": False}})
    sid = None
    for i in range(6):
        sid = agent.run(f"turn {i}", session_id=sid).session_id
    last = agent.provider.requests[-1]
    tools_in_req = tool_messages(last)
    assert len(tools_in_req) == 6, "every turn made its one tool call (nothing else consumed the script)"
    trimmed = [m for m in tools_in_req if m.metadata.get("truncator_trimmed")]
    assert trimmed, "old tool results should be trimmed"
    assert not tools_in_req[-1].metadata.get("truncator_trimmed")  # the current turn's result is intact
    assert not tools_in_req[-2].metadata.get("truncator_trimmed")  # and the previous turn's (keep_turns=2)
    session = agent.session(sid)
    assert all("old tool result" not in m.content for m in session.history)  # the session keeps everything
    ev = agent.store.events(sid, "truncator.history_trimmed")
    assert ev and ev[-1]["data"]["tokens_after"] < ev[-1]["data"]["tokens_before"]


def test_config_section_in_agent_schema():
    from clawkit.config import build_agent_model

    schema = json.dumps(build_agent_model([("truncator", clawkit_truncator.TruncatorConfig, False)]).model_json_schema())
    assert "max_share" in schema and "history_keep_turns" in schema


def test_loads_alone_from_its_entry_point(monkeypatch):
    from clawkit.plugins import get_plugin_manager

    # narrow: the plugin loads alone from its entry point
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "clawkit-truncator")
    pm = get_plugin_manager()
    # the entry point names clawkit_truncator.plugin, registered lazily (read from its source)
    plugin = pm.get_plugin("truncator")
    assert {h.name for h in pm.get_hookcallers(plugin)} >= {"after_tool_call", "before_llm_call", "register_tools"}
