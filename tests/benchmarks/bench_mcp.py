"""MCP: server start-up (concurrent vs each alone) and per-call overhead against a native tool, in one run.

Run: .venv/bin/python tests/benchmarks/bench_mcp.py [--only startup|calls] [--calls 300] [--runs 5]

**Start-up** (issue 25 goal 6) uses the four reference servers from npm (tests/npm: filesystem,
everything over stdio, everything over streamable HTTP — its process started here first — and
memory; ``--npm DIR`` points at another ``node_modules``). Each server's own start is the bare SDK
client's spawn/connect + initialize + tools/list, alone (median of ``--runs``). Then, with all
four in one agent: ``clawkit mcp list`` and a one-turn ``clawkit run`` (loopback scripted model,
every builtin plugin), whole processes, against the same command with each server alone: the
ratio four / slowest alone is the goal (≤ 1.10). Also shown: the same commands with no server, and
the start interval clawkit itself records (first launch -> last ready: ``started``/``ready`` in
``mcp list --json``, ``mcp.server_started`` events of a run), four vs each alone. The agents raise
toolsearch's ``max_tools``: the four servers offer ~50 tools, over its default 40, and ranking them
with local embeddings (seconds, once per process) is tool selection, not server start-up.

**Per call**:
The function is ``add(a, b)``, once registered natively and once served by the in-repo MCP test
server (plugins/builtin/mcp/tests/mcp_test_server.py, the official SDK) and reached through
clawkit-mcp. Three rows, each the median of batches through the kernel's tool executor
(``Agent.executor.one``: gate hooks, execution, ``after_tool_call``) with no other plugin loaded:

* native — the in-process function;
* mcp — the same call through clawkit-mcp (hub thread hop + JSON-RPC over the server's stdio);
* sdk — the bare SDK client calling the server from its own loop (what MCP itself costs),
  so ``mcp - sdk`` is what clawkit's plumbing adds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from clawkit import hookimpl
from clawkit.config import collect_sections, validate_agent
from clawkit.context import TurnContext
from clawkit.hooks import HookRunner
from clawkit.loop import Agent
from clawkit.plugins import get_plugin_manager
from clawkit.testing import ScriptedProvider
from clawkit.types import ToolCall

import clawkit_mcp

REPO = Path(__file__).resolve().parents[2]
SERVER = REPO / "plugins" / "builtin" / "mcp" / "tests" / "mcp_test_server.py"
GOAL = 1.10


class NativeAdd:
    @hookimpl
    def register_tools(self, register, agent):
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        register(add)


def build(workspace: Path) -> tuple[Agent, TurnContext]:
    pm = get_plugin_manager(extra=(NativeAdd(), clawkit_mcp), load_entry_points=False)
    data = {"name": "bench", "model": "scripted/bench", "workspace": str(workspace), "tools": ["add", "mcp__demo__add"],
            "mcp": {"servers": {"demo": {"command": sys.executable, "args": [str(SERVER)], "risk": "safe"}}}}
    cfg = validate_agent(data, "<bench>", {}, collect_sections(HookRunner(pm)))
    agent = Agent(cfg, pm=pm, provider=ScriptedProvider([]), persist=False)
    ctx = TurnContext(cfg, agent.session(), agent.hooks, agent.tools, agent_obj=agent)
    return agent, ctx


async def per_call(agent: Agent, ctx: TurnContext, name: str, n: int) -> float:
    call = ToolCall(id="c1", name=name, arguments={"a": 2, "b": 3})
    res = await agent.executor.one(ctx, call, None, False)
    assert res.content.strip() == "5" and not res.is_error, res.content
    start = time.perf_counter()
    for _ in range(n):
        await agent.executor.one(ctx, call, None, False)
    return (time.perf_counter() - start) / n * 1e6


async def sdk_per_call(n: int, batches: int) -> list[float]:
    from mcp import Client, StdioServerParameters

    out = []
    async with Client(StdioServerParameters(command=sys.executable, args=[str(SERVER)]), mode="legacy", cache=None) as c:
        await c.call_tool("add", {"a": 2, "b": 3})
        for _ in range(batches):
            start = time.perf_counter()
            for _ in range(n):
                await c.call_tool("add", {"a": 2, "b": 3})
            out.append((time.perf_counter() - start) / n * 1e6)
    return out


# --- start-up ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server-everything (streamableHttp) exited: {proc.stderr.read()[-500:]!r}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server-everything (streamableHttp) did not listen on {port}")


def reference_servers(bin_dir: Path, tmp: Path, http_url: str, pin: list[str] | None = None) -> dict[str, dict]:
    """The four reference servers as ``mcp.servers`` entries (the HTTP one is already running).
    ``pin``: a ``taskset`` prefix each stdio server is launched through (``--pin``)."""
    (tmp / "files").mkdir(exist_ok=True)

    def stdio(cmd: str, *args: str) -> dict:
        return {"command": pin[0], "args": [*pin[1:], cmd, *args]} if pin else {"command": cmd, "args": list(args)}

    return {
        "fs": stdio(str(bin_dir / "mcp-server-filesystem"), str(tmp / "files")),
        "everything": stdio(str(bin_dir / "mcp-server-everything"), "stdio"),
        "everything_http": {"url": http_url},
        "memory": {**stdio(str(bin_dir / "mcp-server-memory")), "env": {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")}},
    }


def pin_prefixes() -> tuple[list[str], list[str]]:
    """``--pin``: clawkit on the first CPU it may use, the servers on the others (an experiment: it shows
    how much of the four-server start is the servers' boots sharing the CPUs with clawkit's own work)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least two CPUs")
    rest = ",".join(map(str, cpus[1:]))
    return ["taskset", "-c", str(cpus[0])], ["taskset", "-c", rest]


async def sdk_start(spec: dict) -> float:
    """Spawn/connect + initialize + tools/list with the bare SDK client, alone."""
    from mcp import Client, StdioServerParameters

    start = time.perf_counter()
    if "url" in spec:
        target: object = spec["url"]
    else:
        target = StdioServerParameters(command=spec["command"], args=spec.get("args", []),
                                       env={**os.environ, **spec.get("env", {})})
    async with Client(target, mode="legacy", cache=None) as client:
        await client.list_tools()
        took = time.perf_counter() - start
    return took


def _write_agent(path: Path, model_url: str, servers: dict) -> None:
    body = textwrap.dedent(f"""\
        name: bench
        model: {{name: openai/test, api_base: "{model_url}", api_key: sk-test, max_retries: 0, timeout: 20}}
        tools: ["mcp__*"]
        plugins:
          toolsearch: {{max_tools: 500}}  # ~50 tools would engage retrieval (local embeddings): not start-up
        """)
    body += "mcp:\n  servers: " + (json.dumps(servers) if servers else "{}") + "\n"
    path.write_text(body)


_CLI_PREFIX: list[str] = []


def _cli(ws: Path, env: dict, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run([*_CLI_PREFIX, sys.executable, "-m", "clawkit", *args], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start, proc


def _phase(ws: Path, session: str | None, rows: list[dict] | None = None) -> float | None:
    """Seconds from the first server's launch to the last one ready, as clawkit recorded them
    (``mcp list --json`` rows, or a run's ``mcp.server_started`` events)."""
    if rows is None:
        conn = sqlite3.connect(ws / ".clawkit" / "state.db")
        try:
            rows = [json.loads(d) for (d,) in conn.execute(
                "SELECT data FROM events WHERE session_id = ? AND type = 'mcp.server_started'", (session,))]
        finally:
            conn.close()
    rows = [r for r in rows if r.get("started") and r.get("ready")]
    return max(r["ready"] for r in rows) - min(r["started"] for r in rows) if rows else None


def _measure(tmp: Path, env: dict, agent: str, tag: str, out: dict[str, list[float]]) -> None:
    """One ``mcp list --json`` and one ``run`` of ``agent``: walls and recorded start phases."""
    took, proc = _cli(tmp, env, "mcp", "list", f"{agent}.yaml", "--json")
    if proc.returncode != 0 and agent != "none":
        raise SystemExit(f"mcp list {agent} failed ({proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
    out.setdefault(f"list {agent}", []).append(took)
    if agent != "none":
        phase = _phase(tmp, None, json.loads(proc.stdout))
        if phase is not None:
            out.setdefault(f"list phase {agent}", []).append(phase)
    session = f"{agent}-{tag}"
    took, proc = _cli(tmp, env, "run", f"{agent}.yaml", "hi", "--new-session", session)
    if proc.returncode != 0:
        raise SystemExit(f"run {agent} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out.setdefault(f"run {agent}", []).append(took)
    phase = _phase(tmp, session)
    if phase is not None:
        out.setdefault(f"run phase {agent}", []).append(phase)


def bench_startup(args: argparse.Namespace) -> None:
    from clawkit.testing.server import ModelServer

    bin_dir = Path(args.npm) / ".bin"
    missing = [n for n in ("mcp-server-filesystem", "mcp-server-everything", "mcp-server-memory") if not (bin_dir / n).exists()]
    if missing:
        print(f"start-up: skipped, {', '.join(missing)} not in {bin_dir} (cd tests/npm && npm ci)")
        return
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the user's install: every builtin plugin
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as an installed package's is
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    port = _free_port()
    http = subprocess.Popen([str(bin_dir / "mcp-server-everything"), "streamableHttp"], env={**env, "PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    walls: dict[str, list[float]] = {}
    try:
        _wait_port(port, http)
        with tempfile.TemporaryDirectory() as tmp_name, ModelServer() as model:
            model.script(lambda request: "ok")
            tmp = Path(tmp_name)
            env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
            servers = reference_servers(bin_dir, tmp, f"http://127.0.0.1:{port}/mcp")
            if args.pin:
                _CLI_PREFIX[:], server_prefix = pin_prefixes()
                pinned = reference_servers(bin_dir, tmp, f"http://127.0.0.1:{port}/mcp", server_prefix)
            alone: dict[str, list[float]] = {name: [] for name in servers}
            with open(os.devnull, "w") as quiet:
                saved, sys.stderr = sys.stderr, quiet  # the servers' banners
                try:
                    for _ in range(args.runs):
                        for name, spec in servers.items():
                            alone[name].append(asyncio.run(sdk_start(spec)))
                finally:
                    sys.stderr = saved
            if args.pin:
                servers = pinned
            _write_agent(tmp / "four.yaml", model.url, servers)
            _write_agent(tmp / "none.yaml", model.url, {})
            for name, spec in servers.items():
                _write_agent(tmp / f"{name}.yaml", model.url, {name: spec})
            _measure(tmp, env, "four", "prime", {})  # bytecode and the servers' own caches
            for i in range(args.runs):  # interleaved, so load drifts hit each alike
                for agent in ("four", "none", *servers):
                    _measure(tmp, env, agent, str(i), walls)
    finally:
        http.terminate()
        http.wait(10)
    med = {k: statistics.median(v) for k, v in walls.items()}
    sdk = {n: statistics.median(v) for n, v in alone.items()}
    print(f"load average: {os.getloadavg()[0]:.2f}; {args.runs} runs of each (medians)"
          + ("; --pin: clawkit on one CPU, the servers on the others" if args.pin else ""))
    print("each server alone: bare SDK (spawn/connect + initialize + tools/list) | clawkit mcp list | clawkit run (wall)")
    for name in servers:
        print(f"  {name:16} {sdk[name] * 1e3:8.1f} ms | {med[f'list {name}'] * 1e3:8.1f} ms | {med[f'run {name}'] * 1e3:8.1f} ms")
    print(f"  {'(no server)':16} {'':11} | {med['list none'] * 1e3:8.1f} ms | {med['run none'] * 1e3:8.1f} ms")
    for cmd in ("list", "run"):
        slowest = max(servers, key=lambda n: med[f"{cmd} {n}"])
        four, one = med[f"{cmd} four"], med[f"{cmd} {slowest}"]
        print(f"clawkit {cmd:4} with all four: {four * 1e3:8.1f} ms = {four / one:.2f}x the slowest alone ({slowest}, "
              f"{one * 1e3:.1f} ms; goal <= {GOAL:.2f}x); {(four - med[f'{cmd} none']) * 1e3:.0f} ms more than no server")
        phases = {n: med.get(f"{cmd} phase {n}") for n in ("four", *servers)}
        if phases["four"] is not None:
            alone_max = max(v for n, v in phases.items() if n != "four" and v is not None)
            print(f"  recorded start phase (first launch -> last ready): four {phases['four'] * 1e3:.1f} ms, "
                  f"slowest alone {alone_max * 1e3:.1f} ms ({phases['four'] / alone_max:.2f}x; "
                  f"sum alone {sum(v for n, v in phases.items() if n != 'four' and v) * 1e3:.1f} ms)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5, help="start-up: runs of each measurement")
    parser.add_argument("--only", choices=("startup", "calls"))
    parser.add_argument("--pin", action="store_true",
                        help="start-up: clawkit on one CPU, the servers on the others (taskset), to separate CPU sharing from waiting")
    parser.add_argument("--npm", default=str(REPO / "tests" / "npm" / "node_modules"), help="node_modules with the reference servers")
    args = parser.parse_args()
    if args.only != "calls":
        bench_startup(args)
    if args.only == "startup":
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        agent, ctx = build(Path(tmp))
        try:
            async def start() -> None:
                from clawkit_mcp.plugin import message_received

                await message_received(ctx)  # starts the server and registers mcp__demo__add

            t0 = time.perf_counter()
            asyncio.run(start())
            startup = time.perf_counter() - t0
            native, mcp = [], []
            for _ in range(args.batches):  # interleaved, so load drifts hit both alike
                native.append(asyncio.run(per_call(agent, ctx, "add", args.calls * 10)))
                mcp.append(asyncio.run(per_call(agent, ctx, "mcp__demo__add", args.calls)))
        finally:
            agent.close()
    sdk = asyncio.run(sdk_per_call(args.calls, args.batches))
    n, m, s = (statistics.median(x) for x in (native, mcp, sdk))
    print(f"load average: {os.getloadavg()[0]:.2f}; {args.calls} MCP calls x {args.batches} batches (median)")
    print(f"server start + tools/list (first turn): {startup * 1e3:8.1f} ms")
    print(f"native tool call:                       {n:8.1f} us")
    print(f"MCP tool call via clawkit-mcp (stdio):  {m:8.1f} us   ({m / n:.0f}x native, +{m - n:.0f} us per call)")
    print(f"bare SDK client call (same server):     {s:8.1f} us   (clawkit plumbing adds {m - s:+.0f} us, {m / s:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
