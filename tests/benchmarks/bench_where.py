"""Where the time of a concurrent run goes: the full install against the kernel alone (issue 29, goal 5).

    .venv/bin/python tests/benchmarks/bench_where.py [--sessions 500] [--runs 3] [--hooks] [--without policy,memory]
        [--baseline DIR]   # one more variant: the full install from an earlier commit's sources
        [--history N]      # a workspace with history: N earlier sessions (memory indexes them) first

The scenario of ``bench_peers_concurrency.py``'s ``clawkit`` and ``kernel`` children (bench_concurrency's
loopback server in a process of its own answering after 100 ms, ``Pinger``, ``make_agent``, persistence
on, ``CLAWKIT_GC_FREEZE=1``): ten warm-up sessions, then ``--sessions`` concurrent one-tool-call
sessions, each variant in a fresh child process, ``--runs`` interleaved runs (full, kernel, full, …).
Medians per variant, per session:

* wall, the process's CPU and the main thread's (the event loop's) CPU;
* the main thread's scheduler figures (``/proc/thread-self/schedstat``): on a CPU, runnable but waiting
  for one (the other processes on the machine, and the wake-ups after a GIL hand-off), asleep (waiting
  for the model, a lock, the GIL). When asleep is near zero the run is CPU-bound: its throughput is
  set by the CPU per session, not by the model server or the transport;
* the model server's CPU (its own process);
* the cyclic collector's time by generation (``gc.callbacks``) and how many objects it found dead;
* with ``--hooks`` (adds some overhead of its own): thread time inside each plugin hook implementation,
  inside the kernel's event emission by event type (persisting, redacting, broadcasting to ``on_event``)
  and inside the store's redaction of stored text.

``--history N`` runs N earlier sessions in each child before the warm-up and waits for memory to index
them (``bench_concurrency.make_history``): the measured messages' recall then has episodes to search.

``--without a,b`` adds a variant per named plugin: the full install with that one plugin turned off
(what it costs in all: its hooks, the events and records it adds, their redaction, the collector's share).

Figures for docs/benchmarks.md ("Full install against the kernel alone, fourth pass").
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _schedstat() -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable and waiting) of the calling thread."""
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
        on, wait = f.read().split()[:2]
    return int(on) / 1e9, int(wait) / 1e9


def _proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _time_hooks(acc: collections.Counter) -> None:
    """Wrap every hook implementation the kernel calls (HookRunner.impls) with a thread-time counter."""
    from clawkit import hooks

    original = hooks.HookRunner.impls

    def impls(self, name):
        out = original(self, name)
        if getattr(self, "_where_" + name, None) is out:
            return out
        wrapped = []
        for plugin, fn, argnames in out:
            key = f"hook {plugin}.{name}"

            def timed(*a, _fn=fn, _key=key, **k):
                t = time.thread_time()
                try:
                    return _fn(*a, **k)
                finally:
                    acc[_key] += time.thread_time() - t

            wrapped.append((plugin, functools.wraps(fn)(timed), argnames))
        out[:] = wrapped
        setattr(self, "_where_" + name, out)
        return out

    hooks.HookRunner.impls = impls


def _time_events(acc: collections.Counter) -> None:
    from clawkit import context, sessions

    emit = context.emit_event

    def timed_emit(hooks_, session, event):
        t = time.thread_time()
        try:
            return emit(hooks_, session, event)
        finally:
            acc[f"event {event.type}"] += time.thread_time() - t

    for mod in list(sys.modules.values()):  # every module that imported the function by name
        if getattr(mod, "__name__", "").startswith("clawkit") and getattr(mod, "emit_event", None) is emit:
            mod.emit_event = timed_emit
    redact = sessions.SessionStore._redact_json

    def timed_redact(self, text):
        t = time.thread_time()
        try:
            return redact(self, text)
        finally:
            acc["store redaction (_redact_json)"] += time.thread_time() - t

    sessions.SessionStore._redact_json = timed_redact


def child(variant: str, url: str, sessions: int, hooks: bool, history: int = 0) -> None:
    sys.path.insert(0, str(HERE))
    from bench_concurrency import Pinger, make_agent, make_history

    acc: collections.Counter = collections.Counter()
    if hooks:
        _time_hooks(acc)
    off = [variant.split(" ", 1)[1]] if variant.startswith("without ") else []
    with tempfile.TemporaryDirectory(prefix="bench-where-") as tmp:
        agent = make_agent(url, Path(tmp), Pinger(), off)

        async def scenario() -> dict:
            await make_history(lambda i: agent.turn(f"ping number {i}"), history)
            await asyncio.gather(*(agent.turn(f"ping number {i}") for i in range(10)))  # warm-up
            if hooks:
                _time_events(acc)
            acc.clear()
            gcs = {"t": 0.0, "start": 0.0, "time": [0.0, 0.0, 0.0], "count": [0, 0, 0], "dead": 0}

            def on_gc(phase, info):
                if phase == "start":
                    gcs["start"] = time.thread_time()
                    return
                g = info["generation"]
                gcs["time"][g] += time.thread_time() - gcs["start"]
                gcs["count"][g] += 1
                gcs["dead"] += info["collected"]

            gc.callbacks.append(on_gc)
            server_pid = int(os.environ["BENCH_WHERE_SERVER"])
            s0, (on0, wait0) = _proc_cpu(server_pid), _schedstat()
            cpu0, main0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
            out = await asyncio.gather(*(agent.turn(f"ping number {i}") for i in range(sessions)))
            wall, cpu, main = time.perf_counter() - t0, time.process_time() - cpu0, time.thread_time() - main0
            on1, wait1 = _schedstat()
            server = _proc_cpu(server_pid) - s0
            gc.callbacks.remove(on_gc)
            bad = sum(1 for o in out if o.reply != "The tool said pong.")
            if bad:
                raise SystemExit(f"{variant}: {bad} wrong answers")
            ms = 1000 / sessions
            res = {"turns/s": sessions / wall, "wall ms": wall * ms, "CPU ms (process)": cpu * ms,
                   "CPU ms (main thread)": main * ms, "main: on a CPU ms": (on1 - on0) * ms,
                   "main: runnable, waiting ms": (wait1 - wait0) * ms,
                   "main: asleep ms": (wall - (on1 - on0) - (wait1 - wait0)) * ms,
                   "model server CPU ms": server * ms}
            for g in range(3):
                res[f"gc: generation {g} ms"] = gcs["time"][g] * ms
                res[f"gc: generation {g} collections (run)"] = gcs["count"][g]
            res["gc: objects found dead (run)"] = gcs["dead"]
            res.update({k: v * ms for k, v in acc.items()})
            return res

        res = asyncio.run(scenario())
    print(json.dumps(res), flush=True)
    os._exit(0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hooks", action="store_true", help="also time every hook implementation, event and redaction")
    ap.add_argument("--without", type=lambda v: [p for p in v.split(",") if p], default=[], metavar="PLUGINS",
                    help="one more variant per plugin: the full install with it turned off")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="one more variant, 'baseline': the full install from an earlier commit's sources "
                         "(`git archive <commit> kernel plugins | tar -x -C DIR`), interleaved with the others")
    ap.add_argument("--history", type=int, default=0, metavar="N",
                    help="a workspace with history: N earlier sessions first, memory's episodes indexed")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.url, args.sessions, args.hooks, args.history)
        return 0
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    sys.path.insert(0, str(HERE))
    from bench_concurrency import SERVER

    env = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS", "CLAWKIT_TRACE_PLUGINS")}
    server = subprocess.Popen([sys.executable, "-c", SERVER, "0.1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env)
    results: dict[str, list[dict]] = {"full": [], "kernel": [], **{f"without {p}": [] for p in args.without}}
    baseline_path = ""
    if args.baseline is not None:  # its sources first on the path: the venv's packages, the older code
        from bench_concurrency import baseline_path as sources_first

        baseline_path = sources_first(args.baseline)
        results = {"baseline": [], **results}
    load0 = os.getloadavg()
    try:
        url = server.stdout.readline().strip()
        for _ in range(args.runs):
            for variant in results:
                cenv = {**env, "CLAWKIT_GC_FREEZE": "1", "BENCH_WHERE_SERVER": str(server.pid)}
                if variant == "kernel":
                    cenv["CLAWKIT_LOAD_PLUGINS"] = "clawkit-http"
                if variant == "baseline":
                    cenv["PYTHONPATH"] = os.pathsep.join(filter(None, [baseline_path, env.get("PYTHONPATH")]))
                cmd = [sys.executable, __file__, "--child", "full" if variant == "baseline" else variant, "--url", url,
                       "--sessions", str(args.sessions), "--history", str(args.history)]
                p = subprocess.run(cmd + (["--hooks"] if args.hooks else []), capture_output=True, text=True, env=cenv,
                                   timeout=600)
                lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
                if p.returncode or not lines:
                    raise SystemExit(f"{variant}: broken run (exit {p.returncode})\n{p.stderr[-3000:]}")
                results[variant].append(json.loads(lines[-1]))
                print(f"  {variant}: {results[variant][-1]['turns/s']:.0f} turns/s", file=sys.stderr, flush=True)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    load1 = os.getloadavg()
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}; {os.cpu_count()} CPUs; {args.sessions} concurrent "
          f"sessions, medians of {args.runs} interleaved runs, per session (hooks, events: thread time)")
    keys = list(dict.fromkeys(k for rs in results.values() for r in rs for k in r))
    hooks_rows = [k for k in keys if k.startswith("hook ")]
    med = {v: {k: statistics.median(r.get(k, 0.0) for r in rs) for k in keys} for v, rs in results.items()}
    print(f"  {'':58s}" + "".join(f" {v.replace('without ', '-')[:9]:>9s}" for v in med))
    for k in [k for k in keys if k not in hooks_rows]:
        print(f"  {k[:58]:58s}" + "".join(f" {med[v][k]:9.3f}" for v in med))
    if hooks_rows:
        others = [v for v in med if v not in ("full", "kernel")]  # baseline, without …: their figures beside
        columns = ["full", *others]
        print(f"  plugin hooks ({len(hooks_rows)} implementations called){'':20s}"
              + "".join(f" {v.replace('without ', '-')[:9]:>9s}" for v in columns))
        print(f"    {'all':56s}" + "".join(f" {sum(med[v][k] for k in hooks_rows):9.3f}" for v in columns))
        for k in sorted(hooks_rows, key=lambda k: -med["full"][k])[:30]:
            print(f"    {k[5:][:56]:56s}" + "".join(f" {med[v][k]:9.3f}" for v in columns))
    f, k_ = med["full"], med["kernel"]
    print(f"full / kernel: throughput {f['turns/s'] / k_['turns/s']:.2f}x, main-thread CPU per session "
          f"{f['CPU ms (main thread)'] / k_['CPU ms (main thread)']:.2f}x")
    if "baseline" in med:
        b = med["baseline"]
        print(f"baseline / kernel: main-thread CPU per session {b['CPU ms (main thread)'] / k_['CPU ms (main thread)']:.2f}x; "
              f"full - baseline: {f['CPU ms (main thread)'] - b['CPU ms (main thread)']:+.3f} ms main-thread CPU per session, "
              f"throughput {f['turns/s'] / b['turns/s']:.2f}x")
    for v in [v for v in med if v.startswith("without ")]:
        w = med[v]
        print(f"{v}: main-thread CPU per session {f['CPU ms (main thread)'] - w['CPU ms (main thread)']:+.3f} ms less than "
              f"the full install; / kernel: throughput {w['turns/s'] / k_['turns/s']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
