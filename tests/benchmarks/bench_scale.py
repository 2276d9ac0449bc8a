"""Queued turns on DBOS workers: throughput with 1, 2 and 4 workers, and the per-turn overhead
of the engine against the in-process SQLite path.

Run:
    .venv/bin/python tests/benchmarks/bench_scale.py [--turns 200] [--latency 0.1] [--workers 1,2,4] [--concurrency 8]
        [--only scaling,overhead,stream] [--stream-turns 10]

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

* stream: ``clawkit serve`` answering ``stream: true`` through the official ``openai`` client,
  in-process and with ``--db`` (one worker): the first delta of each reply carries the time the
  model server produced it, so the figure is the delay from the model's first token to the
  client's first chunk (through the worker, the chunk table, NOTIFY and serve).

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


STREAMER = textwrap.dedent(
    """
    import sys, time
    from clawkit.testing import server as s
    from clawkit.testing.replies import Reply

    def answer(request):  # the first delta is the time the model produced it
        return Reply.text(f"{time.time():.6f} " + "word " * 20, chunk_delay=0.01)

    with s.ModelServer() as server:
        server.script(answer)
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


def _serve(yaml: Path, *db: str) -> tuple[subprocess.Popen, str]:
    import re
    import threading

    p = subprocess.Popen([sys.executable, "-m", "clawkit", "serve", str(yaml), *db, "--dev", "--port", "0"],
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"clawkit serve: (http://\S+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, m.group(1)
    raise SystemExit("serve did not start")


def first_chunks(base: str, turns: int) -> list[float]:
    """Seconds from the model producing each reply's first delta to the client reading it."""
    import httpx
    import openai

    strip = httpx.Client(event_hooks={"request": [lambda r: r.headers.pop("Authorization", None)]}, timeout=60)
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", http_client=strip)
    out = []
    for i in range(turns + 1):  # the first warms up
        first = None
        with client.chat.completions.create(model="lister", messages=[{"role": "user", "content": "hi"}], stream=True) as stream:
            for chunk in stream:  # read to the end: the next turn of the session starts after this one
                text = chunk.choices[0].delta.content if chunk.choices else None
                if first is None and text and text.strip():
                    first = time.time() - float(text)
        if i and first is not None:
            out.append(first)
    return out


def streaming(pg, folder: Path, turns: int) -> None:
    from clawkit_workers.testing import Workers

    p = subprocess.Popen([sys.executable, "-c", STREAMER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yaml = agent_file(folder, p.stdout.readline().strip())
    print(f"\nstream: first chunk after the model produced it, {turns} streamed turns (openai client, serve --dev)")
    try:
        for label, db in (("in-process", ()), ("queued (1 worker)", ("--db", pg.create_database()))):
            workers = Workers(db[1], [yaml]) if db else None
            served = None
            try:
                if workers:
                    workers.start(1, "--poll", "0.02")
                served, base = _serve(yaml, *db)
                lat = sorted(first_chunks(base, turns))
                if not lat:
                    print(f"  {label:<18}: no text chunk in any of the {turns} streams", flush=True)
                    continue
                print(f"  {label:<18}: median {lat[len(lat) // 2] * 1000:6.1f} ms, max {lat[-1] * 1000:6.1f} ms"
                      f" ({len(lat)} of {turns} streams had text)", flush=True)
            finally:
                if served is not None:
                    served.terminate()
                    served.wait(30)
                if workers:
                    workers.stop_all()
    finally:
        p.stdin.close()
        p.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--overhead-turns", type=int, default=30)
    ap.add_argument("--stream-turns", type=int, default=10)
    ap.add_argument("--only", default="scaling,overhead,stream", help="the sections to run (comma-separated)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from clawkit.testing.postgres import PostgresServer

    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (2-core machines: run when quiet)")
    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as pg:
        slow, slow_url = model_server(args.latency)
        fast, fast_url = model_server(0.0)
        try:
            yaml = agent_file(Path(tmp) / "scale", slow_url)
            base = None
            if "stream" in only:
                streaming(pg, Path(tmp) / "stream", args.stream_turns)
            if "scaling" in only:
                print(f"\nscaling: {args.turns} turns, 2 model calls of {args.latency * 1000:.0f} ms each, "
                      f"--concurrency {args.concurrency} per worker")
                print(f"{'workers':>8} {'turns/s':>9} {'× 1 worker':>11} {'ideal':>8} {'of ideal':>9}")
                for n in [int(x) for x in args.workers.split(",")]:
                    rate = scaling(pg, yaml, n, args.turns, args.concurrency)
                    base = base or rate
                    ideal = n * args.concurrency / (2 * args.latency)
                    print(f"{n:>8} {rate:>9.1f} {rate / base:>10.2f}× {ideal:>8.0f} {rate / ideal:>8.0%}", flush=True)
            if "overhead" in only:
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
