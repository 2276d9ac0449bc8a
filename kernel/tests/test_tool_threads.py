"""Sync tools run in kept daemon threads (clawkit.tools): reused, not started per call."""

from __future__ import annotations

import asyncio
import threading


def test_back_to_back_sync_tool_calls_reuse_one_thread():
    """A sync tool runs in a kept daemon thread; the next call finds it idle instead of starting another."""
    from clawkit.tools import _in_daemon_thread

    def live() -> int:
        return sum(t.name == "clawkit-tool" and t.is_alive() for t in threading.enumerate())

    def work() -> int:
        return 1

    async def main() -> None:
        for _ in range(50):
            assert await _in_daemon_thread(work, {}) == 1

    before = live()
    asyncio.run(main())
    assert live() - before <= 1  # one thread at most was started for 50 calls in a row
