"""Reservations: a call is counted before it starts (so parallel calls cannot overshoot), and a
reservation another gate's block or a denied approval makes unused is given back."""

from __future__ import annotations

import clawkit_budgets
from clawkit import Decision, hook_order, hookimpl
from clawkit.testing import ScriptedReply, call


class Tools:
    def __init__(self):
        self.ran: list[int] = []

    @hookimpl
    def register_tools(self, register, agent):
        def work(n: int) -> str:
            """Do a step of work."""
            self.ran.append(n)
            return f"step {n} done"

        register(work)


class BlocksOdd:
    """A gate after budgets that blocks odd steps (its reservation must be given back)."""

    @hookimpl
    @hook_order(60)
    def before_tool_call(self, ctx, call):
        if call.arguments.get("n", 0) % 2:
            return Decision(action="block", reason="odd steps are not allowed")
        return None


def _parallel(n):
    return ScriptedReply.calls(*[call("work", n=i) for i in range(n)])


def test_parallel_calls_beyond_the_cap_are_blocked_before_they_run(make_agent):
    tools = Tools()
    agent = make_agent([_parallel(12), "wrapped up"], plugins=(clawkit_budgets, tools), tools=["work"],
                       plugin_config={"budgets": {"run": {"tool_calls": 4}}})
    r = agent.run("twelve at once")
    assert r.stop_reason == "budget" and sorted(tools.ran) == [0, 1, 2, 3]
    blocked = [c for c in r.tool_calls if c["blocked"]]
    assert len(blocked) == 8
    results = [m.content for m in agent.provider.requests[-1].messages if m.role == "tool"]
    assert sum("budget reached (run tool calls" in t for t in results) == 8


def test_a_call_another_gate_blocks_gives_its_reservation_back(make_agent):
    tools = Tools()
    agent = make_agent([_parallel(6), _parallel(6), "wrapped up"], plugins=(clawkit_budgets, tools, BlocksOdd()),
                       tools=["work"], plugin_config={"budgets": {"run": {"tool_calls": 4}}})
    r = agent.run("go")
    # round one: 0, 2, 4 ran (1, 3, 5 blocked by the other gate, their reservations returned);
    # round two: one more fits in the cap of four
    assert sorted(tools.ran) == [0, 0, 2, 4] and r.stop_reason == "budget"


def test_a_denied_approval_gives_its_reservation_back(make_agent):
    class AsksForOdd:
        @hookimpl
        @hook_order(60)
        def before_tool_call(self, ctx, call):
            if call.arguments.get("n", 0) % 2:
                return Decision(action="require_approval", reason="odd")
            return None

    tools = Tools()
    # round two asks for no approval: while an approval is pending its reservation is held, and with
    # every builtin loaded an async gate can let a parallel sibling be gated before the denial lands,
    # so an odd call in round two would make the outcome depend on scheduling
    evens = ScriptedReply.calls(*[call("work", n=i) for i in (0, 2, 4)])
    agent = make_agent([_parallel(4), evens, "done"], plugins=(clawkit_budgets, tools, AsksForOdd()),
                       tools=["work"], plugin_config={"budgets": {"run": {"tool_calls": 4}}})
    agent.approver = lambda call, reason, ctx: False
    r = agent.run("go")
    # round one: 0, 2 ran, 1 and 3 denied (given back); round two: 0 and 2 fit, 4 is over the cap
    assert sorted(tools.ran) == [0, 0, 2, 2] and r.stop_reason == "budget"


def test_model_calls_are_reserved_before_the_call(make_agent):
    tools = Tools()
    agent = make_agent([ScriptedReply.calls(call("work", n=i)) for i in range(5)] + ["wrapped up"],
                       plugins=(clawkit_budgets, tools), tools=["work"],
                       plugin_config={"budgets": {"run": {"model_calls": 2}}})
    r = agent.run("go")
    assert r.stop_reason == "budget" and len(agent.provider.requests) == 3  # two, then the wrap-up round
    assert agent.provider.requests[-1].tools == []
