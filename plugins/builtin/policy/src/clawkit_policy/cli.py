"""``clawkit audit verify`` and ``clawkit audit list``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkit.cli import add_workspace_options, workspace_db
from clawkit.storage import connect, is_postgres_url

if TYPE_CHECKING:  # imported by the handlers: ``clawkit --help`` must stay fast
    from .ledger import AuditLedger

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2


def register(cli: Any) -> None:
    p = cli.command("audit", help="inspect and verify the tool-policy audit ledger")
    sub = p.add_subparsers(dest="audit_command", metavar="ACTION")
    v = sub.add_parser("verify", help="re-compute the MAC chain and compare it with its anchor; exit 1 if the ledger was edited, truncated, dropped or deleted, or an executed call has no record")
    v.add_argument("--json", action="store_true", help="print the result as JSON")
    v.set_defaults(handler=cmd_verify)
    ls = sub.add_parser("list", help="list audit records (oldest first)")
    ls.add_argument("--session", help="only this session id")
    ls.add_argument("--tool", help="only this tool")
    ls.add_argument("--decision", help="only this decision (allow, block, require_approval, approved, denied, executed, tool.blocked, shield.detection…)")
    ls.add_argument("--kind", help="only this kind (decision, approval, execution, event, grant)")
    ls.add_argument("--limit", type=int, default=50, help="newest N records (default 50; 0 = all)")
    ls.add_argument("--json", action="store_true", help="one JSON object per line")
    ls.set_defaults(handler=cmd_list)
    add_workspace_options(p)  # --agent AGENT.yaml / --db PATH, after any part of the command
    p.set_defaults(handler=lambda args: (p.print_help(), EXIT_USAGE)[1])


def _open(args: Any) -> tuple[AuditLedger | None, int]:
    import sqlite3

    from .ledger import AuditLedger

    db = workspace_db(args)
    if is_postgres_url(db):
        conn = connect(db, read_only=True)
        if not conn.execute("SELECT to_regclass('policy_audit') IS NOT NULL").fetchone()[0]:
            conn.close()
            return None, EXIT_OK
        return AuditLedger(conn, create=False), EXIT_OK
    if not db.exists():
        print(f"clawkit audit: no database at {db} (pass --db PATH or --agent AGENT.yaml)", file=sys.stderr)
        return None, EXIT_USAGE
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'policy_audit'").fetchone()
    if not has:
        return None, EXIT_OK
    return AuditLedger(conn, create=False), EXIT_OK


def _missing(db: Any) -> tuple[str, int] | None:
    """Why a database without an audit table fails verification (its anchor says it had records), or None."""
    import sqlite3

    from .anchor import db_file, load_key, read_anchor

    if is_postgres_url(db):
        conn = connect(db, read_only=True)
        name = db_file(conn)
        conn.close()
        anchor = read_anchor(load_key(create=False), name)
    else:
        anchor = read_anchor(load_key(create=False), str(db))
    if anchor is None or (anchor["valid"] and anchor["seq"] == 0):
        return None
    had = f"the anchor outside the database records {anchor['seq']} audit records (head {anchor['head'][:16]}…)"
    if is_postgres_url(db):
        return f"the audit table was dropped from {name}: {had}", EXIT_RUNTIME
    if not db.exists():
        return f"the database {db} was deleted: {had}", EXIT_RUNTIME
    try:
        size = db.stat().st_size
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        conn.close()
    except sqlite3.Error as exc:
        return f"the database {db} is unreadable ({exc}): {had}", EXIT_RUNTIME
    if size == 0 or not tables:
        return f"the database {db} was emptied (it holds no tables): {had}", EXIT_RUNTIME
    return f"the audit table was dropped from {db}: {had}", EXIT_RUNTIME


def _fail(problems: list[str], count: int, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"ok": False, "records": count, "head": "", "problems": problems}))
    else:
        print(f"audit ledger FAILED verification ({count} records):", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
    return EXIT_RUNTIME


def cmd_verify(args: Any) -> int:
    db = workspace_db(args)
    as_json = getattr(args, "json", False)
    try:
        gone = _missing(db) if not is_postgres_url(db) and not db.exists() else None
        if gone is not None:
            return _fail([gone[0]], 0, as_json)
        ledger, code = _open(args)
        if ledger is None:
            gone = _missing(db) if code == EXIT_OK else None
            if gone is not None:
                return _fail([gone[0]], 0, as_json)
            if code == EXIT_OK:
                print("audit ledger: empty (no records yet)")
            return code
        result = ledger.verify()
    except Exception as exc:  # an unreadable key or database: verification failed, say why
        return _fail([f"cannot verify: {type(exc).__name__}: {exc}"], 0, as_json)
    if not result.ok:
        return _fail(result.problems, result.count, as_json)
    if as_json:
        print(json.dumps({"ok": True, "records": result.count, "head": result.head, "problems": []}))
    else:
        print(f"audit ledger OK: {result.count} records, head {result.head}")
    return EXIT_OK


def _line(rec: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec["ts"]))
    parts = [f"#{rec['seq']}", when, rec["kind"], rec.get("tool") or "-", rec.get("decision") or "-"]
    if rec.get("approval_result"):
        parts.append(f"approval={rec['approval_result']} by {rec.get('approval_by') or '?'}")
    if rec.get("status"):
        parts.append(f"status={rec['status']}")
    if rec.get("reason"):
        parts.append(f"— {rec['reason'][:160]}")
    parts.append(f"[session {rec.get('session_id') or '-'}]")
    return "  ".join(parts)


def cmd_list(args: Any) -> int:
    ledger, code = _open(args)
    if ledger is None:
        return code
    if args.limit is not None and args.limit < 0:
        print("clawkit audit list: --limit must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    records = ledger.records(session=args.session, tool=args.tool, decision=args.decision, kind=args.kind,
                             limit=args.limit or None)
    for rec in records:
        print(json.dumps(rec, ensure_ascii=False, default=str) if args.json else _line(rec))
    if not records and not args.json:
        print("no matching audit records", file=sys.stderr)
    return EXIT_OK
