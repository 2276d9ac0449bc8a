"""The agent loop: tools, concurrency, bounds and error results."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from clawkit import hookimpl
from clawkit.testing import ScriptedReply, call
from clawkit.tools import ToolError, tool


class Box:
    """A toolbox: each public method is a tool."""

    def __init__(self):
        self.threads = set()
        self.together: threading.Barrier | None = None  # set: each call waits until the others are in flight
        self.arrived, self.expect = 0, 0  # the same for the async tool

    def slow(self, n: int) -> str:
        """Sleep a little and report.

        Args:
            n: which call this is
        """
        self.threads.add(threading.get_ident())
        if self.together is not None:
            self.together.wait()  # BrokenBarrierError (the calls ran one after the other) after its timeout
        time.sleep(0.2)
        return f"slow {n}"

    async def wait(self, seconds: float) -> str:
        """Wait asynchronously."""
        self.arrived += 1
        deadline = time.monotonic() + 10
        while self.arrived < self.expect:  # the calls meet: only possible when they run at once
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.arrived} of {self.expect} calls in flight: not concurrent")
            await asyncio.sleep(0.01)
        await asyncio.sleep(seconds)
        return "waited"

    def fails(self) -> str:
        """Always raises."""
        raise RuntimeError("disk on fire")

    def polite(self) -> str:
        """Raises a clean tool error."""
        raise ToolError("file not found: a.txt")

    @tool(risk="unsafe")
    def nuke(self) -> str:
        """Marked unsafe."""
        return "boom"


def plugin(box):
    class P:
        @hookimpl
        def register_tools(self, register, agent):
            register(box)

    return P()


@pytest.mark.narrow("compares the exact tool set a probe plugin registers, without the installed tools")
def test_function_schema_from_signature_and_docstring(make_agent):
    box = Box()
    agent = make_agent(["ok"], plugins=(plugin(box),), tools=["*"])
    tools = {t.name: t.definition for t in agent.tools.visible()}
    assert set(tools) == {"slow", "wait", "fails", "polite", "nuke"}
    assert tools["slow"].description == "Sleep a little and report."
    assert tools["slow"].parameters["properties"]["n"] == {"type": "integer", "description": "which call this is"}
    assert tools["slow"].parameters["required"] == ["n"]
    assert tools["nuke"].risk.value == "unsafe" and tools["slow"].risk.value == "safe"


def test_only_allowed_tools_are_shown_and_run(make_agent):
    box = Box()
    agent = make_agent([ScriptedReply.calls(call("nuke")), "ok"], plugins=(plugin(box),), tools=["slow", "wait"])
    r = agent.run("go")
    assert [t.name for t in agent.provider.requests[0].tools] == ["slow", "wait"]
    assert r.tool_calls[0]["is_error"]
    assert "unknown tool 'nuke'" in agent.provider.requests[1].messages[-1].content


def test_two_calls_in_one_response_run_concurrently(make_agent):
    box = Box()
    box.together = threading.Barrier(2, timeout=10)  # a proof of overlap, not a timing bound (load cannot flake it)
    agent = make_agent(
        [ScriptedReply.calls(call("slow", n=1), call("slow", n=2)), "both done"], plugins=(plugin(box),), tools=["slow"]
    )
    r = agent.run("go")
    assert r.reply == "both done"
    assert not any(c["is_error"] for c in r.tool_calls), r.tool_calls
    assert len(box.threads) == 2
    contents = [m.content for m in agent.provider.requests[1].messages if m.role == "tool"]
    assert contents == ["slow 1", "slow 2"]  # results keep the calls' order


def test_async_tools_run_concurrently(make_agent):
    box = Box()
    box.expect = 2  # each call waits until both are in flight: only concurrent calls get there
    agent = make_agent(
        [ScriptedReply.calls(call("wait", seconds=0.2), call("wait", seconds=0.2)), "ok"], plugins=(plugin(box),), tools=["wait"]
    )
    r = agent.run("go")
    assert not any(c["is_error"] for c in r.tool_calls), r.tool_calls


def test_errors_become_results_the_model_sees(make_agent):
    script = [
        ScriptedReply.calls(call("fails"), call("polite"), call("slow", n="many"), call("slow", n=1, extra=True)),
        "recovered",
    ]
    agent = make_agent(script, plugins=(plugin(Box()),), tools=["*"])
    r = agent.run("go")
    assert r.reply == "recovered"
    tool_msgs = [m.content for m in agent.provider.requests[1].messages if m.role == "tool"]
    assert "disk on fire" in tool_msgs[0] and "RuntimeError" in tool_msgs[0]
    assert tool_msgs[1] == "Error: file not found: a.txt"
    assert "n:" in tool_msgs[2] and "integer" in tool_msgs[2]
    assert "extra" in tool_msgs[3]


def test_invalid_json_arguments_become_an_error_result(make_agent):
    from clawkit.types import LlmResponse, ToolCall

    bad = ToolCall(name="slow", raw_arguments='{"n": 1', argument_error="Expecting ',' delimiter")

    def reply(request):
        if len(request.messages) == 1:
            return LlmResponse(tool_calls=[bad])
        return LlmResponse(content="ok")

    class Prov:
        requests = []

        async def complete(self, request, on_text=None):
            self.requests.append(request)
            return reply(request)

    agent = make_agent(provider=Prov(), plugins=(plugin(Box()),), tools=["slow"])
    assert agent.run("go").reply == "ok"
    last = Prov.requests[1].messages[-1].content
    assert "not valid JSON" in last
    # the malformed arguments are sent back verbatim, so the model sees what it wrote
    assistant = [m for m in Prov.requests[1].openai_messages() if m.get("tool_calls")][0]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"n": 1'


def test_max_tool_rounds_bounds_a_turn(make_agent):
    script = [ScriptedReply.calls(call("slow", n=i)) for i in range(2)] + ["gave up"]
    agent = make_agent(script, plugins=(plugin(Box()),), tools=["slow"], limits={"max_tool_rounds": 2})
    r = agent.run("go")
    assert r.stop_reason == "max_tool_rounds" and r.reply == "gave up"
    assert len(agent.provider.requests) == 3
    assert agent.provider.requests[2].tools == []  # the last call may only answer
    assert "max_tool_rounds" in agent.provider.requests[2].messages[-1].content


def test_identical_call_three_times_in_a_row_stops(make_agent):
    same = ScriptedReply.calls(call("slow", n=7))
    agent = make_agent([same, same, same, "stopping"], plugins=(plugin(Box()),), tools=["slow"])
    r = agent.run("go")
    assert r.stop_reason == "repeated_call" and r.reply == "stopping"
    ran = [m.content for m in agent.provider.requests[3].messages if m.role == "tool"]
    assert ran[:2] == ["slow 7", "slow 7"] and "repeated" in ran[2]
    assert "repeated 3 times" in agent.provider.requests[3].messages[-1].content


def test_different_calls_do_not_trigger_repeat_detection(make_agent):
    script = [ScriptedReply.calls(call("slow", n=i % 2)) for i in range(4)] + ["done"]
    agent = make_agent(script, plugins=(plugin(Box()),), tools=["slow"])
    assert agent.run("go").stop_reason == "done"


def test_turn_state_is_per_turn_and_session_history_carries_over(make_agent):
    agent = make_agent(["one", "two"])
    r1 = agent.run("first")
    r2 = agent.run("second", session_id=r1.session_id)
    msgs = agent.provider.requests[1].messages
    assert [m.content for m in msgs] == ["first", "one", "second"]
    assert r2.session_id == r1.session_id


def test_each_concurrent_call_sees_its_own_step_id(make_agent):
    seen = {}

    class Gate:
        @hookimpl
        async def before_tool_call(self, ctx, call):
            await asyncio.sleep(0.01)  # interleave the two calls
            seen[call.id] = ctx.step_id

    def probe(ctx, n: int) -> str:
        """Report the step id the tool sees."""
        return ctx.step_id

    class T:
        @hookimpl
        def register_tools(self, register, agent):
            register(probe)

    agent = make_agent([ScriptedReply.calls(call("probe", n=1), call("probe", n=2)), "ok"], plugins=(T(), Gate()), tools=["probe"])
    agent.run("go")
    assert seen == {"call_1_0": "call_1_0", "call_1_1": "call_1_1"}
    results = [m.content for m in agent.provider.requests[1].messages if m.role == "tool"]
    assert results == ["call_1_0", "call_1_1"]


def test_a_plugin_can_stop_the_turn(make_agent):
    class Halt:
        @hookimpl
        def after_tool_call(self, ctx, call, result):
            ctx.state["stop_turn"] = "Stop: the same rule blocked you twice."

    agent = make_agent([ScriptedReply.calls(call("slow", n=1)), "ok, stopping"], plugins=(plugin(Box()), Halt()), tools=["slow"])
    r = agent.run("go")
    assert r.stop_reason == "stopped_by_plugin" and r.reply == "ok, stopping"
    last = agent.provider.requests[1]
    assert last.tools == [] and last.messages[-1].content.startswith("Stop: the same rule blocked you twice. ")
    assert "what is left" in last.messages[-1].content  # the wrap-up round asks for a summary


def test_events_are_committed_with_messages_and_at_turn_end(make_agent, workspace):
    import sqlite3

    agent = make_agent(["hi"])
    r = agent.run("hello")
    other = sqlite3.connect(agent.store.path)  # another reader sees everything once the turn is over
    types = [t for (t,) in other.execute("SELECT type FROM events WHERE session_id = ?", (r.session_id,))]
    assert types[0] == "session.start" and types[-1] == "turn.end"


@pytest.mark.narrow("compares the exact prompts a probe contributor builds, without the installed contributors")
def test_prompt_is_built_once_per_turn_unless_invalidated(make_agent):
    from clawkit.prompt import PromptContributor

    builds = []

    class Counting(PromptContributor):
        id = "counting"

        def contribute(self, ctx):
            builds.append(1)
            return f"build {len(builds)}"

    def refresh(ctx) -> str:
        """Ask for a fresh prompt."""
        ctx.invalidate_prompt()
        return "ok"

    class P:
        @hookimpl
        def register_prompt_contributor(self, register, agent):
            register(Counting())

        @hookimpl
        def register_tools(self, register, agent):
            register(refresh)

    agent = make_agent([ScriptedReply.calls(call("slow", n=1)), ScriptedReply.calls(call("refresh")), "done"],
                       plugins=(P(), plugin(Box())), tools=["slow", "refresh"])
    agent.run("go")
    systems = [r.system for r in agent.provider.requests]
    assert systems == ["build 1", "build 1", "build 2"]


def test_close_tells_plugins_and_closes_the_store(make_agent):
    seen = []

    class Watch:
        @hookimpl
        def on_event(self, event):
            seen.append(event.type)

    with make_agent(["ok"], plugins=(Watch(),)) as agent:
        agent.run("hi")
    assert seen[-1] == "agent.close"
    import sqlite3

    with pytest.raises(sqlite3.ProgrammingError):
        agent.store.conn.execute("SELECT 1")


def test_at_end_callbacks_run_when_the_run_ends_however_it_ends(make_agent):
    """``ctx.at_end``: what a plugin ties to a run (a per-task sandbox instance) is released when the
    run is done, when it fails and when it is cancelled — latest first, a failing callback isolated."""
    ended: list[tuple[str, str]] = []

    class Holder:
        @tool
        async def hold(self, ctx, what: str) -> str:
            """Tie something to the run.

            Args:
                what: how the run goes on
            """
            ctx.at_end(lambda: ended.append(("first", ctx.run_id)))
            ctx.at_end(lambda: 1 / 0)

            async def last() -> None:
                ended.append(("last", ctx.run_id))

            ctx.at_end(last)
            if what == "cancel":
                raise asyncio.CancelledError
            return "held"

    agent = make_agent([ScriptedReply.calls(call("hold", what="ok")), "done"], plugins=(plugin(Holder()),), tools=["hold"])
    result = agent.run("go")
    assert [w for w, _ in ended] == ["last", "first"] and {r for _, r in ended} == {result.run_id}
    ended.clear()
    agent.provider.add(ScriptedReply.calls(call("hold", what="ok")), RuntimeError("model down"))
    with pytest.raises(RuntimeError):
        agent.run("go")
    assert [w for w, _ in ended] == ["last", "first"]
    ended.clear()
    agent.provider.add(ScriptedReply.calls(call("hold", what="cancel")))
    with pytest.raises((asyncio.CancelledError, KeyboardInterrupt)):
        agent.run("go")
    assert [w for w, _ in ended] == ["last", "first"]
