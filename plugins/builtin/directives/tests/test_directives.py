"""Directives through the real agent loop (scripted model) and a real SQLite session store."""

from __future__ import annotations

import json
import logging
import time

import pytest

import clawkit_directives
from clawkit import hookimpl
from clawkit.testing import ScriptedProvider, ScriptedReply, call
from clawkit_directives import parse


@pytest.fixture
def make_agent(workspace):
    """The kit's make_agent plus ``plugin_config`` (its ``plugins=`` takes plugin objects, not the YAML section)."""
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.testing import plugin_manager

    agents = []

    def factory(script=(), *, plugins=(clawkit_directives,), plugin_config=None, narrow=None, **config):
        data = {"name": "test-agent", "model": "openai/o3-mini", "workspace": str(workspace), **config}
        if plugin_config:
            data["plugins"] = plugin_config
        pm = plugin_manager(*plugins, narrow=narrow, plugin_config=plugin_config)  # the full install unless the test says why not
        cfg = validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm)))
        agent = Agent(cfg, pm=pm, provider=ScriptedProvider(script))
        agents.append(agent)
        return agent

    yield factory
    for a in agents:
        a.store.close()


def changes(agent, sid):
    return [e["data"] for e in agent.store.events(sid, "directive.change")]


# --- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, stripped, found",
    [
        ("/think high", "", [("think", "high")]),
        ("please /think high fix the bug", "please fix the bug", [("think", "high")]),
        ("fix it /verbose", "fix it", [("verbose", "on")]),
        ("/think about this problem", "about this problem", [("think", "medium")]),
        ("/think:low go", "go", [("think", "low")]),
        ("/THINK OFF", "", [("think", "off")]),
        ("/status", "", [("status", "")]),
        ("run /usr/bin/think and a/think", "run /usr/bin/think and a/think", []),
        ("what does /foo do? /thinking", "what does /foo do? /thinking", []),
        ("see `/think high` and\n```\n/verbose\n```", "see `/think high` and\n```\n/verbose\n```", []),
        ("/verbose full /elevated on", "", [("verbose", "full"), ("elevated", "on")]),
    ],
)
def test_parse(text, stripped, found):
    p = parse(text)
    assert p.text == stripped and p.directives == found


# --- /think --------------------------------------------------------------------------------


def test_think_persists_for_the_session(make_agent):
    agent = make_agent(["a", "b"])
    r = agent.run("/think high")
    assert r.stop_reason == "handled" and "think high" in r.reply
    assert agent.provider.requests == []  # a directive-only message does not reach the model
    r2 = agent.run("what is 2+2?", session_id=r.session_id)
    req = agent.provider.requests[0]
    assert req.reasoning_effort == "high"
    assert "Think carefully and thoroughly" in req.system
    assert req.messages[-1].content == "what is 2+2?"
    agent.run("and 3+3?", session_id=r2.session_id)
    assert agent.provider.requests[1].reasoning_effort == "high"
    assert agent.session(r.session_id).get("directives") == {"think": "high"}
    assert changes(agent, r.session_id)[0] == {"directive": "think", "value": "high", "previous": "off", "scope": "session", "accepted": True}


def test_think_off_and_inline_persists(make_agent):
    agent = make_agent(["a", "b", "c"])
    sid = agent.run("/think low").session_id
    agent.run("please /think high prove it", session_id=sid)
    first = agent.provider.requests[0]
    assert first.reasoning_effort == "high" and first.messages[-1].content == "please prove it"
    assert agent.session(sid).history[-2].metadata["original"] == "please /think high prove it"
    agent.run("next", session_id=sid)
    assert agent.provider.requests[1].reasoning_effort == "high"  # inline or alone: holds until changed
    r = agent.run("/think off", session_id=sid)
    assert "think off" in r.reply
    agent.run("again", session_id=sid)
    assert agent.provider.requests[2].reasoning_effort is None
    assert "Reasoning" not in agent.provider.requests[2].system
    assert [c["scope"] for c in changes(agent, sid)] == ["session", "session", "session"]


def test_think_only_sets_effort_for_reasoning_models(make_agent):
    agent = make_agent(["a"], model="openai/gpt-4o-mini")
    agent.run("/think high explain")
    req = agent.provider.requests[0]
    assert req.reasoning_effort is None and "Think carefully" in req.system


# --- /verbose ------------------------------------------------------------------------------


class Echo:
    @hookimpl
    def register_tools(self, register, agent):
        def echo(text: str) -> str:
            """Echo text back.

            Args:
                text: what to echo
            """
            return text * 3000

        register(echo)


def _run_collect(agent, text, sid=None):
    seen = []
    r = agent.run(text, session_id=sid, deliver=seen.append)
    return r, [o for o in seen if o.kind != "stream_chunk"]


def test_verbose_on_full_off(make_agent):
    script = []
    for _ in range(3):
        script += [ScriptedReply.calls(call("echo", text="hi")), "done"]
    agent = make_agent(script, plugins=(clawkit_directives, Echo()), tools=["echo"])
    r, out = _run_collect(agent, "/verbose")
    sid = r.session_id
    r, out = _run_collect(agent, "go", sid)
    kinds = [o.kind for o in out]
    assert kinds == ["tool_call_display", "final_reply"]
    assert out[0].content.startswith('tool call: echo({"text": "hi"})') and "tokens: 10 in" in out[0].content
    assert "tokens:" in out[1].content  # usage of the last call on the reply
    _run_collect(agent, "/verbose full", sid)
    r, out = _run_collect(agent, "go", sid)
    assert [o.kind for o in out] == ["tool_call_display", "tool_result_display", "final_reply"]
    assert "more characters not shown" in out[1].content and len(out[1].content) < 2200
    _run_collect(agent, "/verbose off", sid)
    r, out = _run_collect(agent, "go", sid)
    assert [o.kind for o in out] == ["final_reply"] and out[0].content == "done"


def test_verbose_inline_persists_until_changed(make_agent):
    script = [ScriptedReply.calls(call("echo", text="x")), "done", ScriptedReply.calls(call("echo", text="y")), "done"]
    agent = make_agent(script, plugins=(clawkit_directives, Echo()), tools=["echo"])
    r, out = _run_collect(agent, "go /verbose")
    assert out[0].kind == "tool_call_display"
    r, out = _run_collect(agent, "go", r.session_id)
    assert out[0].kind == "tool_call_display"  # typed inside a message, it still holds for the conversation


# --- /elevated -----------------------------------------------------------------------------


def test_elevated_refused_when_not_permitted(make_agent):
    agent = make_agent([])
    r = agent.run("/elevated on")
    assert "not permitted" in r.reply
    assert agent.session(r.session_id).get("elevated_until") is None
    [ev] = changes(agent, r.session_id)
    assert ev["directive"] == "elevated" and ev["accepted"] is False


def test_elevated_grant_is_time_limited_and_audited(make_agent):
    agent = make_agent([ScriptedReply.calls(call("rm_rf", path="/")), "ok"], plugins=(clawkit_directives, Echo()),
                       tools=["echo"], plugin_config={"directives": {"allow_elevated": True, "elevated_minutes": 10}})
    agent.channel = "chat"  # a person typing
    t0 = time.time()
    r = agent.run("/elevated on")
    sid = r.session_id
    until = agent.session(sid).get("elevated_until")
    assert t0 + 599 <= until <= time.time() + 601 and "10 minutes" in r.reply
    # elevation never adds a tool the agent does not allow
    r2 = agent.run("delete everything", session_id=sid)
    assert r2.tool_calls[0]["is_error"] and "unknown tool 'rm_rf'" in agent.session(sid).history[-2].content
    assert "elevated: on" in agent.run("/status", session_id=sid).reply
    agent.run("/elevated off", session_id=sid)
    assert agent.session(sid).get("elevated_until") is None
    assert [(c["value"], c["accepted"]) for c in changes(agent, sid)] == [("on", True), ("off", True)]


def test_elevated_expires(make_agent):
    agent = make_agent([], plugin_config={"directives": {"allow_elevated": True}})
    agent.channel = "chat"
    sid = agent.run("/elevated on").session_id
    agent.session(sid).set("elevated_until", time.time() - 1)
    assert "elevated: off" in agent.run("/status", session_id=sid).reply


# --- robustness ----------------------------------------------------------------------------


def test_corrupted_metadata_means_safe_defaults(make_agent, caplog):
    agent = make_agent(["a", "b"], plugin_config={"directives": {"allow_elevated": True}})
    sid = agent.run("/think high").session_id
    agent.store.conn.execute("UPDATE sessions SET metadata = ? WHERE id = ?", ("{not json", sid))
    agent._sessions.clear()
    agent.run("hello", session_id=sid)
    assert agent.provider.requests[0].reasoning_effort is None
    bad = {"directives": "garbage", "elevated_until": "forever"}
    agent.store.conn.execute("UPDATE sessions SET metadata = ? WHERE id = ?", (json.dumps(bad), sid))
    agent._sessions.clear()
    with caplog.at_level(logging.WARNING, logger="clawkit.directives"):
        status = agent.run("/status", session_id=sid).reply
    assert "think: off" in status and "elevated: off" in status
    assert "corrupted" in caplog.text
    assert "elevated_until" not in agent.store.load_metadata(sid)  # removed: fail closed
    agent.store.conn.execute("UPDATE sessions SET metadata = ? WHERE id = ?", (json.dumps({"directives": {"think": "ultra", "verbose": "full"}}), sid))
    agent._sessions.clear()
    assert "think: off" in agent.run("/status", session_id=sid).reply
    assert "verbose: full" in agent.run("/status", session_id=sid).reply


def test_unknown_directives_are_left_as_text(make_agent):
    agent = make_agent(["a"])
    agent.run("/foo bar /thinkx")
    assert agent.provider.requests[0].messages[-1].content == "/foo bar /thinkx"


def test_config_section_in_schema_and_entry_point(monkeypatch):
    from clawkit.config import build_agent_model
    from clawkit.plugins import get_plugin_manager

    schema = json.dumps(build_agent_model([("directives", clawkit_directives.DirectivesConfig, False)]).model_json_schema())
    assert "allow_elevated" in schema and "elevated_minutes" in schema
    # narrow: the plugin loads alone from its entry point
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "clawkit-directives")
    # the entry point names clawkit_directives.plugin, registered lazily (read from its source)
    assert get_plugin_manager().get_plugin("directives")._clawkit_module == "clawkit_directives.plugin"


def test_verbose_shows_plugin_notices(make_agent):
    class Notes:
        @hookimpl
        async def before_llm_call(self, ctx, request):
            await ctx.notice("stop and think: 3 failures")

    agent = make_agent(["ok", "ok", "ok"], plugins=(clawkit_directives, Notes()))
    r, out = _run_collect(agent, "go")
    assert [o.kind for o in out] == ["final_reply"]  # quiet by default
    _run_collect(agent, "/verbose", r.session_id)
    r, out = _run_collect(agent, "go", r.session_id)
    assert [(o.kind, o.content) for o in out][0] == ("notice", "stop and think: 3 failures")
