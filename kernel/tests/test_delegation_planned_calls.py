"""``ctx.plan_tool_call``: a call a plugin asks for in ``message_received`` takes the one pipeline —
gates, approvals, ``after_tool_call``, persistence — and the model answers from its result."""

from __future__ import annotations

from clawkit import Decision, hookimpl
from clawkit.tools import tool

RAN: list[str] = []


@tool
def lookup(query: str) -> str:
    """Look something up."""
    RAN.append(query)
    return f"found {query}"


class Tools:
    @hookimpl
    def register_tools(self, register, agent):
        register(lookup)


class Router:
    def __init__(self, *queries: str):
        self.queries = queries

    @hookimpl
    def message_received(self, ctx, message):
        for q in self.queries:
            ctx.plan_tool_call("lookup", {"query": q}, origin="router")


class Wrap:
    seen: list = []

    @hookimpl
    def before_tool_call(self, ctx, call):
        Wrap.seen.append((call.name, ctx.state["planned_calls"].get(call.id)))

    @hookimpl
    def after_tool_call(self, ctx, call, result):
        result.content = f"<data>{result.content}</data>"
        return result


def test_planned_calls_run_through_the_gates_and_the_model_answers_from_their_results(make_agent):
    RAN.clear()
    Wrap.seen = []
    agent = make_agent(["Both found."], plugins=(Tools(), Router("a", "b"), Wrap()), tools=["lookup"])
    r = agent.run("look up a and b")
    assert r.reply == "Both found." and sorted(RAN) == ["a", "b"]
    assert Wrap.seen == [("lookup", "router"), ("lookup", "router")]
    history = agent.store.messages(r.session_id)
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    planned = history[1]
    assert planned.metadata == {"origin": "router"} and [c.name for c in planned.tool_calls] == ["lookup", "lookup"]
    assert history[2].content == "<data>found a</data>"  # after_tool_call saw the result
    (req,) = agent.provider.requests
    assert [m.role for m in req.messages[-3:]] == ["assistant", "tool", "tool"]  # the model reads the results
    assert [c["name"] for c in r.tool_calls] == ["lookup", "lookup"]
    store = agent.store
    (ev,) = store.events(r.session_id, "tool.planned")
    assert ev["data"]["origin"] == "router" and [c["tool"] for c in ev["data"]["calls"]] == ["lookup", "lookup"]


def test_a_blocked_planned_call_does_not_run_and_the_model_reads_the_block(make_agent):
    RAN.clear()

    class Block:
        @hookimpl
        def before_tool_call(self, ctx, call):
            return Decision.block("no lookups today")

    agent = make_agent(["Could not look it up."], plugins=(Tools(), Router("x"), Block()), tools=["lookup"])
    r = agent.run("look up x")
    assert RAN == [] and r.reply == "Could not look it up."
    assert r.tool_calls[0]["blocked"] is True
    (req,) = agent.provider.requests
    assert "no lookups today" in req.messages[-1].content


def test_a_reply_set_by_a_plugin_wins_over_planned_calls(make_agent):
    RAN.clear()

    class Answers:
        @hookimpl
        def message_received(self, ctx, message):
            ctx.state["reply"] = "handled"

    agent = make_agent([], plugins=(Tools(), Router("x"), Answers()), tools=["lookup"])
    r = agent.run("x")
    assert r.reply == "handled" and RAN == []


def test_origin_is_required():
    from clawkit.context import TurnContext

    ctx = TurnContext.__new__(TurnContext)
    ctx.state = {}
    try:
        ctx.plan_tool_call("lookup", {}, origin="")
    except ValueError as exc:
        assert "origin" in str(exc)
    else:
        raise AssertionError("an empty origin was accepted")


def test_a_plugin_stop_during_planned_calls_makes_the_next_call_the_wrap_up(make_agent):
    class Stopper:
        @hookimpl
        def before_tool_call(self, ctx, call):
            ctx.stop("Stopped: enough.", reason="budget")

    agent = make_agent(["summary"],
                       plugins=(Tools(), Router("y"), Stopper()), tools=["lookup"])
    r = agent.run("y")
    assert r.stop_reason == "budget" and r.reply == "summary"
    assert agent.provider.requests[-1].tools == []


def test_planning_after_message_received_is_refused(make_agent):
    errors = []

    class Late:
        @hookimpl
        def before_llm_call(self, ctx, request):
            try:
                ctx.plan_tool_call("lookup", {"query": "late"}, origin="late")
            except RuntimeError as exc:
                errors.append(str(exc))

    agent = make_agent(["ok"], plugins=(Tools(), Late()), tools=["lookup"])
    agent.run("hi")
    assert errors and "message_received" in errors[0]
