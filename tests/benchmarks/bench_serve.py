"""What ``clawkit serve`` adds to a turn: ``/v1/chat/completions`` against calling the agent in-process.

Run:
    .venv/bin/python tests/benchmarks/bench_serve.py [--turns 60] [--concurrency 10]

Workload: one user message, one model answer (no tools), a new session per turn, every
installed plugin loaded, the loopback model server over real HTTP (the same for both
paths). Baseline: ``await agent.turn(...)`` in this process. Served: the real app on
uvicorn on 127.0.0.1 (a thread of this process, its own event loop) with a real API key,
called with httpx — sequentially (latency: median and p90, and the median added by the
HTTP layer) and with ``--concurrency`` clients at once (requests per second against the
same concurrency in-process). Both paths are interleaved in rounds so machine load hits
them alike. A wrong answer aborts the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from clawkit.testing.server import ModelServer
from clawkit_serve.testing import make_key, respond, serve, write_agent


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def inproc_seq(agent, n: int, tag: str) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        r = await agent.turn(f"say: {tag}-{i}")
        out.append(time.perf_counter() - t)
        assert r.reply == f"{tag}-{i}", r.reply
    return out


async def inproc_conc(agent, n: int, conc: int) -> float:
    sem = asyncio.Semaphore(conc)

    async def one(i):
        async with sem:
            r = await agent.turn(f"say: c{i}")
            assert r.reply == f"c{i}"

    t = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return n / (time.perf_counter() - t)


def http_seq(url: str, key: str, n: int, tag: str) -> list[float]:
    out = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
        for i in range(n):
            t = time.perf_counter()
            r = c.post("/v1/chat/completions", json={"model": "bench", "messages": [{"role": "user", "content": f"say: {tag}-{i}"}]})
            out.append(time.perf_counter() - t)
            assert r.json()["choices"][0]["message"]["content"] == f"{tag}-{i}", r.text
    return out


async def http_conc(url: str, key: str, n: int, conc: int) -> float:
    sem = asyncio.Semaphore(conc)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120,
                                 limits=httpx.Limits(max_connections=conc)) as c:
        async def one(i):
            async with sem:
                r = await c.post("/v1/chat/completions", json={"model": "bench", "messages": [{"role": "user", "content": f"say: c{i}"}]})
                assert r.json()["choices"][0]["message"]["content"] == f"c{i}", r.text

        t = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return n / (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=60, help="sequential turns per path and round")
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    os.environ.setdefault("CLAWKIT_HOME", str(tmp / "home"))
    from clawkit.runtime import open_agent

    with ModelServer() as model:
        model.script(respond)
        path = write_agent(tmp, model, "bench", tools=[])
        db = tmp / "server.db"
        key = make_key(db, "bench", rate_per_minute=10**9)
        served = serve([path], db, rate_per_minute=0)
        agent = open_agent(path)
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(inproc_seq(agent, 5, "warm"))
            http_seq(served.url, key, 5, "warm")
            base, http, base_rps, http_rps = [], [], [], []
            for r in range(args.rounds):
                base += loop.run_until_complete(inproc_seq(agent, args.turns, f"b{r}"))
                http += http_seq(served.url, key, args.turns, f"h{r}")
                base_rps.append(loop.run_until_complete(inproc_conc(agent, args.turns, args.concurrency)))
                http_rps.append(asyncio.run(http_conc(served.url, key, args.turns, args.concurrency)))
        finally:
            loop.run_until_complete(agent.drain())
            loop.close()
            agent.close()
            served.stop()
    b50, h50 = statistics.median(base), statistics.median(http)
    report = {
        "load_average": os.getloadavg()[0], "turns": len(base), "concurrency": args.concurrency,
        "in_process_ms": {"p50": round(b50 * 1e3, 2), "p90": round(pct(base, 0.9) * 1e3, 2)},
        "http_ms": {"p50": round(h50 * 1e3, 2), "p90": round(pct(http, 0.9) * 1e3, 2)},
        "added_latency_ms_p50": round((h50 - b50) * 1e3, 2), "latency_ratio": round(h50 / b50, 3),
        "in_process_turns_per_s": round(statistics.median(base_rps), 1),
        "http_requests_per_s": round(statistics.median(http_rps), 1),
        "throughput_ratio": round(statistics.median(http_rps) / statistics.median(base_rps), 3),
    }
    print(f"load average {report['load_average']:.2f}; {report['turns']} sequential turns per path, "
          f"concurrency {args.concurrency}")
    print(f"{'':28}{'p50 ms':>10}{'p90 ms':>10}{'turns/s':>10}")
    print(f"{'in-process agent.turn':28}{report['in_process_ms']['p50']:>10}{report['in_process_ms']['p90']:>10}"
          f"{report['in_process_turns_per_s']:>10}")
    print(f"{'POST /v1/chat/completions':28}{report['http_ms']['p50']:>10}{report['http_ms']['p90']:>10}"
          f"{report['http_requests_per_s']:>10}")
    print(f"added latency (p50): {report['added_latency_ms_p50']} ms (x{report['latency_ratio']}); "
          f"throughput ratio http/in-process: {report['throughput_ratio']}")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
