"""Queued turns on DBOS workers: throughput with 1, 2 and 4 workers, and the per-turn overhead
of the engine against the in-process SQLite path.

Run:
    .venv/bin/python tests/benchmarks/bench_scale.py [--turns 200] [--latency 0.1] [--workers 1,2,4] [--concurrency 8]

A real PostgreSQL (clawkit.testing.postgres: Debian's binaries, a temporary data directory) holds
the queue, the workflows' checkpoints and the sessions. Every turn is "user → the model asks for
``list_dir`` → the tool runs → the model answers": two model calls to the test kit's loopback
``ModelServer`` (its own process), answering after ``--latency`` seconds, and three checkpointed
steps (begin, model, tool, model). All builtin plugins are loaded in every worker.

Figures:
* scaling: ``--turns`` turns (each its own session) submitted at once to N ``clawkit worker``
  processes (``--concurrency`` turns at a time each); turns per second from the first submit to
  the last result, the ratio to one worker, and the ideal (N × concurrency / (2 × latency)).
  Where the ratio stops growing is where the machine's cores, not the queue, are the limit.
* overhead: the same turn, one after another on one session, with a model answering at once —
  in-process ``Agent.turn`` on SQLite against submit + wait through the queue and one worker
  (polling every 10 ms): the difference is what the engine adds per turn (enqueue, dequeue,
  checkpoints, the result's round trip).

The load average is printed with the figures: run when the machine is quiet.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SERVER = textwrap.dedent(
    """
    import sys
    from clawkit.testing import server as s
    from clawkit.testing.replies import Fault, Reply

    s._HTTPServer.request_queue_size = 4096
    latency = float(sys.argv[1])

    def answer(request):
        last = request.messages[-1] if request.messages else {}
        reply = Reply.text("Listed.") if last.get("role") == "tool" else Reply.tool_calls([("list_dir", {"path": "."})])
        return Fault.delay(latency, then=reply) if latency else reply

    with s.ModelServer() as server:
        server.script(answer)
        server.responder = answer
        print(server.url, flush=True)
        sys.stdin.read()
    """
)


def model_server(latency: float) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-c", SERVER, str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return p, p.stdout.readline().strip()


def agent_file(folder: Path, url: str) -> Path:
    (folder / "ws").mkdir(parents=True, exist_ok=True)
    path = folder / "lister.yaml"
    path.write_text(f"name: lister\nmodel: {{name: openai/bench, api_base: \"{url}\", api_key: x, max_retries: 0, timeout: 60}}\n"
                    f"workspace: {folder / 'ws'}\nstate_db: {folder / 'state.db'}\ninstructions: List the folder.\n"
                    f"tools: [list_dir]\nplugins:\n  memory: {{enabled: false}}\n", encoding="utf-8")
    return path


def scaling(pg, yaml: Path, n_workers: int, turns: int, concurrency: int) -> float:
    from clawkit.runtime import open_turn_queue
    from clawkit_workers.testing import Workers

    url = pg.create_database()
    workers = Workers(url, [yaml])
    try:
        workers.start(n_workers, "--concurrency", str(concurrency), "--poll", "0.02")
        with open_turn_queue(url) as q:
            started = time.perf_counter()
            ids = [q.submit("lister", "list it") for _ in range(turns)]
            for t in ids:
                q.result(t, timeout=600, poll=0.02)
            return turns / (time.perf_counter() - started)
    finally:
        workers.stop_all()


def overhead(pg, folder: Path, url: str, turns: int) -> tuple[float, float]:
    from clawkit.runtime import open_agent, open_turn_queue
    from clawkit_workers.testing import Workers

    yaml = agent_file(folder, url)
    agent = open_agent(yaml)

    async def inproc() -> float:
        sid = None
        r = await agent.turn("list it")  # warm: imports, first connection
        sid = r.session_id
        started = time.perf_counter()
        for _ in range(turns):
            await agent.turn("list it", session_id=sid)
        return (time.perf_counter() - started) / turns

    try:
        local = asyncio.run(inproc())
    finally:
        agent.close()
    db = pg.create_database()
    workers = Workers(db, [yaml])
    try:
        workers.start(1, "--poll", "0.01")
        with open_turn_queue(db) as q:
            q.result(q.submit("lister", "list it", session_id="ses_bench"), timeout=120, poll=0.005)
            started = time.perf_counter()
            for _ in range(turns):
                q.result(q.submit("lister", "list it", session_id="ses_bench"), timeout=120, poll=0.005)
            queued = (time.perf_counter() - started) / turns
    finally:
        workers.stop_all()
    return local, queued


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--overhead-turns", type=int, default=30)
    args = ap.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from clawkit.testing.postgres import PostgresServer

    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (2-core machines: run when quiet)")
    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as pg:
        slow, slow_url = model_server(args.latency)
        fast, fast_url = model_server(0.0)
        try:
            yaml = agent_file(Path(tmp) / "scale", slow_url)
            base = None
            print(f"\nscaling: {args.turns} turns, 2 model calls of {args.latency * 1000:.0f} ms each, "
                  f"--concurrency {args.concurrency} per worker")
            print(f"{'workers':>8} {'turns/s':>9} {'× 1 worker':>11} {'ideal':>8} {'of ideal':>9}")
            for n in [int(x) for x in args.workers.split(",")]:
                rate = scaling(pg, yaml, n, args.turns, args.concurrency)
                base = base or rate
                ideal = n * args.concurrency / (2 * args.latency)
                print(f"{n:>8} {rate:>9.1f} {rate / base:>10.2f}× {ideal:>8.0f} {rate / ideal:>8.0%}", flush=True)
            local, queued = overhead(pg, Path(tmp) / "overhead", fast_url, args.overhead_turns)
            print(f"\noverhead: one session, {args.overhead_turns} turns one after another, model answering at once")
            print(f"  in-process Agent.turn on SQLite : {local * 1000:7.1f} ms/turn")
            print(f"  queued (submit → worker → result): {queued * 1000:7.1f} ms/turn")
            print(f"  the engine adds                 : {(queued - local) * 1000:7.1f} ms/turn ({queued / local:.1f}×)")
        finally:
            for p in (slow, fast):
                p.stdin.close()
                p.wait(10)


if __name__ == "__main__":
    main()
