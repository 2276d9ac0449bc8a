"""Turn latency at the compaction threshold: waiting summary (``background: false``, the behaviour
before issue 29) against the background summary (the default), in one run.

One session of 40 turns (window 3,000 tokens, each turn ~110 tokens) with compaction and a
summarizer model that answers after ``--summary-ms`` (a cheap remote model: 200-2,000 ms); the
agent's own model answers at once (scripted), so a turn's wall time is the framework plus
whatever it waits for. Printed per mode: the median turn, the turns that crossed the threshold
(their median and worst), and how they were compacted.

    .venv/bin/python tests/benchmarks/bench_compaction.py [--summary-ms 500] [--model-ms 100] [--turns 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "kernel" / "src"))

import clawkit_compaction  # noqa: E402
from clawkit import hookimpl  # noqa: E402
from clawkit.testing import ScriptedProvider  # noqa: E402


class SlowSummarizer:
    def __init__(self, seconds: float):
        self.seconds = seconds

    async def complete(self, request, on_text=None):
        from clawkit.testing import ScriptedProvider

        await asyncio.sleep(self.seconds)
        return await ScriptedProvider(["Summary: numbered questions about /srv/app modules, answered."]).complete(request)


class Delayed:
    """The agent's own model: answers after ``seconds`` (a real model's latency)."""

    def __init__(self, inner, seconds: float):
        self.inner, self.seconds = inner, seconds

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def complete(self, request, on_text=None):
        await asyncio.sleep(self.seconds)
        return await self.inner.complete(request, on_text)


def make_agent(workspace: Path, background: bool, summary_s: float, model_s: float):
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager

    slow = SlowSummarizer(summary_s)

    class Cheap:
        @hookimpl
        def register_providers(self, register):
            register("slow", lambda model_config: slow)

    def answer(req):
        return f"Answer to ({req.messages[-1].content[:40]}): " + "lorem ipsum dolor sit amet " * 12

    data = {"name": "bench", "model": "scripted/test", "workspace": str(workspace), "limits": {"context_window": 3000},
            "plugins": {"compaction": {"background": background, "model": {"name": "slow/mini", "provider": "slow"}}}}
    pm = get_plugin_manager(extra=(clawkit_compaction, Cheap()), load_entry_points=False)
    cfg = validate_agent(data, "<bench>", {}, collect_sections(HookRunner(pm)))
    return Agent(cfg, pm=pm, provider=Delayed(ScriptedProvider([answer], repeat_last=True), model_s))


async def session(agent, turns: int) -> tuple[list[float], list[str]]:
    """One long-lived event loop (as ``clawkit chat`` and ``serve`` have): turn wall times, and
    the compaction method of each turn ('' when none)."""
    times, methods, sid = [], [], None
    for i in range(turns):
        seen = len(agent.store.events(sid, "compaction.after")) if sid else 0
        t0 = time.perf_counter()
        result = await agent.turn(f"Question {i}: please look at /srv/app/module_{i}.py and explain it. " * 2, session_id=sid)
        times.append(time.perf_counter() - t0)
        sid = result.session_id
        after = agent.store.events(sid, "compaction.after")[seen:]
        methods.append(",".join(e["data"]["method"] for e in after))
    return times, methods


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summary-ms", type=float, default=500)
    ap.add_argument("--model-ms", type=float, default=100, help="the agent's own model's latency")
    ap.add_argument("--turns", type=int, default=40)
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f}; summarizer answers after {args.summary_ms:.0f} ms, the agent's model after "
          f"{args.model_ms:.0f} ms; {args.turns} turns, window 3,000")
    for background in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            agent = make_agent(Path(tmp), background, args.summary_ms / 1000, args.model_ms / 1000)
            times, methods = asyncio.run(session(agent, args.turns))
            agent.store.close()
        crossing = [t for t, m in zip(times, methods) if m]
        label = "background (default)" if background else "waiting (background: false, before)"
        print(f"  {label:36s} median turn {statistics.median(times) * 1000:7.1f} ms; threshold turns: "
              f"{len(crossing)}, median {statistics.median(crossing) * 1000 if crossing else 0:7.1f} ms, "
              f"worst {max(crossing) * 1000 if crossing else 0:7.1f} ms; methods: "
              f"{', '.join(sorted(set(m for m in methods if m)))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
