"""Latency clawkit-policy adds to a tool call, against the same call with no plugin, in one run.

Run: .venv/bin/python tests/benchmarks/bench_policy.py

* gate: ``before_tool_call`` (scope check, grants, approval lookup, one audit record
  queued for the writer thread) — goal <= 100 us added per call. Measured back to back
  (2000 gates in a row: the writer commits batches of 256 meanwhile, so its cost is
  included) and with the writer idle (flushed untimed every 50 calls, as in turns whose
  records are committed by the flush at the turn's end) (all four gates together are
  measured by tests/benchmarks/bench_gates.py, which includes this plugin when installed).
* whole call: gate + execution + ``after_tool_call`` (execution record, result redaction).
* redaction of a 100 KB result (the secret scan the policy runs on every result).
Each figure is the median of 7 batches; "added" is the difference to the baseline.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from clawkit import hookimpl
from clawkit.config import collect_sections, validate_agent
from clawkit.context import TurnContext
from clawkit.hooks import HookRunner
from clawkit.loop import Agent
from clawkit.plugins import get_plugin_manager
from clawkit.testing import ScriptedProvider
from clawkit.types import ToolCall

import clawkit_policy
from clawkit_policy.gate import approval_key
from clawkit_policy.redact import redact_text


class FastTools:
    """The standard tool names and risks, doing nothing: we time the policy, not the tools."""

    @hookimpl
    def register_tools(self, register, agent):
        def read_file(path: str) -> str:
            return "hello world\n" * 20

        def write_file(path: str, content: str) -> str:
            return "ok"

        def shell_exec(command: str) -> str:
            return "exit code 0\n"

        def web_fetch(url: str) -> str:
            return "<html>page</html>"

        register(read_file, risk="safe")
        register(write_file, risk="guarded")
        register(shell_exec, risk="unsafe")
        register(web_fetch, risk="safe")


CALLS = {
    "read_file": ToolCall(id="c1", name="read_file", arguments={"path": "notes/today.md"}),
    "write_file": ToolCall(id="c2", name="write_file", arguments={"path": "notes/today.md", "content": "# Today\n"}),
    "shell_exec": ToolCall(id="c3", name="shell_exec", arguments={"command": "git status"}),
    "web_fetch": ToolCall(id="c4", name="web_fetch", arguments={"url": "https://docs.python.org/3/"}),
}


def build(tmp: Path, plugins: tuple, sections: dict) -> tuple[Agent, TurnContext]:
    pm = get_plugin_manager(extra=(FastTools(), *plugins), load_entry_points=False)
    data = {"name": "bench", "model": "scripted/bench", "workspace": str(tmp), "tools": list(CALLS),
            "state_db": str(tmp / f"state-{time.monotonic_ns()}.db"), "plugins": sections}
    cfg = validate_agent(data, "<bench>", {}, collect_sections(HookRunner(pm)))
    agent = Agent(cfg, pm=pm, provider=ScriptedProvider([]), approver=None)
    session = agent.session()
    ctx = TurnContext(cfg, session, agent.hooks, agent.tools, agent_obj=agent)
    if plugins:  # steady state: the guarded call was approved earlier in this session
        turn = clawkit_policy._turn(ctx)
        turn.state.add_approval(session.id, approval_key(turn.cfg, CALLS["write_file"]), "write_file", "bench", 3600)
    return agent, ctx


async def time_gate(agent, ctx, call, n):
    start = time.perf_counter()
    for _ in range(n):
        decision = await agent.executor.gate(ctx, call)
        assert decision is None, decision
    return (time.perf_counter() - start) / n * 1e6


async def time_gate_idle(agent, ctx, call, n):
    """Gate latency with the audit writer idle, as in a real turn (the turn's end commits its
    records on the turn's thread): the queue is flushed, untimed, every 50 calls."""
    turn = clawkit_policy._turn(ctx)
    spent = 0.0
    for i in range(n):
        start = time.perf_counter()
        decision = await agent.executor.gate(ctx, call)
        spent += time.perf_counter() - start
        assert decision is None, decision
        if i % 50 == 49 and turn.writer is not None:
            turn.writer.flush()
    return spent / n * 1e6


async def time_call(agent, ctx, call, n):
    start = time.perf_counter()
    for _ in range(n):
        res = await agent.executor.one(ctx, call, None, False)
        assert not res.is_error, res.content
    return (time.perf_counter() - start) / n * 1e6


def median(fn, batches=7):
    return statistics.median(asyncio.run(fn()) for _ in range(batches))


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="bench-policy-"))
    grants = {"grants": [{"tools": ["shell_exec"], "commands": ["git status"]}]}
    setups = {
        "none": ((), {}),
        "policy": ((clawkit_policy,), {"policy": grants}),
        "policy, audit off": ((clawkit_policy,), {"policy": {**grants, "audit": False}}),
    }
    n = 2000
    gate, whole = {}, {}
    for label, (plugins, sections) in setups.items():
        agent, ctx = build(tmp, plugins, sections)
        gate[label] = {c: median(lambda: time_gate(agent, ctx, call, n)) for c, call in CALLS.items()}
        if label == "policy":
            gate["policy, writer idle"] = {c: median(lambda: time_gate_idle(agent, ctx, call, n // 4)) for c, call in CALLS.items()}
        whole[label] = {c: median(lambda: time_call(agent, ctx, call, n // 4)) for c, call in CALLS.items()}
        clawkit_policy.ledger_for(agent.store)  # commits what is queued: no backlog spills into the next setup
        agent.store.close()
    print(f"python {sys.version.split()[0]}; {n} gate calls per batch, median of 7 batches; microseconds per call\n")
    for title, table in (("before execution (gate)", gate), ("whole call (gate+run+after)", whole)):
        base = table["none"]
        print(f"{title:<28}" + "".join(f"{c:>12}" for c in CALLS) + f"{'worst added':>13}")
        for label, row in table.items():
            added = max(row[c] - base[c] for c in CALLS)
            print(f"{label:<28}" + "".join(f"{row[c]:>12.1f}" for c in CALLS) + f"{added:>13.1f}")
        print()
    worst = max(gate["policy"][c] - gate["none"][c] for c in CALLS)
    idle = max(gate["policy, writer idle"][c] - gate["none"][c] for c in CALLS)
    print(f"policy gate, back to back (audit writer competing for the GIL): worst added {worst:.1f} us; "
          f"goal <= 100 us: {worst / 100:.2f} of the budget")
    print(f"policy gate latency, writer idle as between model calls:         worst added {idle:.1f} us; "
          f"goal <= 100 us: {idle / 100:.2f} of the budget")

    docs = sorted(Path(sys.prefix).glob("lib/python3*/site-packages/*.dist-info/METADATA"))
    corpus = "\n".join(p.read_text(errors="ignore") for p in docs)
    text = (corpus * (1 + 100_000 // max(1, len(corpus))))[:100_000]
    redact_text(text)
    reps = 100
    start = time.perf_counter()
    for _ in range(reps):
        redact_text(text)
    per = (time.perf_counter() - start) / reps * 1e3
    base_start = time.perf_counter()
    for _ in range(reps):
        text.count("\n")  # the cheapest full pass over the same text, as a baseline
    base = (time.perf_counter() - base_start) / reps * 1e3
    print(f"redacting a 100 KB result: {per:.3f} ms ({per / max(base, 1e-9):.0f}x one str.count pass of {base:.3f} ms); "
          f"goal <= 1 ms per 100 KB: {per:.2f} of the budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
