"""clawkit-memory's cost per agent turn, measured in one run against the kernel alone.

    .venv/bin/python tests/benchmarks/bench_memory_turn.py [--rounds 5] [--growth] [--no-fresh] [--old-search]

The workload is bench_turn.py's (user -> add(2, 3) -> answer, every turn checked, a new
session per turn, a real SQLite file), driven by its harness. Rows:

* kernel only — the baseline of this run;
* + memory, empty, episodes off — nothing to recall at all (``sessions: false``);
* + memory, empty workspace — no memory file; episodes of earlier sessions accumulate;
* + memory, small MEMORY.md — a 6-line MEMORY.md (two sections) plus the episodes;
* + memory, MEMORY.md, fresh query — the message differs every turn, so the query
  embedding (ONNX MiniLM) is computed every turn instead of coming from the cache.

For the memory rows the recall's own timings (``ctx.state["memory.recall"]``) are
reported next to the wall time: ``waited`` (message arrival -> prompt built), ``embed``
(the query embedding: the model's work), ``search`` (BM25 + KNN + fusion) and
``refresh`` (memory-file freshness). ``--growth`` adds the per-turn cost after 10 … 10,000
sessions in one database (``--growth-sizes``), with the same split, measured with every earlier session indexed
(back-to-back turns outrun the background episode indexing, which waits for the memory
thread to be free; the interleaved rows above include that lag).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_turn as bt  # noqa: E402  (the shared harness: variants, checked batches)
from clawkit import hookimpl  # noqa: E402

MEMORY_MD = """# About the user

The user's name is Ada; she prefers tea over coffee and works from Lisbon.

## Work

The team deploys the billing service every Wednesday afternoon.
"""


class Spy:
    """Collects each turn's recall state as the model call sees it."""

    def __init__(self) -> None:
        self.states: list[dict] = []

    @hookimpl
    def before_llm_call(self, ctx, request):
        st = ctx.state.get("memory.recall")
        if st is not None and st.get("_seen") is None:
            st["_seen"] = True
            self.states.append(st)


class MemoryVariant(bt.ClawkitVariant):
    def __init__(self, name: str, *, memory_md: bool, fresh: bool = False, sessions: bool = True,
                 search: dict | None = None):
        super().__init__(name, plugins=["memory"], persist=True, group="memory")
        self.memory_md, self.fresh, self.sessions, self.n = memory_md, fresh, sessions, 0
        self.search = search or {}  # plugins.memory.search overrides
        self.spy = Spy()
        self.per_turn: list[dict | None] = []  # each turn's recall state (None: no recall started)

    def setup(self) -> None:
        super().setup()
        self.agent.config.plugins.memory.sessions = self.sessions
        for key, value in self.search.items():
            setattr(self.agent.config.plugins.memory.search, key, value)
        if self.memory_md:
            (self.tmp / "workspace" / "MEMORY.md").write_text(MEMORY_MD)
        self.agent.pm.register(self.spy)
        self.agent.hooks._cache.clear()

    def worker_cpu_us(self) -> float | None:
        """CPU the memory thread has used so far (recalls and indexing, wherever they fell), in us."""
        from clawkit_memory.service import memory_for

        thread = memory_for(self.agent.config).executor._thread
        if thread is None or thread.ident is None or not thread.is_alive():
            return None
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident)) * 1e6

    async def turn(self) -> str:
        self.n += 1
        text = f"What is 2 + 3? (question {self.n} about Ada's work)" if self.fresh else bt.PROMPT
        before = len(self.spy.states)
        r = await self.agent.turn(text, session_id=None)
        self.per_turn.append(self.spy.states[-1] if len(self.spy.states) > before else None)
        return r.reply


def recall_split(per_turn: list[dict | None]) -> dict[str, float]:
    """Median microseconds of the recall's parts over the turns that started one."""
    states = [s for s in per_turn if s is not None]
    if not states:
        return {"recalls": 0}
    med = lambda xs: statistics.median(xs) * 1000  # noqa: E731  (ms -> us)
    return {"recalls": len(states), "waited": med([s.get("waited_ms", 0.0) for s in states]),
            "embed": med([s.get("timings", {}).get("embed_ms", 0.0) for s in states]),
            "search": med([s.get("timings", {}).get("search_ms", 0.0) for s in states]),
            "refresh": med([s.get("timings", {}).get("refresh_ms", 0.0) for s in states])}


def fmt_split(sp: dict[str, float], turns: int) -> str:
    if not sp.get("recalls"):
        return f"no recall started in {turns} turns"
    return (f"recall in {sp['recalls']}/{turns} turns: waited {sp['waited']:.0f}, embed {sp['embed']:.0f}, "
            f"search {sp['search']:.0f}, refresh {sp['refresh']:.0f}")


async def growth(memory_md: bool, sizes: list[int]) -> None:
    from clawkit_memory.service import memory_for

    v = MemoryVariant("growth", memory_md=memory_md)
    v.setup()
    print(f"\ngrowth: kernel + memory, {'small MEMORY.md' if memory_md else 'empty workspace'}, new session per turn")
    done = 0
    first = None
    for target in sizes:
        batch = min(50, max(10, target // 2))
        while done < target - batch:
            await v.turn()
            done += 1
        # steady state: every earlier session indexed (back-to-back turns outrun the background
        # indexing, which waits for gaps; a real agent's turns are seconds apart)
        mem = memory_for(v.agent.config)
        mem.sync_sessions(v.agent.store.path)
        if hasattr(mem, "wait_idle"):  # (absent in versions that indexed episodes inside the recall)
            mem.wait_idle()
        chunks = mem.index.conn.execute("SELECT COUNT(*) FROM memory_chunks").fetchone()[0]
        s = await bt.run_batch(v, batch)
        done += batch
        med = statistics.median(s) * 1e6
        first = first or med
        states = [st for st in v.per_turn[-batch:] if st is not None]
        searched = [st["timings"].get("search_ms", 0.0) * 1000 for st in states if not st["timings"].get("cached")]
        print(f"  after {done:5d} sessions ({chunks:5d} chunks): median {med:6.0f} us ({med / first:4.2f}x the first)"
              f"  p90 {bt.pct(s, 0.9) * 1e6:6.0f} us   {fmt_split(recall_split(v.per_turn[-batch:]), batch)}; searched in"
              f" {len(searched)}/{batch} turns" + (f" ({max(searched):.0f} us)" if searched else ""))
    v.close()


async def main_async(args: argparse.Namespace) -> int:
    import logging

    logging.getLogger("clawkit.hooks").addHandler(bt.HOOK_ERRORS)
    kernel = bt.ClawkitVariant("kernel only", plugins="none", persist=True)
    rows: list[bt.Variant] = [kernel, MemoryVariant("+ memory, empty, episodes off", memory_md=False, sessions=False),
                              MemoryVariant("+ memory, empty workspace", memory_md=False),
                              MemoryVariant("+ memory, small MEMORY.md", memory_md=True)]
    if args.fresh:
        rows.append(MemoryVariant("+ memory, MEMORY.md, fresh query", memory_md=True, fresh=True))
    if args.old_search:  # the same, with the search settings before issue 29's fourth pass: before/after, interleaved
        rows.append(MemoryVariant("  same, old search settings", memory_md=True, fresh=True,
                                  search={"candidates": 50, "collapse": False}))
    for v in rows:
        v.setup()
        await v.averify()
    print(f"Python {sys.version.split()[0]} on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    for v in rows:  # warm-up (model load, first index) outside the figures
        await bt.run_batch(v, 20)
    t0 = time.perf_counter()
    samples = await bt.measure(rows, args.rounds, args.batch_seconds)
    took = time.perf_counter() - t0
    bt.check(not bt.HOOK_ERRORS.records, f"plugin hooks failed: {bt.HOOK_ERRORS.records[:3]}")
    med = {k: statistics.median(s) * 1e6 for k, s in samples.items()}
    base = med["kernel only"]
    print(f"\nper turn, new session per turn, persistence on ({args.rounds} interleaved rounds, {took:.0f} s);"
          " recall parts in us (medians)\n")
    print("thread cpu: the memory thread's CPU (recalls, indexing finished turns) per turn over all of the row's"
          " turns, warm-up included, wherever it fell (between batches too)\n")
    print(f"{'variant':36s} {'median us':>10s} {'p90 us':>8s} {'added us':>9s} {'thread cpu':>10s} {'turns':>6s}  recall")
    for v in rows:
        name = v.name
        extra, thread = "", ""
        if isinstance(v, MemoryVariant):
            extra = fmt_split(recall_split(v.per_turn[-len(samples[name]):]), len(samples[name]))
            used = v.worker_cpu_us()
            thread = f"{used / v.n:.0f}" if used is not None else "-"
        print(f"{name:36s} {med[name]:10.0f} {bt.pct(samples[name], 0.9) * 1e6:8.0f} {med[name] - base:9.0f} "
              f"{thread:>10s} {len(samples[name]):6d}  {extra}")
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    for v in rows:
        v.close()
    if args.growth:
        gc.collect()
        for memory_md in (False, True):
            await growth(memory_md, args.growth_sizes)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch-seconds", type=float, default=0.25)
    p.add_argument("--growth", action="store_true", help="per-turn cost as sessions accumulate (--growth-sizes)")
    p.add_argument("--growth-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10, 100, 1000, 10000],
                   metavar="N,N,...", help="stored sessions at which --growth measures (default 10,100,1000,10000)")
    p.add_argument("--no-fresh", dest="fresh", action="store_false", help="skip the fresh-query row")
    p.add_argument("--old-search", action="store_true", help="also the fresh-query row with the search settings "
                   "before issue 29's fourth pass (50 candidates, no section collapse), interleaved with it")
    args = p.parse_args()
    try:
        return asyncio.run(main_async(args))
    except bt.BrokenRun as exc:
        print(f"BROKEN RUN: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
