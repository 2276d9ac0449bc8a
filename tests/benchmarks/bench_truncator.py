"""Truncation time for 1 MB, 10 MB and 100 MB tool results, as a ratio to the 1 MB case.

Goal (issue 3): <= 1.5x at 100 MB. Measures the truncator's ``after_tool_call``
path (plan + marker + keeping the full output in the session database) with a
real SQLite file, real tiktoken, a 128k window (budget 38,400 tokens). The
full-output write runs on a background thread; its time is reported separately.

Run: .venv/bin/python tests/benchmarks/bench_truncator.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import clawkit_truncator
import clawkit_truncator.plugin
from clawkit import ToolCall, ToolResult
from clawkit.config import AgentConfig
from clawkit.context import TurnContext
from clawkit.hooks import HookRunner
from clawkit.plugins import get_plugin_manager
from clawkit.sessions import Session, SessionStore
from clawkit.tools import ToolRegistry
from clawkit_truncator import store as output_store
from clawkit_truncator.cut import plan_cut
from clawkit.tokens import get_counter

MB = 1_000_000
LINE = "2026-01-01T00:00:00Z INFO worker=7 request served path=/api/items/42 status=200 duration_ms=12\n"
TRACE = "Traceback (most recent call last):\n  File \"job.py\", line 9, in <module>\nRuntimeError: boom\n"


def make_text(size: int, trace: bool) -> str:
    body = LINE * (size // len(LINE) + 1)
    return body[: size - len(TRACE)] + TRACE if trace else body[:size]


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    store = SessionStore(tmp / "state.db")
    agent = AgentConfig(name="bench", model="openai/gpt-4o-mini", workspace=tmp, tools=["read_tool_output"])
    sid = store.create("bench")
    session = Session(store, sid, agent)
    pm = get_plugin_manager(extra=(clawkit_truncator,), load_entry_points=False)
    registry = ToolRegistry(agent.tools)
    registry.register(clawkit_truncator.read_tool_output, name="read_tool_output")
    ctx = TurnContext(agent, session, HookRunner(pm), registry)
    counter = get_counter(agent.model.name)
    plan_cut(make_text(MB, False), 38_400, counter)  # warm the encoder

    print(f"{'case':<22}{'hook best ms':>16}{'ratio':>8}{'plan best ms':>14}{'ratio':>8}{'+store ms':>13}")
    base_hook = base_plan = None
    for trace in (False, True):
        for size in (1 * MB, 10 * MB, 100 * MB):
            text = make_text(size, trace)
            hook_t, plan_t, store_t = [], [], []
            for i in range(7):
                result = ToolResult(call_id=f"c{i}", name="tail_logs", content=text)
                t0 = time.perf_counter()
                out = clawkit_truncator.plugin.after_tool_call(ctx, ToolCall(id=f"c{i}", name="tail_logs"), result)
                hook_t.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                output_store.wait()
                store_t.append(time.perf_counter() - t0 + hook_t[-1])
                t0 = time.perf_counter()
                plan_cut(text, 38_400, counter)
                plan_t.append(time.perf_counter() - t0)
            assert out is not None and out.metadata["truncated"]
            if trace:
                assert out.content.endswith(TRACE)
            h, p, s = (min(x) * 1000 for x in (hook_t, plan_t, store_t))  # best of 7: the machine is shared
            if size == MB:
                base_hook, base_plan = h, p
            label = f"{size // MB} MB{' + trace' if trace else ''}"
            print(f"{label:<22}{h:>16.2f}{h / base_hook:>8.2f}{p:>14.2f}{p / base_plan:>8.2f}{s:>13.1f}")
            store.conn.execute("DELETE FROM truncator_outputs")
    store.close()


if __name__ == "__main__":
    main()
