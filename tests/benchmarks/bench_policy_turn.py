"""The policy plugin's own CPU per agent turn: its hooks, the stored-text redaction it installs on
the session store, and its audit writer's thread — in `kernel + policy` or in the full install.

Run:
    .venv/bin/python tests/benchmarks/bench_policy_turn.py                 # kernel + policy
    .venv/bin/python tests/benchmarks/bench_policy_turn.py --plugins all   # every builtin
    .venv/bin/python tests/benchmarks/bench_policy_turn.py --chat          # one session turn after turn
Against an earlier version of the plugin (its package first on the path):
    git archive f1cae13 plugins/builtin/policy/src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/plugins/builtin/policy/src .venv/bin/python tests/benchmarks/bench_policy_turn.py

The turn is bench_turn.py's (one tool call, persistence on, a new session per turn). Each policy
function is wrapped to add up the CPU time of the thread it runs on (``time.thread_time``), so the
figure holds on a busy machine where the difference of two turn medians does not; the wrappers add
~1 us per call. Redaction the kernel asks for (``store.redact``) runs outside the hooks; redaction
inside ``after_tool_call`` is counted in both columns.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_turn as bt  # noqa: E402

HOOKS = ("message_received", "before_tool_call", "after_tool_call", "on_event")
CPU: "collections.defaultdict[str, list[float]]" = collections.defaultdict(lambda: [0.0, 0])


def wrap(owner, name: str, label: str | None = None) -> None:
    orig = getattr(owner, name)

    @functools.wraps(orig)  # keeps pluggy's hookimpl marker
    def timed(*args, **kwargs):
        t0 = time.thread_time()
        try:
            return orig(*args, **kwargs)
        finally:
            acc = CPU[label or name]
            acc[0] += time.thread_time() - t0
            acc[1] += 1

    setattr(owner, name, timed)


WAITS: list[float] = []  # seconds each gate call waited for its session's earlier records to be durable


def time_waits(writer) -> None:
    """Time the futures ``before_tool_call`` awaits (writer.durable): a wait for an fsync."""
    orig = writer.LedgerWriter.durable

    def durable(self, session_id):
        fut = orig(self, session_id)
        if fut is not None:
            t0 = time.perf_counter()
            fut.add_done_callback(lambda _: WAITS.append(time.perf_counter() - t0))
        return fut

    writer.LedgerWriter.durable = durable


async def run(plugins: str, turns: int, chat: bool = False) -> None:
    import clawkit_policy
    from clawkit_policy import writer

    clawkit_policy._load()
    for name in (*HOOKS, "redact_text"):
        wrap(clawkit_policy, name)
    wrap(writer.LedgerWriter, "_sync", "writer thread")
    time_waits(writer)
    logging.getLogger("clawkit.hooks").addHandler(bt.HOOK_ERRORS)
    logging.getLogger("clawkit.classifier").setLevel(logging.ERROR)
    v = bt.ClawkitVariant("bench", plugins="all" if plugins == "all" else plugins.split(","), persist=True, chat=chat)
    v.setup()
    await v.averify()
    for _ in range(30):
        await v.turn()
    CPU.clear()
    WAITS.clear()
    t0 = time.perf_counter()
    for _ in range(turns):
        await v.turn()
    wall = time.perf_counter() - t0
    bt.check(not bt.HOOK_ERRORS.records, f"plugin hooks failed: {bt.HOOK_ERRORS.records[:3]}")
    v.close()
    print(f"policy package: {Path(clawkit_policy.__file__).parent}")
    print(f"kernel + {plugins}, {turns} turns; policy CPU per turn (us), by function:")
    for name, (cpu, calls) in CPU.items():
        print(f"  {name:20s} {calls / turns:5.2f} calls {cpu / turns * 1e6:8.1f} us")
    hooks = sum(CPU[h][0] for h in HOOKS) / turns * 1e6
    red = CPU["redact_text"][0] / turns * 1e6
    thread = CPU["writer thread"][0] / turns * 1e6
    print(f"total: hooks {hooks:.0f} + redaction {red:.0f} (part of it inside the hooks) + writer thread {thread:.0f}")
    print(f"turn wall {wall / turns * 1e6:.0f} us; gate waits for durable records: {len(WAITS)} in {turns} turns, "
          f"{sum(WAITS) / turns * 1e6:.0f} us per turn")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--plugins", default="policy", help="'policy' (default), 'all', or a comma list that includes policy")
    p.add_argument("--turns", type=int, default=400)
    p.add_argument("--chat", action="store_true", help="the same session turn after turn (chats of 50 turns), as "
                   "bench_turn's 'clawkit chat' row: each turn's tool call waits for the last turn's audit fsync")
    args = p.parse_args()
    try:
        asyncio.run(run(args.plugins, args.turns, args.chat))
    except bt.BrokenRun as exc:
        print(f"BROKEN RUN: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
