"""Sync tools run in kept daemon threads (clawkit.tools): reused, not started per call."""

from __future__ import annotations

import asyncio
import threading


def test_back_to_back_sync_tool_calls_reuse_one_thread():
    """A sync tool runs in a kept daemon thread; the next call finds it idle instead of starting another."""
    from clawkit.tools import _in_daemon_thread

    names: set[int] = set()

    def work() -> int:
        names.add(threading.get_ident())
        return 1

    async def main() -> None:
        for _ in range(50):
            assert await _in_daemon_thread(work, {}) == 1

    asyncio.run(main())
    assert len(names) == 1
