"""What a delegation (parent → child → parent) adds, against the child's turn alone, in one run.

Run: .venv/bin/python tests/benchmarks/bench_subagents.py [--turns 200]

Every installed plugin is loaded; the models are an in-process provider (no HTTP), so the
figures are clawkit's own work. Three variants, interleaved in batches, medians per turn:

* child alone — the researcher agent's turn on the task (one model call, its answer);
* parent, plain tool — the lead's turn calling an ordinary tool that returns the same answer
  (two model calls and one tool round: the parent's own share of a delegation);
* parent, delegation — the lead's turn calling ``agent_researcher``.

added = delegation − plain tool − child alone: the sub-agent machinery itself (child session,
dispatch through ``message_sending``, run/step records, wrapping, provenance, events, the
shield's scan of the answer). Goal: ≤ 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from clawkit import hookimpl
from clawkit.config import collect_sections, validate_agent
from clawkit.hooks import HookRunner
from clawkit.loop import Agent
from clawkit.plugins import get_plugin_manager
from clawkit.types import LlmResponse, ToolCall, Usage

EXTRA: dict = {}
ANSWER = "Node 20.1 fixes CVE-2026-0001 (high); 20.2 fixes CVE-2026-0002 (low). Sources: the release notes."


class BenchModels:
    """A provider answering by model name: the lead delegates once, then answers; the researcher answers."""

    def __init__(self, config):
        self.name = config.name

    async def complete(self, request, on_text=None):
        usage = Usage(prompt_tokens=50, completion_tokens=10, total_tokens=60)
        if self.name == "researcher":
            return LlmResponse(content=ANSWER, usage=usage, model=self.name)
        last = request.messages[-1]
        if last.role == "user":
            tool = next(t.name for t in request.tools if t.name in ("agent_researcher", "plain_lookup"))
            return LlmResponse(tool_calls=[ToolCall(name=tool, arguments={"task": "Find the Node.js CVEs"})], usage=usage,
                               model=self.name)
        return LlmResponse(content="Two CVEs: CVE-2026-0001 and CVE-2026-0002.", usage=usage, model=self.name)


class BenchPlugin:
    name = "bench-subagents"

    @hookimpl
    def register_providers(self, register):
        register("bench", BenchModels)

    @hookimpl
    def register_tools(self, register, agent):
        def plain_lookup(task: str) -> str:
            """Look something up.

            Args:
                task: what to look up
            """
            return ANSWER

        register(plain_lookup)


def build(workspace: Path):
    pm = get_plugin_manager(extra=(BenchPlugin(),))
    sections = collect_sections(HookRunner(pm))
    researcher = {"name": "researcher", "model": {"name": "researcher", "provider": "bench"}, "tools": [],
                  "instructions": "You research.", **EXTRA}
    common = {"workspace": str(workspace), "state_db": str(workspace / "state.db"), **EXTRA}
    lead = validate_agent({"name": "lead", "model": {"name": "lead", "provider": "bench"}, "tools": ["plain_lookup"],
                           "subagents": {"researcher": {"agent": researcher, "description": "Researches"}}, **common},
                          "<bench>", {}, sections)
    plain = validate_agent({"name": "plain", "model": {"name": "lead", "provider": "bench"}, "tools": ["plain_lookup"],
                            **common}, "<bench>", {}, sections)
    alone = validate_agent({**researcher, **common}, "<bench>", {}, sections)
    store_owner = Agent(lead, pm=pm)
    agents = {
        "delegation": store_owner,
        "plain tool": Agent(plain, pm=pm, store=store_owner.store),
        "child alone": Agent(alone, pm=pm, store=store_owner.store),
    }
    return agents


async def timed(agent: Agent, text: str, n: int, cpu: list[float] | None = None) -> list[float]:
    """Wall seconds per turn; the process's CPU seconds per turn go to ``cpu`` (all threads:
    less sensitive than wall time to other work on a busy machine)."""
    out = []
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        await agent.turn(text)
        out.append(time.perf_counter() - t0)
        if cpu is not None:
            cpu.append(time.process_time() - c0)
    return out


async def main(turns: int, batches: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        agents = build(Path(tmp))
        for a in agents.values():  # warm-up: imports, first-use caches, the child agent itself
            await timed(a, "warm up: find the Node.js CVEs", 5)
        samples: dict[str, list[float]] = {k: [] for k in agents}
        cpu: dict[str, list[float]] = {k: [] for k in agents}
        for _ in range(batches):
            for name, agent in agents.items():
                samples[name] += await timed(agent, "Find the Node.js CVEs", max(1, turns // batches), cpu[name])
        med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
        cpu_med = {k: statistics.median(v) * 1000 for k, v in cpu.items()}
        check = await agents["delegation"].turn("Find the Node.js CVEs")
        assert check.tool_calls and not check.tool_calls[0]["is_error"], check.tool_calls
        added = med["delegation"] - med["plain tool"] - med["child alone"]
        print(f"turns per variant: {len(samples['delegation'])} (every installed plugin, in-process models)")
        for k, v in med.items():
            print(f"  {k:<12} {v:8.3f} ms per turn (median wall)   {cpu_med[k]:8.3f} ms CPU")
        print(f"delegation adds {added:.3f} ms over the parent's own tool round plus the child's turn "
              f"(ratio delegation / (plain tool + child alone) = {med['delegation'] / (med['plain tool'] + med['child alone']):.3f})")
        cpu_added = cpu_med["delegation"] - cpu_med["plain tool"] - cpu_med["child alone"]
        print(f"in CPU time: {cpu_added:.3f} ms added")
        print(f"goal <= 1 ms: {'met' if added <= 1.0 else 'NOT met'} (wall), {'met' if cpu_added <= 1.0 else 'NOT met'} (CPU)")
        for a in agents.values():
            a.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--no-memory", action="store_true", help="memory disabled in every agent (its recall thread is noisy)")
    ap.add_argument("--no-audit", action="store_true", help="the policy's audit ledger off (each flush is an fsync)")
    args = ap.parse_args()
    plugins: dict = {}
    if args.no_memory:
        plugins["memory"] = {"enabled": False}
    if args.no_audit:
        plugins["policy"] = {"audit": False}
    if plugins:
        EXTRA["plugins"] = plugins
    asyncio.run(main(args.turns, args.batches))
