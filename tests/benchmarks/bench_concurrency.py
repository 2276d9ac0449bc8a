"""1,000 concurrent sessions in one process: throughput against the ideal, memory per session.

Run:
    .venv/bin/python tests/benchmarks/bench_concurrency.py [--sessions 1000] [--latency 0.1]

One ``Agent`` with every installed builtin plugin (persistence on: a real SQLite file),
driven through the Python API on one asyncio loop: ``--sessions`` sessions start at once,
each one turn of "user → the model asks for one tool call → the tool runs → the model
answers". The model is the test kit's loopback ``ModelServer`` in a separate process (so
its threads do not share this process's CPU or GIL), answering every request after
``--latency`` seconds, over real HTTP through the provider ``provider: auto`` picks
(``clawkit-http`` for this OpenAI-compatible endpoint).

Figures:
* throughput: sessions completed per second of wall time, against the ideal — every session
  needs two model calls, so with unlimited concurrency all of them finish in
  ``2 × latency``: ideal = sessions / (2 × latency). Goal (issue 13): ≥ 80 %.
* memory per open session: peak RSS during the run minus the RSS before it, divided by
  the number of sessions.
* a second pass with ``--sessions 1`` figures (the same turn alone) for the per-turn floor,
  and the CPU seconds the process spent, to show where the rest goes.

The load average is printed with the figures: run when the machine is quiet.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOAL = 0.8

SERVER = textwrap.dedent(
    """
    import sys, time
    from clawkit.testing import server as s
    from clawkit.testing.replies import Fault, Reply

    s._HTTPServer.request_queue_size = 4096  # a thousand connections arrive at once
    latency = float(sys.argv[1])

    def answer(request):
        last = request.messages[-1] if request.messages else {}
        reply = Reply.text("The tool said pong.") if last.get("role") == "tool" else Reply.tool_calls([("ping", {})])
        return Fault.delay(latency, then=reply)

    with s.ModelServer() as server:
        server.script(answer)
        print(server.url, flush=True)
        sys.stdin.read()  # until the benchmark closes our stdin
    """
)


def baseline_path(directory: Path) -> str:
    """``PYTHONPATH`` that puts an earlier commit's sources (``git archive <commit> kernel plugins |
    tar -x -C DIR``) before the venv's editable installs: ``--baseline DIR`` of the benchmarks."""
    srcs = [directory / "kernel" / "src", *sorted(directory.glob("plugins/*/*/src"))]
    if not srcs[0].is_dir():
        raise SystemExit(f"--baseline {directory}: no kernel/src there (extract an earlier commit's kernel and plugins)")
    return os.pathsep.join(str(p) for p in srcs)


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of another process (the model server), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Pinger:
    """The one tool: answers at once, so the turn's time is the model's and the framework's."""

    def __init__(self) -> None:
        from clawkit.hookspecs import hookimpl

        self.calls = 0

        @hookimpl
        def register_tools(register, agent):
            def ping() -> str:
                """Answer pong."""
                self.calls += 1
                return "pong"

            register(ping)

        self.register_tools = register_tools


def make_agent(url: str, workspace: Path, pinger: Pinger, disable: list[str] = ()):
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager

    pm = get_plugin_manager(extra=(pinger,), disabled=disable)  # (the Agent applies no `enabled: false` to a pm it is given)
    data = {"name": "bench", "workspace": str(workspace), "tools": ["ping"], "instructions": "Use the ping tool.",
            "model": {"name": "openai/scripted", "api_base": url, "api_key": "sk-loopback", "timeout": 120,
                      "max_retries": 0}}
    if disable:  # where the time goes: the same run without these plugins
        data["plugins"] = {name: {"enabled": False} for name in disable}
    cfg = validate_agent(data, "<bench>", {}, collect_sections(HookRunner(pm)))
    return Agent(cfg, pm=pm)


async def run_sessions(agent, n: int) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds) of ``n`` concurrent one-turn sessions."""
    peak = rss_mib()
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mib())
            await asyncio.sleep(0.02)

    sampler = asyncio.ensure_future(sample())
    cpu0, t0 = time.process_time(), time.perf_counter()
    results = await asyncio.gather(*(agent.turn(f"ping number {i}") for i in range(n)), return_exceptions=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    done.set()
    await sampler
    failed = [r for r in results if isinstance(r, BaseException)]
    wrong = [r for r in results if not isinstance(r, BaseException) and r.reply != "The tool said pong."]
    if failed or wrong:
        sample_err = failed[0] if failed else wrong[0].reply
        raise SystemExit(f"broken run: {len(failed)} failed, {len(wrong)} wrong answers; e.g. {sample_err!r}")
    return wall, max(peak, rss_mib()), cpu


HISTORY_SETTLE = 3.0  # seconds of quiet after the earlier sessions: memory indexes finished turns in a quiet moment


async def make_history(turn, n: int, settle: float = HISTORY_SETTLE) -> None:
    """``n`` earlier one-turn sessions (50 at a time), then ``settle`` seconds of quiet: a workspace with
    history, as a served agent's is after its first hour — stored sessions, and (full install) memory's
    episodes indexed, so every new message's recall has something to search. ``turn(i)`` runs session
    ``i``; the earlier ones are numbered from 1,000,000, unlike the measured run's."""
    for start in range(1_000_000, 1_000_000 + n, 50):
        await asyncio.gather(*(turn(i) for i in range(start, min(1_000_000 + n, start + 50))))
    if n:
        await asyncio.sleep(settle)


def print_profile(prof, sessions: int, top: int = 30) -> None:
    """The main thread's CPU by function (own and cumulative), per session."""
    import pstats

    st = pstats.Stats(prof)
    rows = [(f"{f.replace(str(REPO) + os.sep, '')}:{line}({fn})", nc / sessions, tt / sessions * 1e3, ct / sessions * 1e3)
            for (f, line, fn), (cc, nc, tt, ct, callers) in st.stats.items()]  # type: ignore[attr-defined]
    print(f"\nmain thread CPU under cProfile, per session (ms): own top {top}")
    for name, calls, tt, ct in sorted(rows, key=lambda r: -r[2])[:top]:
        print(f"  {name[-95:]:95s} {calls:7.1f} {tt:7.3f} {ct:7.3f}")
    print(f"cumulative, top {top}")
    for name, calls, tt, ct in sorted(rows, key=lambda r: -r[3])[:top]:
        print(f"  {name[-95:]:95s} {calls:7.1f} {tt:7.3f} {ct:7.3f}")
    print(f"cumulative, clawkit code only, top {top}")
    mine = [r for r in rows if "kernel/" in r[0] or "plugins/" in r[0]]
    for name, calls, tt, ct in sorted(mine, key=lambda r: -r[3])[:top]:
        print(f"  {name[-95:]:95s} {calls:7.1f} {tt:7.3f} {ct:7.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the main thread's CPU (thread time) during the concurrent run and print the top costs")
    ap.add_argument("--disable", type=lambda s: s.split(","), default=[], metavar="PLUGINS",
                    help="turn these plugins off (to see what they cost), e.g. policy,memory")
    args = ap.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    root = Path(tempfile.mkdtemp(prefix="bench-concurrency-"))
    env = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS", "CLAWKIT_TRACE_PLUGINS")}
    os.environ.pop("CLAWKIT_LOAD_PLUGINS", None)
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.latency)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = server.stdout.readline().strip()
        pinger = Pinger()
        agent = make_agent(url, root, pinger, args.disable)

        async def scenario():
            await run_sessions(agent, 20)  # warm-up: imports, first connections, SQLite pages
            alone = await run_sessions(agent, 1)
            base = rss_mib()
            prof = None
            if args.profile:
                import cProfile

                prof = cProfile.Profile(time.thread_time)
                prof.enable()
            server0 = process_cpu(server.pid)
            many = await run_sessions(agent, args.sessions)
            many = (*many, process_cpu(server.pid) - server0)
            if prof is not None:
                prof.disable()
                print_profile(prof, args.sessions)
            return alone, base, many

        load0 = os.getloadavg()
        alone, base, (wall, peak, cpu, server_cpu) = asyncio.run(scenario())
        load1 = os.getloadavg()
        agent.close()
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
    ideal = args.sessions / (2 * args.latency)
    got = args.sessions / wall
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {os.cpu_count()} CPUs")
    print(f"{args.sessions} concurrent sessions, one tool call each, model latency {args.latency * 1000:.0f} ms "
          f"(two model calls per session), every builtin plugin{' but ' + ','.join(args.disable) if args.disable else ''}, "
          "persistence on")
    print(f"  one session alone        {alone[0] * 1000:8.0f} ms wall, {alone[2] * 1000:6.0f} ms CPU")
    print(f"  all sessions             {wall * 1000:8.0f} ms wall, {cpu * 1000:6.0f} ms CPU "
          f"({cpu / args.sessions * 1000:.2f} ms CPU per session)")
    verdict = "met" if got / ideal >= GOAL else "NOT MET"
    print(f"  throughput               {got:8.0f} sessions/s; ideal {ideal:.0f}/s; "
          f"{got / ideal * 100:.0f} % of ideal (goal ≥ {GOAL * 100:.0f} %: {verdict})")
    print(f"  memory per open session  {(peak - base) * 1024 / args.sessions:8.1f} KiB "
          f"(peak RSS {peak:.0f} MiB, before {base:.0f} MiB)")
    print(f"  CPU-bound ceiling        {args.sessions / cpu:8.0f} sessions/s at this CPU per session "
          f"(one core)")
    print(f"  model server (other process) {server_cpu * 1000:6.0f} ms CPU ({server_cpu / args.sessions * 1000:.2f} ms "
          f"per session); its ceiling {args.sessions / max(server_cpu, 1e-9):.0f} sessions/s (one core: "
          "a thread per connection under one GIL)")
    per = os.cpu_count() / (GOAL * ideal) * 1000
    print(f"  goal's budget            {per:.3f} ms of CPU per session for client and server together "
          f"({os.cpu_count()} cores at {GOAL * ideal:.0f} sessions/s); spent here "
          f"{(cpu + server_cpu) / args.sessions * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
