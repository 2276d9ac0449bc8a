"""The session store's writes and reads of one turn, on SQLite and on PostgreSQL, in one run.

Run:
    .venv/bin/python tests/benchmarks/bench_storage.py [--turns 300] [--rounds 3]

One "turn" is what the kernel's store does for a turn with one tool call: lock the session,
append the user message, queue a run, an llm step, usage and two events, append the
assistant's tool call and the tool's result, queue the tool step, append the answer, end
the run, flush, unlock; then the next turn reads the history back. Backends, measured
interleaved round by round (the same code, the same rows):

* ``sqlite``: a WAL file, the default (``synchronous=NORMAL``);
* ``sqlite-memory``: ``persist=False``;
* ``postgresql``: a throwaway local server (``clawkit.testing.postgres``: Debian's
  binaries, loopback TCP; this server runs with ``synchronous_commit=off`` and ``fsync=off``,
  so the figure is the protocol's and the driver's cost, not a disk's).

Prints the median per-turn wall and CPU time and each backend's ratio to ``sqlite``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from clawkit.sessions import SessionStore
from clawkit.testing.postgres import PostgresServer
from clawkit.types import Message, ToolCall, ToolResult, Usage


def turn(store: SessionStore, sid: str, i: int) -> None:
    assert store.try_lock(sid)
    run = f"run_{i}"
    store.append(sid, Message(role="user", content=f"What is 2 + {i}?"), run)
    store.run_start({"id": run, "trace_id": f"tr_{i}", "session_id": sid, "agent": "bench", "data": {"tools": ["add"]}})
    store.step(run, "s1", "llm", "model", time.time(), time.time(), "ok")
    store.record_usage(sid, run, "model", Usage(prompt_tokens=50, completion_tokens=10, total_tokens=60))
    store.event(sid, run, "turn.start", {"n": i}, time.time())
    call = ToolCall(id=f"c{i}", name="add", arguments={"a": 2, "b": i})
    store.append(sid, Message(role="assistant", content="", tool_calls=[call]), run)
    store.append(sid, Message(role="tool", content=str(2 + i), tool_result=ToolResult(call_id=call.id, name="add", content=str(2 + i))), run)
    store.step(run, "s2", "tool", "add", time.time(), time.time(), "ok")
    store.event(sid, run, "turn.end", {"n": i}, time.time())
    store.append(sid, Message(role="assistant", content=f"The sum is {2 + i}."), run)
    store.run_end(run, "done", {"rounds": 2})
    store.flush()
    store.unlock(sid)
    assert store.messages(sid)[-1].content == f"The sum is {2 + i}."


def measure(store: SessionStore, turns: int, offset: int) -> tuple[float, float]:
    """(wall µs, CPU µs) per turn; a new session every 20 turns (history stays short)."""
    sid = None
    w0, c0 = time.perf_counter(), time.process_time()
    for i in range(offset, offset + turns):
        if sid is None or i % 20 == 0:
            sid = store.create("bench")
        turn(store, sid, i)
    return (time.perf_counter() - w0) / turns * 1e6, (time.process_time() - c0) / turns * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=300, help="turns per backend per round (default 300)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; {args.turns} turns x {args.rounds} rounds per backend", flush=True)
    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as server:
        stores = {"sqlite": SessionStore(Path(tmp) / "state.db"), "sqlite-memory": SessionStore(":memory:", persist=False),
                  "postgresql": SessionStore(server.url)}
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in stores}
        for name, store in stores.items():  # warm-up: statement caches, prepared statements
            measure(store, 30, 0)
        for r in range(args.rounds):
            for name, store in stores.items():
                results[name].append(measure(store, args.turns, 1000 * (r + 1)))
        for store in stores.values():
            store.close()
    base_wall = statistics.median(w for w, _ in results["sqlite"])
    base_cpu = statistics.median(c for _, c in results["sqlite"])
    print(f"{'backend':<15} {'wall us/turn':>13} {'cpu us/turn':>12} {'wall vs sqlite':>15} {'cpu vs sqlite':>14}")
    for name, rows in results.items():
        wall, cpu = statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows)
        print(f"{name:<15} {wall:>13.0f} {cpu:>12.0f} {wall / base_wall:>14.2f}x {cpu / base_cpu:>13.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
