"""After a turn, memory starts the merge due-check's task only when the check could find something
(issue 29 goal 5: one task and an event-loop round trip less per turn): ``merge.may_be_due`` says no
exactly while ``after_turn`` would return at once, and yes again after an episode write or a settings
change."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from clawkit.sessions import SessionStore
from clawkit.types import Message
from clawkit_memory import merge
from clawkit_memory.embeddings import LocalStatic
from clawkit_memory.index import MemoryIndex


def test_may_be_due_follows_what_after_turn_reads(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    ws = tmp_path / "ws"
    ws.mkdir()
    index = MemoryIndex(ws / "memory.db", LocalStatic(), workspace=ws)
    mem = SimpleNamespace(index=index, partition="a", cfg=SimpleNamespace(compaction=SimpleNamespace(keep_recent=1, batch=2)))
    try:
        assert merge.may_be_due(mem)  # never checked
        asyncio.run(merge.after_turn(mem, store.path, None, "m"))  # nothing indexed: nothing due
        assert not merge.may_be_due(mem)

        sid = store.create("a")
        store.append(sid, Message(role="user", content="my bicycle is green"))
        store.append(sid, Message(role="assistant", content="noted"))
        store.flush()
        index.sync_sessions(store.path, "a", "a")  # an episode written: the check must run again
        assert merge.may_be_due(mem)
        asyncio.run(merge.after_turn(mem, store.path, None, "m"))
        assert not merge.may_be_due(mem)

        mem.cfg.compaction.keep_recent = 0  # other settings
        assert merge.may_be_due(mem)
        asyncio.run(merge.after_turn(mem, store.path, None, "m"))
        assert not merge.may_be_due(mem)

        mem._nothing_due = None
        mem._retry_at = time.monotonic() + 60  # a failed merge backs off: nothing until then
        assert not merge.may_be_due(mem)
        mem._retry_at = 0.0
        mem._merging = True
        assert not merge.may_be_due(mem)
    finally:
        index.close()
        store.close()
