"""Per-call overhead of an MCP tool (stdio transport) against the same function as a native tool, in one run.

Run: .venv/bin/python tests/benchmarks/bench_mcp.py [--calls 300]

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
import os
import statistics
import sys
import tempfile
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

SERVER = Path(__file__).resolve().parents[2] / "plugins" / "builtin" / "mcp" / "tests" / "mcp_test_server.py"


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
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
