"""The merge due-check after every turn (clawkit_memory.merge.after_turn) is skipped while nothing it reads
changed since it last found nothing due — and runs again after any episode write, by this process's index or
by another connection, and after a settings change (issue 29 goal 5: per-turn CPU of the full install)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from types import SimpleNamespace

from clawkit.sessions import SessionStore
from clawkit.types import Message
from clawkit_memory import merge
from clawkit_memory.embeddings import LocalStatic
from clawkit_memory.index import MemoryIndex


def test_due_check_skipped_until_the_episodes_or_settings_change(tmp_path, monkeypatch):
    store = SessionStore(tmp_path / "state.db")
    ws = tmp_path / "ws"
    ws.mkdir()
    index = MemoryIndex(ws / "memory.db", LocalStatic(), workspace=ws)
    calls = []
    real_plan = merge.plan
    monkeypatch.setattr(merge, "plan", lambda mem: calls.append(1) or real_plan(mem))
    mem = SimpleNamespace(index=index, partition="a", cfg=SimpleNamespace(compaction=SimpleNamespace(keep_recent=1, batch=2)))

    def turn() -> int:
        before = len(calls)
        asyncio.run(merge.after_turn(mem, store.path, None, "m"))
        return len(calls) - before

    try:
        assert turn() == 1  # nothing indexed: nothing due
        assert turn() == 0 and turn() == 0  # nothing changed: no query

        sid = store.create("a")
        store.append(sid, Message(role="user", content="my bicycle is green"))
        store.append(sid, Message(role="assistant", content="noted"))
        store.flush()
        index.sync_sessions(store.path, "a", "a")  # an episode written by this index (generation)
        assert turn() == 1
        assert turn() == 0

        other = sqlite3.connect(ws / "memory.db")  # another process, the CLI: PRAGMA data_version moves
        with other:
            other.execute("UPDATE memory_chunks SET created = created WHERE 1")
        other.close()
        assert turn() == 1
        assert turn() == 0

        mem.cfg.compaction.keep_recent = 0  # other settings: asked again
        assert turn() == 1
        assert turn() == 0

        # the indexer holds the lock on its thread: no state (the check then runs on a thread; the loop never waits)
        taken, release = threading.Event(), threading.Event()

        def hold():
            with index.lock:
                taken.set()
                release.wait(5)

        t = threading.Thread(target=hold)
        t.start()
        taken.wait(5)
        assert merge._state(mem) is None
        release.set()
        t.join()
    finally:
        index.close()
        store.close()


def test_a_failed_merge_is_retried_after_a_back_off_not_after_every_turn(tmp_path, monkeypatch):
    """A summariser that fails (down, or answers nothing) is not called again after every turn."""
    ws = tmp_path / "ws"
    ws.mkdir()
    index = MemoryIndex(ws / "memory.db", LocalStatic(), workspace=ws)
    clock = [1000.0]
    monkeypatch.setattr(merge.time, "monotonic", lambda: clock[0])
    summaries = []

    class Provider:
        async def complete(self, request):
            summaries.append(request)
            return SimpleNamespace(content="")  # "the model returned an empty summary"

    group = merge.Group(["session:a", "session:b"], [(1, "session:a", "x", 1.0, "a"), (2, "session:b", "y", 2.0, "b")])
    monkeypatch.setattr(merge, "plan", lambda mem: [group])
    monkeypatch.setattr(merge, "provenance", lambda db, sessions: [])
    monkeypatch.setattr(merge, "recorded", lambda mem, paths: [])
    mem = SimpleNamespace(index=index, partition="a", cfg=SimpleNamespace(compaction=SimpleNamespace(
        keep_recent=0, batch=2, max_chars=4000, summary_max_tokens=100)))
    runtime = SimpleNamespace(provider=Provider())

    def turn() -> int:
        before = len(summaries)
        asyncio.run(merge.after_turn(mem, None, runtime, "m"))
        return len(summaries) - before

    try:
        assert turn() >= 1  # due: the summariser is asked, and fails
        assert turn() == 0 and turn() == 0  # the next turns do not ask again
        clock[0] += merge.RETRY_AFTER + 1
        assert turn() >= 1  # after the back-off: once more (fails again)
        clock[0] += merge.RETRY_AFTER + 1
        assert turn() == 0  # the back-off doubled
        clock[0] += merge.RETRY_AFTER
        assert turn() >= 1
    finally:
        index.close()
