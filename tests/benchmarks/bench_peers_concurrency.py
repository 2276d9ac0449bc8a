"""Concurrency against the peers (issue 29, goals 5): N concurrent one-turn sessions, each
"user → the model asks for one tool call → the tool runs → the model answers", per framework.

    .venv/bin/python tests/benchmarks/bench_peers_concurrency.py [--sessions 500] [--rounds 3]
        [--peer-python /tmp/light_peers/bin/python] [--only clawkit,kernel,llm] [--baseline DIR]
        [--history N]   # a workspace with history: N earlier sessions first (clawkit's memory indexes them)

The model is the loopback ``ModelServer`` of ``bench_concurrency.py`` in a process of its own,
answering every request after ``--latency`` (0.1 s) over the OpenAI Chat Completions wire format.
Each framework runs in a **child process of its own** (its imports, its peak RSS), all of them
pointed at the same server, ``--rounds`` interleaved rounds (clawkit, kernel, peer…, clawkit, …):

* ``clawkit`` — every installed builtin plugin, persistence on (a real SQLite file);
* ``kernel`` — the kernel with the native provider alone (``CLAWKIT_LOAD_PLUGINS=clawkit-http``);
* the peers, each through **its own OpenAI-compatible model class** with the connection limits
  raised (an ``openai.AsyncOpenAI`` on an ``httpx`` pool of 2,000 connections where the class takes
  a client): pydantic-ai (``OpenAIChatModel``/``OpenAIModel`` + ``OpenAIProvider``), the OpenAI
  Agents SDK (``OpenAIChatCompletionsModel``, tracing off), LangGraph (``create_react_agent`` over
  langchain-openai's ``ChatOpenAI``), smolagents (``ToolCallingAgent`` over ``OpenAIServerModel``,
  run in threads: it is synchronous) and simonw/llm (its async OpenAI chat model, ``chain`` with
  tools, nothing logged).

The peers are optional: ``tests/benchmarks/requirements-peers.txt``, installed into a venv of their
own (not a uv dependency group: in the one universal lock they moved the default install's litellm
and openai pins); a peer that is not importable by ``--peer-python`` is skipped and the output says so. Figures per framework (medians over the rounds): turns/s, CPU ms per
session (the child's user+system CPU during the run / N), KiB per open session ((peak RSS during
the run − RSS before it) / N), and the child's peak RSS (ru_maxrss: imports included). Ratios:
clawkit / kernel throughput (goal ≥ 0.8), clawkit's peak RSS against every peer's (goal: not above).

``--baseline DIR`` adds the full install as an earlier commit had it (``git archive <commit> kernel
plugins | tar -x -C DIR``: its sources go first on the child's ``PYTHONPATH``, the venv's packages stay),
as one more interleaved row, ``clawkit@baseline``: a change's before/after in one run, on one load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ANSWER = "The tool said pong."
PEERS = ["pydantic-ai", "openai-agents", "langgraph", "smolagents", "llm"]
IMPORTS = {"pydantic-ai": "pydantic_ai", "openai-agents": "agents", "langgraph": "langgraph.prebuilt,langchain_openai",
           "smolagents": "smolagents", "llm": "llm"}


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def ping() -> str:
    """Answer pong."""
    return "pong"


def _http_client():
    import httpx

    limits = httpx.Limits(max_connections=2000, max_keepalive_connections=2000)
    return httpx.AsyncClient(limits=limits, timeout=120)


def _openai(url: str):
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=url, api_key="sk-loopback", http_client=_http_client(), max_retries=0)


# --- one builder per framework: returns ``async turn(i) -> reply text`` ---------------------------


def build_clawkit(url: str, workspace: Path):
    sys.path.insert(0, str(HERE))
    from bench_concurrency import Pinger, make_agent

    agent = make_agent(url, workspace, Pinger())

    async def turn(i: int) -> str:
        return (await agent.turn(f"ping number {i}")).reply

    return turn


def build_pydantic_ai(url: str, workspace: Path):
    from pydantic_ai import Agent
    from pydantic_ai.providers.openai import OpenAIProvider

    try:
        from pydantic_ai.models.openai import OpenAIChatModel as Model
    except ImportError:  # older pydantic-ai
        from pydantic_ai.models.openai import OpenAIModel as Model
    model = Model("scripted", provider=OpenAIProvider(openai_client=_openai(url)))
    agent = Agent(model, instructions="Use the ping tool.", tools=[ping])

    async def turn(i: int) -> str:
        return (await agent.run(f"ping number {i}")).output

    return turn


def build_openai_agents(url: str, workspace: Path):
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)
    agent = Agent(name="bench", instructions="Use the ping tool.", tools=[function_tool(ping)],
                  model=OpenAIChatCompletionsModel(model="scripted", openai_client=_openai(url)))

    async def turn(i: int) -> str:
        return (await Runner.run(agent, f"ping number {i}")).final_output

    return turn


def build_langgraph(url: str, workspace: Path):
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    llm_ = ChatOpenAI(model="scripted", base_url=url, api_key="sk-loopback", max_retries=0,
                      http_async_client=_http_client())
    graph = create_react_agent(llm_, [tool(ping)], prompt="Use the ping tool.")

    async def turn(i: int) -> str:
        out = await graph.ainvoke({"messages": [("user", f"ping number {i}")]})
        return out["messages"][-1].content

    return turn


def build_smolagents(url: str, workspace: Path):
    import concurrent.futures

    from smolagents import OpenAIServerModel, ToolCallingAgent, tool
    from smolagents.monitoring import LogLevel

    model = OpenAIServerModel(model_id="scripted", api_base=url, api_key="sk-loopback")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=512)
    ping_tool = tool(ping)

    def run(i: int) -> str:  # an agent per session: its memory is per run
        agent = ToolCallingAgent(tools=[ping_tool], model=model, max_steps=3, verbosity_level=LogLevel.OFF)
        return str(agent.run(f"ping number {i}"))

    async def turn(i: int) -> str:
        return await asyncio.get_running_loop().run_in_executor(pool, run, i)

    return turn


def build_llm(url: str, workspace: Path):
    from llm.default_plugins.openai_models import AsyncChat

    model = AsyncChat("scripted", model_name="scripted", api_base=url, key="sk-loopback", supports_tools=True)
    model.needs_key = None

    async def turn(i: int) -> str:
        chain = model.chain(f"ping number {i}", tools=[ping], system="Use the ping tool.", key="sk-loopback")
        return await chain.text()

    return turn


BUILDERS = {"clawkit": build_clawkit, "kernel": build_clawkit, "pydantic-ai": build_pydantic_ai,
            "openai-agents": build_openai_agents, "langgraph": build_langgraph, "smolagents": build_smolagents,
            "llm": build_llm}


def child(name: str, url: str, sessions: int, history: int = 0) -> None:
    """Run in the child process: the earlier sessions (``--history``), a warm-up, then ``sessions``
    concurrent turns; JSON on stdout."""
    sys.path.insert(0, str(HERE))
    from bench_concurrency import make_history  # (standard library only: importable by the peers' interpreter)

    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        turn = BUILDERS[name](url, Path(tmp))

        async def scenario():
            await make_history(turn, history)
            for r in await asyncio.gather(*(turn(i) for i in range(10))):  # warm-up: imports, connections
                if ANSWER not in str(r):
                    raise SystemExit(f"{name}: wrong answer {r!r}")
            base = rss_mib()
            peak = base
            done = asyncio.Event()

            async def sample():
                nonlocal peak
                while not done.is_set():
                    peak = max(peak, rss_mib())
                    await asyncio.sleep(0.02)

            sampler = asyncio.ensure_future(sample())
            cpu0, t0 = time.process_time(), time.perf_counter()
            out = await asyncio.gather(*(turn(i) for i in range(sessions)), return_exceptions=True)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            done.set()
            await sampler
            bad = [o for o in out if isinstance(o, BaseException) or ANSWER not in str(o)]
            return {"wall": wall, "cpu": cpu, "base": base, "peak": max(peak, rss_mib()), "bad": len(bad),
                    "example": repr(bad[0])[:300] if bad else ""}

        res = asyncio.run(scenario())
    res["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(res), flush=True)
    os._exit(0)  # skip slow interpreter teardown of thousands of objects and pools


def available(python: str, name: str) -> bool:
    code = "; ".join(f"import {m}" for m in IMPORTS[name].split(","))
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--peer-python", default=os.environ.get("BENCH_PEER_PYTHON", sys.executable),
                    help="the interpreter whose environment holds the peers (default: this one)")
    ap.add_argument("--only", type=lambda s: s.split(","), default=None, help="a subset: clawkit,kernel,llm,…")
    ap.add_argument("--timeout", type=float, default=900, help="seconds a framework's child may take (default 900)")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="also run the full install from the sources of an earlier commit, interleaved with the rest "
                         "(`git archive <commit> kernel plugins | tar -x -C DIR`): row 'clawkit@baseline', a before/after "
                         "in one run")
    ap.add_argument("--history", type=int, default=0, metavar="N",
                    help="a workspace with history: every framework first serves N earlier sessions (clawkit's "
                         "memory indexes them), then the measured run")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.url, args.sessions, args.history)
        return 0
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    sys.path.insert(0, str(HERE))
    from bench_concurrency import SERVER

    # smolagents ends a run with its final_answer tool: a request that offers it gets the answer that way
    server_code = SERVER.replace(
        '    reply = Reply.text("The tool said pong.") if last.get("role") == "tool" else Reply.tool_calls([("ping", {})])',
        '    final = any((t.get("function") or t).get("name") == "final_answer" for t in request.tools)\n'
        '    if last.get("role") == "tool" or (final and "pong" in str(last.get("content"))):\n'
        '        reply = (Reply.tool_calls([("final_answer", {"answer": "The tool said pong."})]) if final\n'
        '                 else Reply.text("The tool said pong."))\n'
        '    else:\n'
        '        reply = Reply.tool_calls([("ping", {})])')
    assert server_code != SERVER, "bench_concurrency's server changed: update the smolagents answer"
    names = [n for n in ["clawkit", "kernel", *PEERS] if not args.only or n in args.only]
    baseline_path = ""
    if args.baseline is not None:  # its sources first on the path: the venv's packages, the older code
        from bench_concurrency import baseline_path as sources_first

        baseline_path = sources_first(args.baseline)
        names.insert(names.index("clawkit") if "clawkit" in names else 0, "clawkit@baseline")
    skipped = {}
    for n in PEERS:
        if n in names and not available(args.peer_python, n):
            skipped[n] = f"not importable by {args.peer_python} (pip install {n}; see tests/benchmarks/README.md)"
            names.remove(n)
    env = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS", "CLAWKIT_TRACE_PLUGINS")}
    server = subprocess.Popen([sys.executable, "-c", server_code, str(args.latency)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    results: dict[str, list[dict]] = {n: [] for n in names}
    timed_out: set[str] = set()
    load0 = os.getloadavg()
    try:
        url = server.stdout.readline().strip()
        for _ in range(args.rounds):
            for n in names:
                ours = n in ("clawkit", "kernel", "clawkit@baseline")
                python = sys.executable if ours else args.peer_python
                cenv = {**env, "CLAWKIT_LOAD_PLUGINS": "clawkit-http"} if n == "kernel" else env
                if n == "clawkit@baseline":
                    cenv = {**cenv, "PYTHONPATH": os.pathsep.join(filter(None, [baseline_path, env.get("PYTHONPATH")]))}
                if ours:  # the children serve, as `clawkit serve` would: its heap freeze on
                    cenv = {"CLAWKIT_GC_FREEZE": "1", **cenv}  # (docs/gc-freeze.md; the API alone leaves it off)
                t0 = time.perf_counter()
                try:
                    which = "clawkit" if n == "clawkit@baseline" else n
                    p = subprocess.run([python, __file__, "--child", which, "--url", url, "--sessions", str(args.sessions),
                                        "--history", str(args.history)],
                                       capture_output=True, text=True, env=cenv, timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    print(f"  {n}: no result within {args.timeout:.0f} s (--timeout); left out of this round",
                          file=sys.stderr, flush=True)
                    timed_out.add(n)
                    continue
                lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
                if p.returncode or not lines:
                    raise SystemExit(f"{n}: broken run (exit {p.returncode})\n{p.stderr[-3000:]}")
                r = json.loads(lines[-1])
                print(f"  {n}: {args.sessions / r['wall']:.0f} turns/s, peak {r['peak']:.0f} MiB "
                      f"(child process {time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
                if r["bad"]:
                    raise SystemExit(f"{n}: {r['bad']} of {args.sessions} sessions failed or answered wrongly, "
                                     f"e.g. {r['example']}")
                results[n].append(r)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    load1 = os.getloadavg()
    med = {n: {"tps": statistics.median(args.sessions / r["wall"] for r in rs),
               "cpu_ms": statistics.median(r["cpu"] / args.sessions * 1000 for r in rs),
               "kib": statistics.median((r["peak"] - r["base"]) * 1024 / args.sessions for r in rs),
               "peak": statistics.median(max(r["maxrss"], r["peak"]) for r in rs),
               "tps_all": [args.sessions / r["wall"] for r in rs]} for n, rs in results.items() if rs}
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}; {os.cpu_count()} CPUs")
    print(f"{args.sessions} concurrent sessions, one tool call each, model latency {args.latency * 1000:.0f} ms "
          f"(own process); medians of {args.rounds} interleaved rounds, each framework in a process of its own")
    print(f"  {'framework':16s} {'turns/s':>8s} {'(rounds)':>20s} {'CPU ms/session':>15s} {'KiB/session':>12s} {'peak RSS':>9s}")
    for n, m in med.items():
        rounds = "/".join(f"{t:.0f}" for t in m["tps_all"])
        print(f"  {n:16s} {m['tps']:8.0f} {rounds:>20s} {m['cpu_ms']:15.2f} {m['kib']:12.1f} {m['peak']:7.0f} MiB")
    for n, why in skipped.items():
        print(f"  {n:14s} skipped: {why}")
    for n in sorted(timed_out):
        print(f"  {n:14s} timed out in {sum(1 for _ in range(args.rounds)) - len(results.get(n, []))} of {args.rounds} rounds")
    if "clawkit" in med and "kernel" in med:
        ratio = med["clawkit"]["tps"] / med["kernel"]["tps"]
        print(f"full install / kernel alone, throughput: {ratio:.2f}x (goal >= 0.8: {'met' if ratio >= 0.8 else 'NOT MET'})")
        if "clawkit@baseline" in med:
            b = med["clawkit@baseline"]
            print(f"  baseline ({args.baseline}) / kernel alone: {b['tps'] / med['kernel']['tps']:.2f}x; now / baseline: "
                  f"throughput {med['clawkit']['tps'] / b['tps']:.2f}x, CPU per session {med['clawkit']['cpu_ms'] / b['cpu_ms']:.2f}x")
    peers = [n for n in med if n in PEERS]
    if "clawkit" in med and peers:
        over = [n for n in peers if med["clawkit"]["peak"] > med[n]["peak"]]
        print(f"clawkit peak RSS {med['clawkit']['peak']:.0f} MiB vs peers "
              + ", ".join(f"{n} {med[n]['peak']:.0f}" for n in peers)
              + f" (goal: not above any: {'met' if not over else 'NOT MET, above ' + ', '.join(over)})")
        lead = [n for n in peers if med["clawkit"]["tps"] <= med[n]["tps"]]
        print(f"throughput lead over every peer: {'kept' if not lead else 'LOST to ' + ', '.join(lead)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
