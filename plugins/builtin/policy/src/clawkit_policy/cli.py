"""``clawkit audit verify`` and ``clawkit audit list``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkit.cli import add_workspace_options, workspace_db

if TYPE_CHECKING:  # imported by the handlers: ``clawkit --help`` must stay fast
    from .ledger import AuditLedger

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2


def register(cli: Any) -> None:
    p = cli.command("audit", help="inspect and verify the tool-policy audit ledger")
    sub = p.add_subparsers(dest="audit_command", metavar="ACTION")
    v = sub.add_parser("verify", help="re-compute the hash chain; exit 1 if any record was edited, deleted or reordered")
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
    if not db.exists():
        print(f"clawkit audit: no database at {db} (pass --db PATH or --agent AGENT.yaml)", file=sys.stderr)
        return None, EXIT_USAGE
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'policy_audit'").fetchone()
    if not has:
        return None, EXIT_OK
    return AuditLedger(conn, create=False), EXIT_OK


def cmd_verify(args: Any) -> int:
    ledger, code = _open(args)
    if ledger is None:
        if code == EXIT_OK:
            print("audit ledger: empty (no records yet)")
        return code
    result = ledger.verify()
    if getattr(args, "json", False):
        print(json.dumps({"ok": result.ok, "records": result.count, "head": result.head, "problems": result.problems}))
    elif result.ok:
        print(f"audit ledger OK: {result.count} records, head {result.head}")
    else:
        print(f"audit ledger FAILED verification ({result.count} records):", file=sys.stderr)
        for problem in result.problems:
            print(f"  - {problem}", file=sys.stderr)
    return EXIT_OK if result.ok else EXIT_RUNTIME


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
