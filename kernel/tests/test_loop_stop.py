"""How a turn ends early: ``ctx.stop()``, the wrap-up round (no tools, never empty), counters."""

from __future__ import annotations

from clawkit import hookimpl
from clawkit.testing import ScriptedReply, call
from clawkit.tools import tool


@tool
def ping(n: int) -> str:
    """Answer pong."""
    return f"pong {n}"


class Tools:
    @hookimpl
    def register_tools(self, register, agent):
        register(ping)


def test_stop_before_a_model_call_runs_the_wrap_up_round(make_agent):
    class Budget:
        @hookimpl
        def before_tool_call(self, ctx, call):
            if ctx.tool_calls >= 1:
                ctx.stop("Stopped: the tool-call budget is used up.", reason="budget", detail="tool_calls 1/1")

    agent = make_agent([ScriptedReply.calls(call("ping", n=1)), ScriptedReply.calls(call("ping", n=2)), "summary"],
                       plugins=(Tools(), Budget()), tools=["ping"])
    r = agent.run("go")
    assert r.stop_reason == "budget" and r.stop_detail == "tool_calls 1/1" and r.reply == "summary"
    assert r.as_json()["stop_reason"] == "budget"
    last = agent.provider.requests[-1]
    assert last.tools == []
    assert last.messages[-1].metadata.get("wrap_up") and "Do not call any tools" in last.messages[-1].content


def test_wrap_up_round_offers_no_tools_even_when_a_plugin_adds_some(make_agent):
    class AddsTools:
        @hookimpl
        def before_llm_call(self, ctx, request):
            request.tools = [t.definition for t in ctx.tools.visible()]

    agent = make_agent([ScriptedReply.calls(call("ping", n=1))] * 2 + ["done"], plugins=(Tools(), AddsTools()), tools=["ping"])
    agent.config.limits.max_tool_rounds = 2
    r = agent.run("go")
    assert r.stop_reason == "max_tool_rounds"
    assert agent.provider.requests[-1].tools == []


def test_an_empty_wrap_up_reply_is_replaced_by_a_summary(make_agent):
    agent = make_agent([ScriptedReply.calls(call("ping", n=1)), ""], plugins=(Tools(),), tools=["ping"])
    agent.config.limits.max_tool_rounds = 1
    r = agent.run("go")
    assert r.stop_reason == "max_tool_rounds"
    assert r.reply.startswith("The turn stopped (max_tool_rounds)") and "ping" in r.reply


def test_turn_counters_and_usage_are_on_the_context(make_agent):
    seen = {}

    class Watch:
        @hookimpl
        def before_llm_call(self, ctx, request):
            seen[ctx.model_calls] = (ctx.tool_calls, ctx.usage.total_tokens)

    agent = make_agent([ScriptedReply.calls(call("ping", n=1), call("ping", n=2)), "ok"], plugins=(Tools(), Watch()), tools=["ping"])
    agent.run("go")
    assert seen[0] == (0, 0)
    assert seen[1][0] == 2 and seen[1][1] > 0


def test_notice_is_delivered_cancelled_unless_a_plugin_shows_it(make_agent):
    got = []

    class Notes:
        @hookimpl
        async def before_llm_call(self, ctx, request):
            await ctx.notice("quiet note")
            await ctx.notice("loud note", verbose_only=False)

    agent = make_agent(["ok"], plugins=(Notes(),))
    agent.run("go", deliver=got.append)
    notices = [o.content for o in got if o.kind == "notice"]
    assert notices == ["loud note"]
