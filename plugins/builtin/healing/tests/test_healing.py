"""clawkit-healing through the real loop (scripted model) and a real SQLite session store."""

from __future__ import annotations

import clawkit_healing
from clawkit import hookimpl
from clawkit.testing import ScriptedReply, call
from clawkit.tools import ToolError


def flaky(path: str) -> str:
    """Read a file that is not there."""
    raise ToolError(f"no such file: {path}")


def fine(n: int) -> str:
    """Always works."""
    return f"ok {n}"


class Tools:
    @hookimpl
    def register_tools(self, register, agent):
        register(flaky)
        register(fine)


def _last(req) -> str:
    """The request's final message: where the healing notes go (issue 27 item 9), not the system prompt."""
    assert "STOP" not in (req.system or "") and "Focus:" not in (req.system or "")
    return req.messages[-1].content or ""


def _events(agent, sid, kind):
    return [e["data"] for e in agent.store.events(sid) if e["type"] == kind]


def test_stop_and_think_after_three_failures_then_reset_on_success(make_agent):
    script = [ScriptedReply.calls(call("flaky", path=f"f{i}.txt")) for i in range(6)] + [
        ScriptedReply.calls(call("fine", n=1)), ScriptedReply.calls(call("flaky", path="g.txt")), "giving up"]
    agent = make_agent(script, plugins=(clawkit_healing, Tools()), tools=["flaky", "fine"])
    r = agent.run("read the files")
    systems = [_last(req) for req in agent.provider.requests]
    noted = [i for i, s in enumerate(systems) if "STOP and THINK" in s]
    assert noted == [3, 6]  # after the 3rd failure, again after 3 more; not after the success
    assert "The last 3 tool calls failed" in systems[3]
    assert [e["failures"] for e in _events(agent, r.session_id, "healing.stop_and_think")] == [3, 6]


def test_stagnation_alert_after_repeated_calls_without_progress(make_agent):
    # alternating two identical calls never trips the kernel's identical-call stop, but is no progress
    script = [ScriptedReply.calls(call("fine", n=i % 2)) for i in range(8)] + ["stuck"]
    agent = make_agent(script, plugins=(clawkit_healing, Tools()), tools=["fine"],
                       plugin_config={"healing": {"stagnation_steps": 4}})
    r = agent.run("loop")
    systems = [_last(req) for req in agent.provider.requests]
    alerts = [i for i, s in enumerate(systems) if "Stagnation alert" in s]
    assert alerts == [6]  # calls 3..6 repeat the first two: four steps without progress
    assert _events(agent, r.session_id, "healing.stagnation") == [{"steps": 4}]


def test_focus_booster_on_a_long_history(make_agent):
    agent = make_agent(["a", "b"], plugins=(clawkit_healing,), limits={"context_window": 1000, "max_tool_rounds": 5},
                       plugin_config={"healing": {"focus_share": 0.5}})
    r = agent.run("x" * 4000)
    agent.run("now summarise section 2 only", session_id=r.session_id)
    assert "\u00abnow summarise section 2 only\u00bb" in _last(agent.provider.requests[1])
    assert len(_events(agent, r.session_id, "healing.focus")) == 2


def test_counters_survive_across_turns(make_agent):
    script = [ScriptedReply.calls(call("flaky", path="a")), ScriptedReply.calls(call("flaky", path="b")), "hm",
              ScriptedReply.calls(call("flaky", path="c")), "still failing"]
    agent = make_agent(script, plugins=(clawkit_healing, Tools()), tools=["flaky"])
    r = agent.run("one")
    agent.run("two", session_id=r.session_id)
    assert "STOP and THINK" in _last(agent.provider.requests[-1])
    assert agent.store.load_metadata(r.session_id)["healing"]["failures"] == 3


def test_blocked_calls_count_as_failures(make_agent):
    from clawkit import Decision

    class Gate:
        @hookimpl
        def before_tool_call(self, ctx, call):
            return Decision(action="block", reason="not here")

    script = [ScriptedReply.calls(call("fine", n=i)) for i in range(3)] + ["blocked thrice"]
    agent = make_agent(script, plugins=(clawkit_healing, Tools(), Gate()), tools=["fine"])
    agent.run("go")
    assert "STOP and THINK" in _last(agent.provider.requests[3])


def test_signatures_seen_are_stored_and_a_repeat_in_a_later_turn_counts(make_agent):
    # the state is written when a counter or the signatures seen change (a new call's signature is kept for
    # later turns: the same call again is no progress), and read back by the next turn
    script = [ScriptedReply.calls(call("fine", n=1)), "done", ScriptedReply.calls(call("fine", n=1)), "again",
              ScriptedReply.calls(call("fine", n=2)), "new"]
    agent = make_agent(script, plugins=(clawkit_healing, Tools()), tools=["fine"])
    r = agent.run("one")
    first = agent.store.load_metadata(r.session_id)["healing"]
    assert (len(first["seen"]), first["since_progress"], first["failures"]) == (1, 0, 0)
    agent.run("two", session_id=r.session_id)
    second = agent.store.load_metadata(r.session_id)["healing"]
    assert (second["seen"], second["since_progress"]) == (first["seen"], 1)
    agent.run("three", session_id=r.session_id)
    third = agent.store.load_metadata(r.session_id)["healing"]
    assert (len(third["seen"]), third["since_progress"]) == (2, 0)
