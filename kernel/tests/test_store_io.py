"""The SQLite store's I/O choices: session locks in one shared file, checkpoints off the reply path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from clawkit import checkpoint
from clawkit.sessions import SessionStore
from clawkit.types import Message


def test_session_locks_leave_no_file_per_session(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    try:
        for i in range(50):
            assert store.try_lock(f"ses_{i}")
            store.unlock(f"ses_{i}")
        assert store.try_lock("ses_held")
        assert sorted(os.listdir(tmp_path / "locks")) == ["sessions.lock"]
    finally:
        store.close()


def test_a_session_lock_dies_with_its_process(tmp_path):
    """A process that holds a session and is killed leaves it free; while it lives, others are refused."""
    db = tmp_path / "state.db"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from clawkit.sessions import SessionStore
        s = SessionStore({str(db)!r})
        assert s.try_lock("ses_x")
        print("held", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        store = SessionStore(db)
        try:
            assert not store.try_lock("ses_x")
            assert store.try_lock("ses_y")  # another session of the same file is free
            holder.kill()
            holder.wait(10)
            assert store.try_lock("ses_x")
        finally:
            store.close()
    finally:
        holder.kill()
        holder.wait(10)


def test_two_stores_in_one_process_exclude_each_other_until_close(tmp_path):
    a, b = SessionStore(tmp_path / "state.db"), SessionStore(tmp_path / "state.db")
    try:
        assert a.try_lock("ses_1")
        assert not b.try_lock("ses_1")
        a.close()  # closing releases what it held
        assert b.try_lock("ses_1")
    finally:
        b.close()


def test_wal_checkpoints_run_in_their_own_thread(tmp_path, monkeypatch):
    """The store's connection never checkpoints inside a commit; the checkpointer thread keeps the
    WAL bounded, and close leaves a database that holds everything."""
    monkeypatch.setattr(checkpoint, "WAL_LIMIT", 64 * 1024)
    monkeypatch.setattr(checkpoint, "EVERY", 4)
    db = tmp_path / "state.db"
    store = SessionStore(db)
    try:
        assert store.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        sid = store.create("a")
        for i in range(400):
            store.append(sid, Message(role="user", content=f"message {i} " + "x" * 200))
        store._checkpointer._wake.set()
        deadline = time.monotonic() + 10
        while store._checkpointer.checkpoints == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store._checkpointer.checkpoints >= 1
        assert store._checkpointer._thread.name == "clawkit-checkpoint"
    finally:
        store.close()
    assert store._checkpointer._thread is None  # stopped by close
    again = SessionStore(db)
    try:
        assert len(again.messages(sid)) == 400
    finally:
        again.close()
