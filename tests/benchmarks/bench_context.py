"""Prompt assembly with the context budget and 300 tools (goal: ≤ 2 ms per request built).

    .venv/bin/python tests/benchmarks/bench_context.py

Builds the request of one turn the way the kernel does (contributors from every builtin,
assembly fitted to the per-source shares, tool retrieval over 300 tools with BM25) on a
real agent, many times; the baseline in the same run is the same agent with the budgets
and tool retrieval switched off (every source unbounded, all 300 definitions sent).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "plugins/builtin/toolsearch/tests/data"))
sys.path.insert(0, str(ROOT / "plugins/builtin/toolsearch/tests"))

from test_toolsearch import Catalog  # noqa: E402  (the 300 catalog tools as real tools)

from clawkit.config import collect_sections, validate_agent  # noqa: E402
from clawkit.context import TurnContext  # noqa: E402
from clawkit.hooks import HookRunner  # noqa: E402
from clawkit.loop import Agent  # noqa: E402
from clawkit.plugins import get_plugin_manager  # noqa: E402
from clawkit.testing import ScriptedProvider  # noqa: E402

REPEAT = int(os.environ.get("REPEAT", 300))


def agent(workspace: Path, controller: bool) -> Agent:
    pm = get_plugin_manager(extra=(Catalog(),), load_entry_points=True)
    data = {"name": "bench", "model": "scripted/x", "workspace": str(workspace), "tools": ["*"],
            "instructions": "You are careful.", "limits": {"context_window": 32000},
            "plugins": {"toolsearch": {"enabled": controller, "embeddings": None}, "memory": {"enabled": False}}}
    if not controller:
        data["context"] = {"shares": {s: 1.0 for s in ("system", "skills", "project_files", "plan", "memory", "contributors")}}
    cfg = validate_agent(data, "<bench>", {}, collect_sections(HookRunner(pm)))
    return Agent(cfg, pm=pm, provider=ScriptedProvider(), persist=False)


def measure(a: Agent) -> tuple[float, int, int]:
    from clawkit.types import Message

    session = a.session()
    session.history.append(Message(role="user", content="What is the weather forecast for Rome this weekend?"))
    ctx = TurnContext(a.config, session, a.hooks, a.tools, agent_obj=a)

    async def build():
        ctx.invalidate_prompt()
        return await a._build_request(ctx, True)

    async def run():
        for _ in range(20):
            await build()
        samples = []
        for _ in range(REPEAT):
            t = time.perf_counter()
            req = await build()
            samples.append(time.perf_counter() - t)
        return statistics.median(samples) * 1e3, len(req.tools), len(req.system)

    return asyncio.run(run())


def main() -> int:
    print(f"load average: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "README.md").write_text("# Project\n" + "Details. " * 3000)
        base, ctl = agent(ws, False), agent(ws, True)
        b_ms, b_tools, b_chars = measure(base)
        c_ms, c_tools, c_chars = measure(ctl)
        base.close(), ctl.close()
    print(f"without the controller: {b_ms:.3f} ms per request, {b_tools} tool definitions, {b_chars} prompt chars")
    print(f"with the controller:    {c_ms:.3f} ms per request, {c_tools} tool definitions, {c_chars} prompt chars")
    print(f"ratio: {c_ms / b_ms:.2f}x; goal: ≤ 2 ms with the controller and 300 tools -> {'met' if c_ms <= 2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
