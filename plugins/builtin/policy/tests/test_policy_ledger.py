"""The hash-chained audit ledger and the ``clawkit audit`` commands, on SQLite and on PostgreSQL
(the same tests: a ``db`` is a file path or a ``postgresql://`` URL)."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys

import pytest

import clawkit_policy
from clawkit.cli import build_parser
from clawkit.storage import connect
from clawkit.plugins import get_plugin_manager
from clawkit_policy import AuditLedger
from clawkit_policy.approvers import make_terminal_approver
from clawkit.types import ToolCall


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db(request, tmp_path):
    """A new database of each backend: a SQLite file path, or an empty PostgreSQL database's URL."""
    if request.param == "sqlite":
        return tmp_path / "state.db"
    return request.getfixturevalue("postgres_db")


@pytest.fixture
def db(empty_db):
    path = empty_db
    conn = connect(path)
    ledger = AuditLedger(conn)
    for i in range(5):
        ledger.append("decision", session_id="s1" if i < 3 else "s2", tool="shell_exec" if i % 2 else "read_file",
                      decision="allow" if i % 2 == 0 else "require_approval", arguments={"i": i}, reason=f"r{i}")
    conn.close()
    return path


def verify(path):
    conn = connect(path)
    try:
        return AuditLedger(conn).verify()
    finally:
        conn.close()


def tamper(path, *sql):
    conn = connect(path)
    for stmt in sql:
        conn.execute(stmt)
    conn.close()


def test_intact_chain_verifies(db):
    result = verify(db)
    assert result.ok and result.count == 5 and len(result.head) == 64


def test_edited_record_fails(db):
    tamper(db, "UPDATE policy_audit SET decision = 'allow' WHERE seq = 2")
    result = verify(db)
    assert not result.ok and any("record 2" in p and "edited" in p for p in result.problems)


def test_edit_with_recomputed_own_hash_still_breaks_the_chain(db):
    conn = connect(db)
    from clawkit_policy.ledger import COLUMNS, record_hash

    row = dict(zip(COLUMNS + ("hash",), conn.execute(f"SELECT {', '.join(COLUMNS)}, hash FROM policy_audit WHERE seq = 3").fetchone()))
    row["reason"] = "forged"
    conn.execute("UPDATE policy_audit SET reason = 'forged', hash = ? WHERE seq = 3", (record_hash(row),))
    conn.close()
    result = verify(db)
    assert not result.ok and any("record 4" in p and "chain is broken" in p for p in result.problems)


def test_deleted_record_fails(db):
    tamper(db, "DELETE FROM policy_audit WHERE seq = 3")
    result = verify(db)
    assert not result.ok and any("record 3 is missing" in p for p in result.problems)


def test_deleted_tail_fails(db):
    tamper(db, "DELETE FROM policy_audit WHERE seq >= 4")
    result = verify(db)
    assert not result.ok and any("records 4..5 were deleted from the end" in p for p in result.problems)


def test_reordered_records_fail(db):
    tamper(db, "UPDATE policy_audit SET seq = 100 WHERE seq = 2", "UPDATE policy_audit SET seq = 2 WHERE seq = 3",
           "UPDATE policy_audit SET seq = 3 WHERE seq = 100")
    result = verify(db)
    assert not result.ok and any("chain is broken" in p or "edited" in p for p in result.problems)


def test_inserted_record_fails(db):
    tamper(db, "INSERT INTO policy_audit (seq, ts, kind, prev_hash, hash) VALUES (6, 0, 'decision', 'x', 'y')")
    assert not verify(db).ok


def test_concurrent_writers_keep_one_chain(empty_db):
    a, b = AuditLedger(connect(empty_db)), AuditLedger(connect(empty_db))
    import threading

    def write(ledger, n):
        for i in range(n):
            ledger.append("event", decision=f"e{i}")

    threads = [threading.Thread(target=write, args=(l, 30)) for l in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result = a.verify()
    assert result.ok and result.count == 60


def test_unknown_fields_are_rejected(tmp_path):
    ledger = AuditLedger(sqlite3.connect(tmp_path / "x.db", isolation_level=None))
    with pytest.raises(TypeError, match="unknown audit fields: colour"):
        ledger.append("event", colour="red")


def cli(*argv, capsys):
    # narrow: the ledger's CLI commands in-process, not an agent
    parser = build_parser(get_plugin_manager(extra=(clawkit_policy,), load_entry_points=False))
    args = parser.parse_args(list(argv))
    code = args.handler(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_verify_and_list(db, capsys):
    code, out, _ = cli("--db", str(db), "audit", "verify", capsys=capsys)
    assert code == 0 and out.startswith("audit ledger OK: 5 records, head ")
    code, out, _ = cli("--db", str(db), "audit", "list", "--session", "s1", "--tool", "shell_exec", capsys=capsys)
    assert code == 0 and len(out.strip().splitlines()) == 1 and "require_approval" in out and "#2" in out
    code, out, _ = cli("--db", str(db), "audit", "list", "--decision", "allow", "--json", capsys=capsys)
    assert code == 0 and len(out.strip().splitlines()) == 3 and '"arguments": {"i": 0}' in out
    tamper(db, "DELETE FROM policy_audit WHERE seq = 2")
    code, _, err = cli("--db", str(db), "audit", "verify", capsys=capsys)
    assert code == 1 and "FAILED" in err and "record 2 is missing" in err
    if not str(db).startswith("postgresql://"):
        code, _, err = cli("--db", str(db.parent / "missing.db"), "audit", "verify", capsys=capsys)
        assert code == 2 and "no database" in err


def test_cli_as_a_real_command(db):
    # the policy plugin alone, plus the storage plugin a postgresql:// database needs since it left the kernel (issue 28)
    env = dict(os.environ, CLAWKIT_LOAD_PLUGINS="clawkit-policy,clawkit-postgres")
    ok = subprocess.run([sys.executable, "-m", "clawkit", "--db", str(db), "audit", "verify"], env=env,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    tamper(db, "UPDATE policy_audit SET reason = 'x' WHERE seq = 1")
    bad = subprocess.run([sys.executable, "-m", "clawkit", "--db", str(db), "audit", "verify"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "record 1" in bad.stderr


class _Ctx:
    state: dict = {}

    def plugin_config(self, name):
        return None


def test_terminal_approver_answers_and_times_out():
    import asyncio

    call = ToolCall(name="shell_exec", arguments={"command": "ls", "api_key": "sk-supersecretvalue123456"})
    out = io.StringIO()
    yes = make_terminal_approver(stdin=io.StringIO("y\n"), stdout=out, timeout=5)
    # an Answer (truthy when approved) naming the terminal's user and the call hash it showed
    answer = asyncio.run(yes(call, "unsafe", _Ctx()))
    assert answer.approved is True and answer.identity["kind"] == "terminal" and answer.by.startswith("terminal user ")
    assert f"call hash: {answer.call_hash}" in out.getvalue()
    assert "[approval] shell_exec" in out.getvalue() and "because: unsafe" in out.getvalue()
    assert "sk-supersecretvalue123456" not in out.getvalue()
    no = make_terminal_approver(stdin=io.StringIO("\n"), stdout=io.StringIO(), timeout=5)
    assert asyncio.run(no(call, "unsafe", _Ctx())).approved is False
    r, w = os.pipe()
    silent = make_terminal_approver(stdin=os.fdopen(r), stdout=io.StringIO(), timeout=0.05)
    with pytest.raises(clawkit_policy.ApprovalTimeout, match="no answer within 0.05 s"):
        asyncio.run(silent(call, "unsafe", _Ctx()))
    os.close(w)


def test_truncation_with_a_rewritten_head_is_caught_by_the_anchor(db, capsys):
    """The anchor outside the database (a file per database path, or per PostgreSQL URL) still
    knows the length: cutting the tail and fixing the head row does not pass, nor does dropping the table."""
    tamper(db, "DELETE FROM policy_audit WHERE seq >= 4",
           "UPDATE policy_audit_head SET seq = 3, hash = (SELECT hash FROM policy_audit WHERE seq = 3) WHERE id = 1")
    result = verify(db)
    assert not result.ok and any("truncated" in p for p in result.problems)
    tamper(db, "DROP TABLE policy_audit")
    code, _, err = cli("--db", str(db), "audit", "verify", capsys=capsys)
    assert code == 1 and "dropped" in err


@pytest.mark.parametrize("size", [16, 32, 64, 65, 200])
def test_record_mac_is_hmac_sha256_of_the_compact_row(size):
    """record_hash computes HMAC-SHA256 from copies of the keyed pads; any HMAC library verifies it."""
    import hashlib
    import hmac
    import os

    from clawkit_policy.ledger import COLUMNS, record_hash

    key = os.urandom(size)
    values = {c: f"v{i}" for i, c in enumerate(COLUMNS)}
    payload = json.dumps([values[c] for c in COLUMNS], separators=(",", ":"), ensure_ascii=False).encode()
    assert record_hash(values, key) == hmac.new(key, payload, hashlib.sha256).hexdigest()
