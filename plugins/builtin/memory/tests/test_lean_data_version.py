"""The merge due-check after a turn (``merge.may_be_due``) reuses a ``PRAGMA data_version`` read of the
last second — a recall's check reads it for every message — instead of asking the database once more per
turn (issue 29 goal 5). This process's own episode writes are seen at once (``generation``); another
connection's commit is seen by a turn ending once that read is older than ``DATA_VERSION_REUSE``."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from clawkit.sessions import SessionStore
from clawkit.types import Message
from clawkit_memory import db as mdb, merge
from clawkit_memory.embeddings import LocalStatic
from clawkit_memory.index import MemoryIndex


def _commit_elsewhere(ws) -> None:
    """A commit to the memory database through another connection (as another process makes), which
    moves ``PRAGMA data_version``; through the index's own SQLite library (two libraries in one process
    do not see each other's locks)."""
    other = mdb.sqlite.connect(ws / "memory.db")
    with other:
        other.execute("CREATE TABLE IF NOT EXISTS probe (x)")
        other.execute("INSERT INTO probe VALUES (1)")
    other.close()


def test_due_check_reuses_a_recent_data_version_read(tmp_path, monkeypatch):
    store = SessionStore(tmp_path / "state.db")
    ws = tmp_path / "ws"
    ws.mkdir()
    index = MemoryIndex(ws / "memory.db", LocalStatic(), workspace=ws)
    mem = SimpleNamespace(index=index, partition="a", data_version_read=(-1, float("-inf")),
                          cfg=SimpleNamespace(compaction=SimpleNamespace(keep_recent=1, batch=2)))
    clock = [1000.0]
    monkeypatch.setattr(merge.time, "monotonic", lambda: clock[0])
    reads = []

    def recall_check():  # what AgentMemory._version records for every message's recall check
        version = index.conn.execute("PRAGMA data_version").fetchone()[0]
        mem.data_version_read = (version, clock[0])
        reads.append(version)

    try:
        assert merge.may_be_due(mem)
        asyncio.run(merge.after_turn(mem, store.path, None, "m"))  # nothing indexed: nothing due
        assert mem.data_version_read[1] == clock[0]  # the check's own fresh read is recorded too
        assert not merge.may_be_due(mem)

        _commit_elsewhere(ws)  # another process, the CLI: PRAGMA data_version moves
        clock[0] += 0.5
        recall_check()  # a message's recall reads the moved version: the due-check sees it
        assert merge.may_be_due(mem)
        asyncio.run(merge.after_turn(mem, store.path, None, "m"))
        assert not merge.may_be_due(mem)

        _commit_elsewhere(ws)
        clock[0] += 0.5  # the last read is 0.5 s old: taken as it is (the merge waits for a later turn)
        assert not merge.may_be_due(mem)
        clock[0] += merge.DATA_VERSION_REUSE  # older than that: asked again, and seen
        assert merge.may_be_due(mem)
        asyncio.run(merge.after_turn(mem, store.path, None, "m"))
        assert not merge.may_be_due(mem)

        sid = store.create("a")  # this process's own episode write: seen at once, whatever the read's age
        store.append(sid, Message(role="user", content="my bicycle is green"))
        store.append(sid, Message(role="assistant", content="noted"))
        store.flush()
        recall_check()
        index.sync_sessions(store.path, "a", "a")
        assert merge.may_be_due(mem)
    finally:
        index.close()
        store.close()


def test_the_service_records_its_data_version_reads(tmp_path):
    from clawkit_memory.config import MemoryConfig
    from clawkit_memory.service import AgentMemory

    ws = tmp_path / "ws"
    ws.mkdir()
    index = MemoryIndex(ws / "memory.db", LocalStatic(), workspace=ws)
    mem = AgentMemory(index, MemoryConfig(), "a", "a")
    try:
        before = time.monotonic()
        assert not mem.maybe_has_memory()
        version, at = mem.data_version_read
        assert version == index.conn.execute("PRAGMA data_version").fetchone()[0] and at >= before
    finally:
        mem.close()
        index.close()


def test_recall_checks_read_data_version_once_per_moment(tmp_path, monkeypatch):
    """The empty-memory test and the repeated-question cache (on the event loop, every message) take a
    ``PRAGMA data_version`` read of the last ``service.DATA_VERSION_REUSE`` seconds: another process's write is
    seen by the messages after that; this process's own writes (``generation``) at once."""
    from clawkit_memory import service
    from clawkit_memory.config import MemoryConfig
    from clawkit_memory.service import AgentMemory

    ws = tmp_path / "ws"
    ws.mkdir()
    index = MemoryIndex(ws / "memory.db", LocalStatic(), workspace=ws)
    mem = AgentMemory(index, MemoryConfig(), "a", "a")
    clock = [5000.0]
    monkeypatch.setattr(service.time, "monotonic", lambda: clock[0])

    def version():
        with index.lock:
            return mem._version()

    try:
        first = version()
        _commit_elsewhere(ws)  # another process's commit
        clock[0] += service.DATA_VERSION_REUSE / 2
        assert version() == first  # the same moment: the read stands
        index.generation += 1  # this process's own write: seen at once
        assert version() == (first[0] + 1, first[1])
        clock[0] += service.DATA_VERSION_REUSE
        assert version()[1] != first[1]  # the next moment: asked again, and the other process's commit seen
    finally:
        mem.close()
        index.close()
