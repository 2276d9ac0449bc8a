"""The audit writer off the gate path: when records are committed, what they contain, and the
per-turn caches of the gate (real paths, approvals) staying correct."""

from __future__ import annotations

import importlib
import json
import sqlite3
import time

import clawkit_policy
import clawkit_tools
from clawkit.testing import ScriptedReply, call
from clawkit_policy import AuditLedger, ledger_for
from clawkit_policy.writer import MAX_DELAY, LedgerWriter

PLUGINS = (clawkit_tools, clawkit_policy)
redact_mod = importlib.import_module("clawkit_policy.redact")








def test_records_are_committed_without_a_kick_within_the_max_delay(tmp_path, ledger_files):
    """A long-running tool must not keep its decision record in memory: the timer writes it."""
    conn, writer = ledger_files.writer(tmp_path / "a.db")
    writer.submit("decision", {"tool": "shell_exec", "decision": "allow"})
    deadline = time.monotonic() + 20 * MAX_DELAY
    while ledger_files.count(tmp_path / "a.db") == 0 and time.monotonic() < deadline:
        time.sleep(MAX_DELAY / 5)
    assert ledger_files.count(tmp_path / "a.db") == 1


def test_flush_commits_everything_before_it_in_order_and_the_chain_verifies(tmp_path, ledger_files):
    conn, writer = ledger_files.writer(tmp_path / "a.db")
    for i in range(600):  # more than one BATCH: some are written by size, the rest by the flush
        writer.submit("event", {"decision": f"e{i}", "data": {"i": i}})
        if i == 300:
            writer.kick()
    writer.flush()
    ledger = AuditLedger(conn)
    assert [r["decision"] for r in ledger.records()] == [f"e{i}" for i in range(600)]
    assert ledger.verify().ok


def test_records_are_screened_then_redacted_structurally(tmp_path, monkeypatch, ledger_files):
    monkeypatch.setenv("ODD_TOKEN", 'ab"cd\\ef-123')  # JSON escapes it: the screen must still see it
    redact_mod.refresh()
    try:
        conn, writer = ledger_files.writer(tmp_path / "a.db")
        writer.submit("decision", {"arguments": {"command": 'echo ab"cd\\ef-123'}, "reason": "plain", "data": {"n": 1}})
        writer.submit("decision", {"arguments": {"path": "notes/today.md"}, "requested": {"paths": ["/w/notes"]}})
        writer.submit("decision", {"arguments": {"password": "hunter2", "Cookie": "c=1"}})
        writer.submit("execution", {"content": "x" * 5000, "status": "ok"})
        writer.flush()
        rows = AuditLedger(conn).records()
    finally:
        redact_mod.refresh()
    dump = repr(rows)
    assert "ab\"cd" not in dump and 'ab\\"cd' not in dump and "hunter2" not in dump
    assert rows[0]["arguments"] == {"command": "echo [REDACTED]"}
    assert rows[1]["arguments"] == {"path": "notes/today.md"} and rows[1]["requested"] == {"paths": ["/w/notes"]}
    assert rows[2]["arguments"] == {"password": "[REDACTED]", "Cookie": "[REDACTED]"}
    assert rows[3]["data"]["result_chars"] == 5000 and len(rows[3]["data"]["result_sha256"]) == 64
    stored = conn.execute("SELECT arguments FROM policy_audit WHERE seq = 2").fetchone()[0]
    assert stored == json.dumps({"path": "notes/today.md"}, separators=(",", ":"))  # canonical text, stored once
    assert AuditLedger(conn).verify().ok


def test_a_symlink_made_by_a_tool_is_seen_by_the_next_gate(build_agent, workspace, tmp_path):
    """Real paths are cached for the turn, but only until a tool that may change the disk has run."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")

    class Approver:
        def __init__(self):
            self.asked = []

        def __call__(self, call, reason, ctx):
            self.asked.append((call.name, reason))
            return call.name == "shell_exec"  # the shell command yes, the widened read no

    approver = Approver()
    agent = build_agent([ScriptedReply.calls(call("read_file", path="link/secret.txt")),
                         ScriptedReply.calls(call("shell_exec", command=f"ln -s {outside} link")),
                         ScriptedReply.calls(call("read_file", path="link/secret.txt")), "ok"],
                        plugins=PLUGINS, tools=["*"], approver=approver)
    res = agent.run("go")
    results = [m.content for m in agent.store.messages(res.session_id) if m.role == "tool"]
    assert (workspace / "link").is_symlink()
    assert "top secret" not in results[2]
    assert [name for name, _ in approver.asked] == ["shell_exec", "read_file"]
    assert "beyond its scope" in approver.asked[1][1]
    decisions = [r["decision"] for r in ledger_for(agent.store).records(tool="read_file", kind="decision")]
    assert decisions == ["allow", "require_approval"]


def test_flush_writes_on_the_calling_thread_and_a_later_flush_with_nothing_queued_does_nothing(tmp_path, ledger_files):
    """The turn's end commits its records itself (no hand-off to the thread and wait)."""
    import threading

    seen = []
    conn, writer = ledger_files.writer(tmp_path / "a.db")
    inner = writer.prepare
    writer.prepare = lambda fields: (seen.append(threading.get_ident()), inner(fields))[1]
    writer.submit("decision", {"tool": "read_file", "decision": "allow"})
    writer.submit("execution", {"tool": "read_file", "content": "hello"})
    writer.flush()
    assert seen == [threading.get_ident()] * 2
    assert ledger_files.count(tmp_path / "a.db") == 2 and writer.pending == 0
    writer.flush()  # nothing queued: nothing prepared, nothing written
    assert len(seen) == 2 and ledger_files.count(tmp_path / "a.db") == 2
    assert AuditLedger(conn).verify().ok


def test_a_flush_with_nothing_queued_starts_no_thread_and_opens_no_database(tmp_path, ledger_files):
    """Also at interpreter exit: a writer whose directory is gone, with nothing queued, is left alone."""
    from clawkit_policy import writer as writer_mod

    conn, writer = ledger_files.in_vanished_dir(tmp_path)
    writer.flush()
    writer_mod.close_all()
    assert writer._thread is None and writer._ledger is None and writer.error is None


def test_a_database_that_cannot_be_opened_fails_closed_without_a_traceback(tmp_path, capfd, caplog, ledger_files):
    """Queued records whose directory disappeared: the flush logs one warning (no thread traceback,
    no 10 s wait) and the next gate call is refused."""
    conn, writer = ledger_files.in_vanished_dir(tmp_path)
    writer.submit("decision", {"tool": "shell_exec", "decision": "allow"})
    started = time.monotonic()
    writer.flush()
    assert time.monotonic() - started < 5  # not the 10 s wait
    assert writer.error is not None
    assert "could not be written" in caplog.text
    try:
        writer.submit("decision", {"tool": "shell_exec", "decision": "allow"})
    except RuntimeError as exc:
        assert "cannot be written" in str(exc)
    else:
        raise AssertionError("a writer that cannot write must refuse new records (fail closed)")
    assert "Traceback" not in capfd.readouterr().err


def test_the_timer_thread_also_fails_closed_when_the_database_cannot_be_opened(tmp_path, ledger_files):
    conn, writer = ledger_files.in_vanished_dir(tmp_path)
    writer.submit("decision", {"tool": "shell_exec", "decision": "allow"})
    deadline = time.monotonic() + 20 * MAX_DELAY
    while writer.error is None and time.monotonic() < deadline:
        time.sleep(MAX_DELAY / 5)
    assert writer.error is not None


def test_a_turns_records_are_committed_when_the_turn_ends(build_agent, workspace):
    """Durable before the reply goes out: another connection sees them right after the turn,
    without ledger_for (which flushes first)."""
    (workspace / "a.txt").write_text("hello")
    agent = build_agent([ScriptedReply.calls(call("read_file", path="a.txt")), "done"], plugins=PLUGINS, tools=["*"])
    res = agent.run("go")
    assert res.reply == "done"
    with sqlite3.connect(agent.store.path) as other:
        kinds = [k for (k,) in other.execute("SELECT kind FROM policy_audit ORDER BY seq")]
    assert "decision" in kinds and "execution" in kinds
    assert AuditLedger(agent.store.conn).verify().ok


def test_records_are_synced_and_anchored_off_the_flush_then_the_anchor_matches(tmp_path, ledger_files):
    """Group commit: the flush commits (visible, survives a killed process); the writer's thread
    fsyncs and only then advances the anchor, which never points past a durable record."""
    from clawkit_policy import anchor

    conn, writer = ledger_files.writer(tmp_path / "a.db")
    writer.submit("decision", {"tool": "read_file", "decision": "allow"})
    writer.flush()
    assert ledger_files.count(tmp_path / "a.db") == 1
    writer.wait_durable()
    assert writer.durable_seq == 1
    found = anchor.read_anchor(anchor.load_key(create=False), writer.sync.db)
    assert found["valid"] and found["seq"] == 1
    assert found["head"] == conn.execute("SELECT hash FROM policy_audit WHERE seq = 1").fetchone()[0]
    assert AuditLedger(conn).verify().ok


def test_the_anchor_never_moves_back(tmp_path, ledger_files):
    from clawkit_policy import anchor

    conn, writer = ledger_files.writer(tmp_path / "a.db")
    key, db = anchor.load_key(), writer.sync.db
    anchor.advance_anchor(key, db, 5, "e" * 64)
    anchor.advance_anchor(key, db, 3, "c" * 64)  # a slower process anchoring an older record
    assert anchor.read_anchor(key, db)["seq"] == 5


def test_the_anchor_never_moves_back_past_one_another_process_wrote(tmp_path, ledger_files):
    """advance_anchor skips re-reading the anchor this process wrote last; a file another process
    put there since (a new inode) is read and respected."""
    import os

    from clawkit_policy import anchor

    conn, writer = ledger_files.writer(tmp_path / "a.db")
    key, db = anchor.load_key(), writer.sync.db
    anchor.advance_anchor(key, db, 5, "e" * 64)
    path = anchor.anchor_path(db)
    body = json.dumps({"db": db, "seq": 9, "head": "f" * 64, "mac": anchor._mac(key, db, 9, "f" * 64)})
    (path.parent / "other.tmp").write_text(body)
    os.replace(path.parent / "other.tmp", path)  # what another process's write_anchor does
    anchor.advance_anchor(key, db, 7, "d" * 64)
    assert anchor.read_anchor(key, db)["seq"] == 9
    anchor.advance_anchor(key, db, 11, "a" * 64)
    assert anchor.read_anchor(key, db)["seq"] == 11


def test_an_anchor_read_while_it_is_rewritten_in_place_is_read_again_under_the_lock(tmp_path, ledger_files):
    """advance_anchor rewrites the anchor in place under the lock file; a reader that sees a half-written
    file (here: garbage while the lock is held) reads it again under the lock instead of calling it damaged."""
    import fcntl
    import os
    import threading

    from clawkit_policy import anchor

    conn, writer = ledger_files.writer(tmp_path / "a.db")
    key, db = anchor.load_key(), writer.sync.db
    anchor.advance_anchor(key, db, 1, "a" * 64)
    anchor.advance_anchor(key, db, 2, "b" * 64)  # in place
    path = anchor.anchor_path(db)
    assert path.stat().st_size % anchor.SECTOR == 0
    good = path.read_bytes()
    lock = os.open(path.with_suffix(".lock"), os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)  # a writer mid-way
    path.write_bytes(good[:40])
    found = []
    reader = threading.Thread(target=lambda: found.append(anchor.read_anchor(key, db)))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # waiting for the writer's lock
    path.write_bytes(good)
    os.close(lock)
    reader.join(10)
    assert found[0]["valid"] and found[0]["seq"] == 2


def test_a_commit_nobody_waits_for_is_synced_and_anchored_within_the_group_commit_window(tmp_path, ledger_files):
    """Group commit: without a waiter the thread syncs on its own, at most SYNC_DELAY after the commit
    (one fsync for every commit of that window), then advances the anchor."""
    from clawkit_policy import anchor
    from clawkit_policy.writer import SYNC_DELAY

    conn, writer = ledger_files.writer(tmp_path / "a.db")
    for i in range(3):
        writer.submit("decision", {"session_id": f"s{i}", "tool": "read_file", "decision": "allow"})
        writer.flush()
    assert ledger_files.count(tmp_path / "a.db") == 3
    with writer._synced:  # waits without asking for a sync (durable()/wait_durable() would ask)
        assert writer._synced.wait_for(lambda: writer.durable_seq == 3, timeout=100 * SYNC_DELAY)
    assert anchor.read_anchor(anchor.load_key(create=False), writer.sync.db)["seq"] == 3
    assert AuditLedger(conn).verify().ok


def test_a_flush_on_the_owner_thread_writes_with_the_store_connection(tmp_path, ledger_files):
    """One connection for the turn's writes and the ledger's (a second one would make SQLite drop the
    page cache of each at every commit of the other); a flush from another thread uses its own."""
    import threading

    conn, writer = ledger_files.writer(tmp_path / "a.db")
    writer.submit("decision", {"tool": "read_file", "decision": "allow"})
    writer.flush()
    assert writer._shared is not None and writer._shared.conn is conn and writer._ledger is None
    writer.submit("decision", {"tool": "read_file", "decision": "allow"})
    other = threading.Thread(target=writer.flush)
    other.start()
    other.join()
    assert writer._ledger is not None and writer._ledger.conn is not conn
    assert ledger_files.count(tmp_path / "a.db") == 2
    conn.execute("BEGIN")  # the store's connection inside a transaction: the flush commits on its own
    writer.submit("decision", {"tool": "read_file", "decision": "allow"})
    writer.flush()
    assert ledger_files.count(tmp_path / "a.db") == 3
    conn.execute("COMMIT")
    writer.close()
    assert AuditLedger(conn).verify().ok


def test_a_gate_waits_for_earlier_records_to_be_durable(tmp_path, ledger_files):
    """durable() is None once synced; while records are committed but not yet on disk it is a future
    the gate awaits, done when the thread has synced them."""
    import asyncio

    conn, writer = ledger_files.writer(tmp_path / "a.db")

    async def scenario():
        writer.submit("decision", {"session_id": "s1", "tool": "read_file", "decision": "allow"})
        writer.flush()
        assert writer.durable("s2") is None  # another session's records do not hold this one up
        fut = writer.durable("s1")
        if fut is not None:
            await asyncio.wait_for(fut, 10)
        assert writer.durable_seq == 1
        assert writer.durable("s1") is None

    asyncio.run(scenario())


def test_sync_soon_syncs_a_going_on_session_without_waiting_for_the_window(tmp_path, monkeypatch, ledger_files):
    """A chat's next turn starts the fsync of its session's earlier records at once (its first tool call
    will wait for them); a session with nothing left to sync starts nothing."""
    from clawkit_policy import writer as writer_mod

    monkeypatch.setattr(writer_mod, "SYNC_DELAY", 600.0)  # the window alone would not sync during this test
    conn, writer = ledger_files.writer(tmp_path / "a.db")
    writer.submit("decision", {"session_id": "s1", "tool": "read_file", "decision": "allow"})
    writer.flush()
    writer.sync_soon("s2")  # nothing of s2's is waiting
    assert not writer._sync_now and writer.durable_seq == 0
    writer.sync_soon("s1")
    with writer._synced:
        assert writer._synced.wait_for(lambda: writer.durable_seq == 1, timeout=10)
    assert writer.durable("s1") is None
    writer.close()
    assert AuditLedger(conn).verify().ok


def test_a_chat_turn_starts_the_sync_of_its_earlier_records(build_agent, workspace, monkeypatch):
    """A session's second turn asks the writer to sync that session's earlier records as it opens
    (message_received), before its first tool call waits for them; a first turn asks nothing (group
    commit as before)."""
    (workspace / "a.txt").write_text("hello")
    asked = []
    real = LedgerWriter.sync_soon

    def spy(self, session_id):
        asked.append((session_id, self._session_seq.get(session_id, 0) > self.durable_seq))
        real(self, session_id)

    monkeypatch.setattr(LedgerWriter, "sync_soon", spy)
    agent = build_agent([ScriptedReply.calls(call("read_file", path="a.txt")), "one",
                         ScriptedReply.calls(call("read_file", path="a.txt")), "two"], plugins=PLUGINS, tools=["*"])
    first = agent.run("go")
    assert first.reply == "one" and asked == []
    second = agent.run("again", session_id=first.session_id)
    assert second.reply == "two"
    assert [sid for sid, _ in asked] == [first.session_id]
    assert ledger_for(agent.store).verify().ok


def test_a_failed_sync_blocks_the_next_gate_call(tmp_path, ledger_files):
    """The anchor cannot be advanced after the commit (its lock file became a directory): the writer
    fails, waiters are released, and the next record is refused (fail closed)."""
    from clawkit_policy import anchor

    conn, writer = ledger_files.writer(tmp_path / "a.db")
    writer.submit("decision", {"tool": "read_file", "decision": "allow"})
    writer.flush()
    writer.wait_durable()
    lock = anchor.anchor_path(writer.sync.db).with_suffix(".lock")
    lock.unlink()
    lock.mkdir()
    try:
        writer.submit("execution", {"tool": "read_file", "content": "x"})
        writer.flush()
        writer.wait_durable()
        assert writer.error is not None
        try:
            writer.submit("decision", {"tool": "shell_exec", "decision": "allow"})
        except RuntimeError as exc:
            assert "cannot be written" in str(exc)
        else:
            raise AssertionError("a writer whose records cannot be made durable must refuse new records")
    finally:
        lock.rmdir()


def test_persistent_grants_are_read_once_per_ttl_and_a_grant_stored_in_process_is_seen_at_once(tmp_path, monkeypatch):
    """A turn reads no table for the agent's persistent grants: each store keeps them GRANTS_TTL. A grant
    stored through any store of the database in this process is seen by the next read of every store;
    one written (or deleted) by another process once GRANTS_TTL has passed."""
    from clawkit_policy import Grant
    from clawkit_policy import state as state_mod

    path = tmp_path / "a.db"
    first, second, other = (sqlite3.connect(path, isolation_level=None) for _ in range(3))
    db = str(path.resolve())
    mine, theirs = state_mod.PolicyState(first, db), state_mod.PolicyState(second, db)
    assert mine.grants("bot") == [] and theirs.grants("bot") == []
    theirs.add_grant("bot", Grant(tools=["read_file"], paths=["/srv/a"]))
    assert [g.paths for g in mine.grants("bot")] == [["/srv/a"]]  # another store, same process: at once
    other.execute("INSERT INTO policy_grants (agent, spec, created) VALUES ('bot', ?, 0)",
                  (Grant(tools=["read_file"], paths=["/srv/b"]).model_dump_json(),))
    assert [g.paths for g in mine.grants("bot")] == [["/srv/a"]]  # another process: not yet
    clock = time.monotonic() + state_mod.GRANTS_TTL + 0.01
    monkeypatch.setattr(state_mod.time, "monotonic", lambda: clock)
    assert [g.paths for g in mine.grants("bot")] == [["/srv/a"], ["/srv/b"]]
    other.execute("DELETE FROM policy_grants WHERE spec LIKE '%/srv/a%'")  # revoked by hand elsewhere
    clock += state_mod.GRANTS_TTL + 0.01
    assert [g.paths for g in mine.grants("bot")] == [["/srv/b"]]
