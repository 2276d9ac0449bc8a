"""The storage contract, run on both backends: the same test functions against SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import pytest

from clawkit import storage
from clawkit.sessions import SessionStore
from clawkit.storage import Column, Index, Table
from clawkit.types import Message, SessionClassification, ToolCall, ToolResult, Usage


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    """A fresh database of each backend: a SQLite file, or an empty PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "state.db"
    return request.getfixturevalue("postgres_db")


@pytest.fixture
def store(db):
    s = SessionStore(db)
    yield s
    s.close()


def test_messages_roundtrip_in_order_with_tool_calls_and_export(store):
    sid = store.create("a")
    call = ToolCall(id="c1", name="echo", arguments={"text": "hi"})
    ids = [store.append(sid, Message(role="user", content="hello 100% ?")),
           store.append(sid, Message(role="assistant", content="", tool_calls=[call])),
           store.append(sid, Message(role="tool", content="hi", tool_result=ToolResult(call_id="c1", name="echo", content="hi")))]
    assert ids == sorted(ids) and ids[0] > 0
    got = store.messages(sid)
    assert [m.role for m in got] == ["user", "assistant", "tool"]
    assert got[0].content == "hello 100% ?" and got[1].tool_calls[0].arguments == {"text": "hi"}
    assert got[2].tool_result.call_id == "c1"
    lines = list(store.export_jsonl(sid))
    assert '"type":"session"' in lines[0] and len(lines) == 4
    assert store.list()[0]["messages"] == 3 and store.exists(sid) and not store.exists("nope")


def test_metadata_classification_and_deferred_writes(store):
    sid = store.create("a", "ses_fixed")
    assert sid == "ses_fixed" and store.load_metadata(sid) == {}
    store.save_metadata(sid, {"k": 1}, now=False)
    assert store.load_metadata(sid) == {"k": 1}  # a read flushes the deferred write
    store.save_classification(sid, SessionClassification(topic="code"))
    assert store.load_classification(sid).topic == "code"
    with pytest.raises(KeyError):
        store.row("missing")


def test_observations_are_committed_together_at_the_turns_end(store, db):
    sid = store.create("a")
    store.event(sid, "run1", "tool_blocked", {"why": "policy", "n": 1}, time.time())
    store.record_usage(sid, "run1", "m", Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, cost=0.5))
    store.record_usage(sid, "run1", "m", Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3))
    other = SessionStore(db)  # another process's view: nothing committed yet
    try:
        assert other.conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 0
        store.append(sid, Message(role="user", content="x"))  # a message commits itself alone
        assert other.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1
        assert other.conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 0
        store.flush()  # the turn's end
        assert other.conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 1
        assert other.conn.execute("SELECT COUNT(*) FROM usage").fetchone()[0] == 2
    finally:
        other.close()
    assert store.events(sid)[0]["data"] == {"why": "policy", "n": 1}
    assert store.events(sid, "nothing") == []
    totals = store.usage_totals(sid)
    assert totals == {"calls": 2, "prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18, "cost": 0.5}
    assert all(type(v) in (int, float) for v in totals.values())


def test_runs_and_steps(store):
    sid = store.create("a")
    store.run_start({"id": "r1", "trace_id": "t1", "session_id": sid, "agent": "a", "data": {"tools": ["x"]}})
    store.run_start({"id": "r2", "trace_id": "t1", "session_id": sid, "agent": "b", "parent_run_id": "r1", "parent_step_id": "s1"})
    store.step("r1", "s1", "tool", "agent_b", 1.0, None, "running")
    store.step("r1", "s1", "tool", "agent_b", 1.0, 2.0, "ok", {"out": 1})  # the same step again: replaced
    store.step("r1", "s0", "llm", "m", 0.5, 0.9, "ok")
    store.run_end("r1", "done", {"rounds": 2})
    runs = store.runs(sid)
    assert [r["id"] for r in runs] == ["r1", "r2"]
    assert runs[0]["status"] == "done" and runs[0]["data"] == {"tools": ["x"], "rounds": 2}
    assert [r["id"] for r in store.child_runs("r1")] == ["r2"] and len(store.trace_runs("t1")) == 2
    steps = store.steps("r1")
    assert [s["id"] for s in steps] == ["s0", "s1"] and steps[1]["status"] == "ok" and steps[1]["data"] == {"out": 1}


def test_replace_messages_is_atomic(store):
    sid = store.create("a")
    for i in range(3):
        store.append(sid, Message(role="user", content=str(i)))
    store.replace_messages(sid, [Message(role="user", content="summary")])
    assert [m.content for m in store.messages(sid)] == ["summary"]


def test_one_turn_per_session_across_stores(db):
    a, b = SessionStore(db), SessionStore(db)
    try:
        sid = a.create("a")
        assert a.try_lock(sid) and a.try_lock(sid)  # re-entrant
        assert not b.try_lock(sid)
        assert "in use" in str(b.busy(sid, 1.0))
        a.unlock(sid)
        assert not b.try_lock(sid)  # still held once
        a.unlock(sid)
        assert b.try_lock(sid)
        b.unlock(sid)
    finally:
        a.close()
        b.close()


PLUGIN_TABLE = Table("myplugin_notes", (
    Column("id", "integer", autoincrement=True), Column("key", nullable=False), Column("value", "real"),
    Column("blob", "blob"), Column("n", "integer", default=0),
), indexes=(Index("myplugin_notes_key", ("key",), unique=True),))


def test_a_plugin_table_declared_once_works_on_both(store):
    conn = store.conn
    storage.declare(conn, PLUGIN_TABLE)
    storage.declare(conn, PLUGIN_TABLE)  # idempotent
    rid = conn.execute("INSERT INTO myplugin_notes (key, value, blob) VALUES (?, ?, ?)", ("a", 1.5, b"\x00\x01")).lastrowid
    assert rid >= 1
    conn.execute("INSERT INTO myplugin_notes (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET n = myplugin_notes.n + 1",
                 ("a", 9.0))
    conn.execute("INSERT OR IGNORE INTO myplugin_notes (key) VALUES (?)", ("a",))
    assert conn.execute("SELECT key, value, n, blob FROM myplugin_notes").fetchall() == [("a", 1.5, 1, b"\x00\x01")]
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO myplugin_notes (key) VALUES (?)", ("a",))
    with pytest.raises(sqlite3.Error):
        conn.execute("SELECT nope FROM myplugin_notes")
    with pytest.raises(RuntimeError):  # a failed transaction leaves nothing behind
        with conn:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO myplugin_notes (key) VALUES (?)", ("b",))
            raise RuntimeError
    assert not conn.in_transaction
    assert conn.execute("SELECT COUNT(*) FROM myplugin_notes").fetchone()[0] == 1
    assert conn.execute("SELECT '50%', ? || '?'", ("x",)).fetchone() == ("50%", "x?")


def test_a_sqlite_run_never_imports_the_postgres_driver(tmp_path):
    code = ("import sys; from clawkit.sessions import SessionStore; from clawkit.types import Message\n"
            f"s = SessionStore({str(tmp_path / 's.db')!r}); sid = s.create('a'); s.append(sid, Message(role='user', content='x'))\n"
            "s.run_start({'id': 'r', 'trace_id': 't', 'session_id': sid, 'agent': 'a'}); s.run_end('r', 'done'); s.close()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'sqlalchemy', 'dbos')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_postgres_url_is_kept_in_config_and_cli(tmp_path):
    from clawkit.config import AgentConfig

    cfg = AgentConfig(name="a", model="x", state_db="postgresql://u@127.0.0.1:5/db")
    assert cfg.state_db == "postgresql://u@127.0.0.1:5/db"
    assert str(AgentConfig(name="a", model="x", state_db="s.db").state_db) == "s.db"
    assert storage.redact_url("postgresql://u:secret@h:5/db") == "postgresql://u:***@h:5/db"


def test_one_metadata_key_is_written_without_losing_the_others(store, db):
    sid = store.create("a")
    store.save_metadata(sid, {"kept": 1})
    store.queue_metadata_key(sid, "route", {"profile": "code", "n": [1, 2]})
    store.flush()
    assert store.load_metadata(sid) == {"kept": 1, "route": {"profile": "code", "n": [1, 2]}}
    store.conn.execute("UPDATE sessions SET metadata = 'not json' WHERE id = ?", (sid,))
    store.queue_metadata_key(sid, "flag", True)
    store.flush()
    assert store.load_metadata(sid) == {"flag": True}  # a damaged document restarts from {}


def test_a_nul_character_is_stored_never_a_crash(store):
    """SQLite keeps a NUL; PostgreSQL's text cannot hold one, so it becomes U+FFFD there."""
    sid = store.create("a")
    store.append(sid, Message(role="tool", content="bin\x00ary"))
    store.event(sid, None, "note", {"raw": "a\x00b"}, time.time())
    got = store.messages(sid)[0].content
    assert got == ("bin\x00ary" if store.dialect == "sqlite" else "bin\ufffdary")
    assert store.events(sid)[0]["data"]["raw"] == "a\x00b"  # JSON text escapes it: exact on both


def test_a_broken_postgres_connection_is_replaced_and_session_locks_retaken(postgres_db):
    """The server ends the store's connection (a restart, a proxy's idle cut): the next statement
    reconnects and runs; the session lock the store held is taken again."""
    store, admin = SessionStore(postgres_db), storage.connect(postgres_db)
    try:
        sid = store.create("a")
        assert store.try_lock(sid)
        (pid,) = store.conn.execute("SELECT pg_backend_pid()").fetchone()
        admin.execute("SELECT pg_terminate_backend(?)", (pid,))
        store.append(sid, Message(role="user", content="after the cut"))
        assert [m.content for m in store.messages(sid)] == ["after the cut"]
        assert store.conn.execute("SELECT pg_backend_pid()").fetchone()[0] != pid
        other = SessionStore(postgres_db)
        try:
            assert not other.try_lock(sid)  # still ours
        finally:
            other.close()
        (pid,) = store.conn.execute("SELECT pg_backend_pid()").fetchone()
        with pytest.raises(sqlite3.OperationalError, match="inside a transaction"):
            with store.conn:
                store.conn.execute("BEGIN")
                admin.execute("SELECT pg_terminate_backend(?)", (pid,))
                store.conn.execute("SELECT 1")  # the transaction is gone: an error, never a silent half
        assert store.exists(sid)  # and the store goes on
    finally:
        store.close()
        admin.close()


@pytest.mark.parametrize("ci, outcome", [("", "1 skipped"), ("true", "1 error")])
def test_the_postgres_fixture_skips_without_binaries_but_never_under_ci(tmp_path, ci, outcome):
    (tmp_path / "test_pg.py").write_text("def test_needs_pg(postgres_server):\n    pass\n")
    env = {**__import__("os").environ, "CLAWKIT_PG_BIN": str(tmp_path / "nowhere"), "CI": ci}
    env.pop("PYTEST_XDIST_WORKER", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                          str(tmp_path / "test_pg.py")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert outcome in out.stdout, out.stdout[-2000:]
    assert "has no initdb" in out.stdout
    if ci:
        assert "CI=true: PostgreSQL tests must run" in out.stdout


def test_an_agent_resumes_a_session_from_postgres_in_a_new_agent(make_agent, postgres_db, workspace):
    """``state_db`` a URL: the turn's history is in PostgreSQL (no SQLite file), and a second agent
    (another process, another machine) continues the session from there."""
    a1 = make_agent(["first answer"], state_db=postgres_db)
    r1 = a1.run("remember 42")
    a1.store.close()
    a2 = make_agent(["second answer"], state_db=postgres_db)
    a2.run("what number?", session_id=r1.session_id)
    assert [m.content for m in a2.provider.requests[0].messages] == ["remember 42", "first answer", "what number?"]
    assert a2.store.dialect == "postgresql" and not (workspace / ".clawkit" / "state.db").exists()
    assert a2.store.runs(r1.session_id)[-1]["status"] == "done"


def test_agent_db_takes_a_url(make_agent, postgres_db, workspace):
    from clawkit.loop import Agent

    base = make_agent(["unused"])
    agent = Agent(base.config, provider=base.provider, db=postgres_db)
    try:
        assert agent.store.dialect == "postgresql" and agent.store.path == postgres_db
    finally:
        agent.close()


def test_a_tool_results_text_is_stored_once(store):
    """The result's text is the message's content: the data column does not repeat it (it was
    stored, escaped and redacted twice); a result whose text differs keeps its own."""
    sid = store.create("a")
    same = ToolResult(call_id="c1", name="read_file", content="x" * 500)
    other = ToolResult(call_id="c2", name="t", content="raw")
    store.append(sid, Message(role="tool", content=same.content, tool_result=same))
    store.append(sid, Message(role="tool", content="shown", tool_result=other))
    data = [r[0] for r in store.conn.execute("SELECT data FROM messages WHERE session_id = ? ORDER BY id", (sid,))]
    assert "x" * 500 not in data[0] and '"raw"' in data[1]
    first, second = store.messages(sid)
    assert first.tool_result == same and first.content == same.content
    assert second.tool_result == other and second.content == "shown"
