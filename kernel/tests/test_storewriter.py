"""The session store's grouped commits (clawkit.storewriter): when writes reach the disk."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from clawkit.sessions import SessionStore
from clawkit.types import Message


@pytest.fixture
def store(tmp_path):
    s = SessionStore(tmp_path / "state.db")
    yield s
    s.close()


def _count(path, table: str = "messages") -> int:
    other = sqlite3.connect(path)  # another process's view: only what is committed
    try:
        return other.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        other.close()


def test_in_a_loop_writes_are_committed_when_the_turn_next_waits_and_sessions_share_the_commit(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    sids = [store.create("a") for _ in range(3)]
    seen: list[int] = []

    async def main() -> None:
        before = store._writer.commits
        for sid in sids:  # three sessions write between two waits
            store.append(sid, Message(role="user", content="hi"))
        seen.append(_count(store.path))  # nothing on disk yet: the loop has not had control back
        await asyncio.sleep(0)
        seen.append(_count(store.path))
        seen.append(store._writer.commits - before)

    try:
        asyncio.run(main())
        assert seen == [0, 3, 1]  # all three in one commit, made as soon as the code awaited
    finally:
        store.close()


def test_outside_a_loop_a_message_is_committed_at_once_and_gets_its_row_id(store):
    sid = store.create("a")
    first = store.append(sid, Message(role="user", content="one"))
    second = store.append(sid, Message(role="user", content="two"))
    assert 0 < first < second and _count(store.path) == 2


def test_a_read_through_the_store_or_its_connection_sees_every_write_before_it(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    sid = store.create("a")
    out: list = []

    async def main() -> None:
        store.append(sid, Message(role="user", content="hi"))
        out.append(store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])  # a plugin's direct read
        store.append(sid, Message(role="assistant", content="hello"))
        out.append([m.content for m in store.messages(sid)])

    try:
        asyncio.run(main())
        assert out == [1, ["hi", "hello"]]
    finally:
        store.close()


def test_a_failing_queued_statement_is_dropped_and_the_messages_still_commit(store, caplog):
    sid = store.create("a")
    store.queue("INSERT INTO no_such_table VALUES (?)", (1,))  # a plugin's bad bookkeeping
    with caplog.at_level(logging.WARNING, logger="clawkit.sessions"):
        store.append(sid, Message(role="user", content="kept"))
    assert [m.content for m in store.messages(sid)] == ["kept"]
    assert "no_such_table" in caplog.text


def test_the_session_lock_is_released_only_once_the_turns_writes_are_committed(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    other = SessionStore(tmp_path / "state.db")  # excluded like another process
    sid = store.create("a")
    out: list = []

    async def main() -> None:
        assert store.try_lock(sid)
        store.append(sid, Message(role="assistant", content="the answer"), defer=True)
        store.unlock(sid)  # the turn ends: its answer is not committed yet
        out.append(other.try_lock(sid))
        await asyncio.sleep(0)  # the commit is made; then the lock is given back
        out.append(other.try_lock(sid))
        out.append(_count(store.path))

    try:
        asyncio.run(main())
        assert out == [False, True, 1]
    finally:
        other.close()
        store.close()


def test_a_tool_call_is_on_disk_before_the_tool_runs(make_agent):
    from clawkit import hookimpl
    from clawkit.testing import ScriptedReply, call

    seen: list = []
    db: list = []

    class Tools:
        @hookimpl
        def register_tools(self, register, agent):
            def look() -> str:
                """Report what another connection sees."""
                seen.append(_count(db[0]))
                return "looked"

            register(look)

    agent = make_agent([ScriptedReply.calls(call("look")), "done"], plugins=(Tools(),), tools=["look"])
    db.append(agent.store.path)
    r = agent.run("go")
    assert r.reply == "done", agent.provider.requests[1].messages[-1]
    assert seen == [2], agent.provider.requests[1].messages[-1]  # the user's message and the assistant's call, committed before the tool ran


def test_a_thread_with_its_own_transaction_on_the_connection_and_the_loops_commits_do_not_mix(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    store.conn.execute("CREATE TABLE side (n INTEGER)")
    sid = store.create("a")
    errors: list[BaseException] = []

    def side() -> None:
        try:
            for i in range(200):
                store.conn.execute("BEGIN IMMEDIATE")
                store.conn.execute("INSERT INTO side VALUES (?)", (i,))
                time.sleep(0)
                store.conn.execute("COMMIT")
        except BaseException as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    async def main() -> None:
        t = threading.Thread(target=side)
        t.start()
        for i in range(200):
            store.append(sid, Message(role="user", content=str(i)))
            await asyncio.sleep(0)
        await asyncio.to_thread(t.join)

    try:
        asyncio.run(main())
        assert not errors
        assert _count(store.path, "side") == 200 and _count(store.path) == 200
    finally:
        store.close()


def test_interpreter_exit_commits_what_is_queued(tmp_path):
    db = tmp_path / "state.db"
    script = (
        "import asyncio, sys\n"
        "from clawkit.sessions import SessionStore\n"
        "from clawkit.types import Message\n"
        "store = SessionStore(sys.argv[1])\n"
        "async def main():\n"
        "    sid = store.create('a', 'ses_exit')\n"
        "    store.append(sid, Message(role='user', content='late'), defer=True)\n"
        "    store.commit()\n"
        "asyncio.run(main())\n"  # the loop closes before the commit it scheduled ran; no close()
    )
    subprocess.run([sys.executable, "-c", script, str(db)], check=True, timeout=60)
    store = SessionStore(db)
    try:
        assert [m.content for m in store.messages("ses_exit")] == ["late"]
    finally:
        store.close()


def test_a_call_recorded_in_a_loop_survives_a_sigkill_once_the_loop_waited(tmp_path):
    """What the kernel promises: what was written before the turn last waited is on disk."""
    db = tmp_path / "state.db"
    script = (
        "import asyncio, os, signal, sys\n"
        "from clawkit.sessions import SessionStore\n"
        "from clawkit.types import Message, ToolCall\n"
        "store = SessionStore(sys.argv[1])\n"
        "async def main():\n"
        "    sid = store.create('a', 'ses_kill')\n"
        "    store.append(sid, Message(role='assistant', tool_calls=[ToolCall(id='c', name='t')]))\n"
        "    await asyncio.sleep(0.01)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(db)], timeout=60)
    assert proc.returncode == -9
    store = SessionStore(db)
    try:
        msgs = store.messages("ses_kill")
        assert [m.tool_calls[0].id for m in msgs] == ["c"]
    finally:
        store.close()


def test_a_queued_call_reads_and_writes_inside_the_commit_and_a_failing_one_is_rolled_back_alone(tmp_path, caplog):
    store = SessionStore(tmp_path / "state.db")
    store.conn.execute("CREATE TABLE chain (seq INTEGER PRIMARY KEY, prev INTEGER)")
    sid = store.create("a")

    def link(conn) -> None:  # read the head, append after it: a hash chain's shape
        head = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM chain").fetchone()[0]
        conn.execute("INSERT INTO chain VALUES (?, ?)", (head + 1, head))

    def broken(conn) -> None:
        conn.execute("INSERT INTO chain VALUES (100, 0)")
        raise RuntimeError("the plugin's own failure")

    async def main() -> None:
        store.queue_call(link)
        store.queue_call(broken)
        store.queue_call(link)
        store.append(sid, Message(role="user", content="kept"))
        await asyncio.sleep(0)

    try:
        with caplog.at_level(logging.WARNING, logger="clawkit.sessions"):
            asyncio.run(main())
        assert store.conn.execute("SELECT seq, prev FROM chain ORDER BY seq").fetchall() == [(1, 0), (2, 1)]
        assert [m.content for m in store.messages(sid)] == ["kept"]
        assert "broken" in caplog.text
    finally:
        store.close()


def test_replacing_a_long_history_is_one_transaction(store):
    sid = store.create("a")
    store.append(sid, Message(role="user", content="old"))
    before = store._writer.commits
    store.replace_messages(sid, [Message(role="user", content=str(i)) for i in range(600)])
    assert store._writer.commits - before == 1  # not split at the queue's 256-statement spill
    assert [m.content for m in store.messages(sid)] == [str(i) for i in range(600)]
