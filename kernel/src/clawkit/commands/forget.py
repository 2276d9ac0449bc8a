"""``clawkit sessions delete ID [ID ...]`` and ``clawkit sessions prune --older-than DURATION``
(docs/forget.md)."""

from __future__ import annotations

import json
import time

from ..cliopts import EXIT_OK, session_store, workspace_config

EXIT_FAILED = 1


def register(sub) -> None:
    d = sub.add_parser("delete", help="delete sessions (and their sub-agent sessions) everywhere they are kept")
    d.add_argument("ids", nargs="+", metavar="ID")
    d.add_argument("--json", action="store_true", help="print what was deleted as JSON")
    d.set_defaults(handler=cmd_delete)
    p = sub.add_parser("prune", help="delete the sessions last updated longer ago than --older-than")
    p.add_argument("--older-than", required=True, metavar="DURATION", help="e.g. 30d, 12h, 90m")
    p.add_argument("--dry-run", action="store_true", help="list the sessions that would be deleted; delete nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_prune)


def _hooks(args, cfg):
    from ..hooks import HookRunner
    from ..plugins import get_plugin_manager

    pm = getattr(args, "pm", None) or get_plugin_manager(disabled=cfg.disabled_plugins() if cfg is not None else ())
    return HookRunner(pm)


def _delete(args, ids: list[str]) -> int:
    import sys

    from ..forget import BusySessions, UnknownSessions, describe, dumps, forget

    cfg = workspace_config(args)
    store = session_store(args)
    try:
        report = forget(store, ids, hooks=_hooks(args, cfg), config=cfg)
    except (UnknownSessions, BusySessions) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        store.close()
    print(dumps(report) if args.json else describe(report))
    if not report.ok:
        if args.json:
            print(describe(report), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def cmd_delete(args) -> int:
    return _delete(args, list(args.ids))


def cmd_prune(args) -> int:
    from ..forget import older_than, parse_duration

    seconds = parse_duration(args.older_than)
    store = session_store(args)
    try:
        ids = older_than(store, seconds, time.time())
        rows = {r["id"]: r for r in store.list(10**9)} if args.dry_run else {}
    finally:
        store.close()
    if args.dry_run:
        if args.json:
            print(json.dumps({"sessions": ids, "dry_run": True}))
        else:
            for sid in ids:
                r = rows.get(sid, {})
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.get("updated", 0)))
                print(f"{sid}  {when}  {r.get('agent', '')}  (would be deleted)")
            print(f"{len(ids)} session(s) older than {args.older_than} (dry run: nothing deleted)")
        return EXIT_OK
    if not ids:
        print(json.dumps({"sessions": [], "deleted": {}, "ok": True}) if args.json
              else f"no session older than {args.older_than}")
        return EXIT_OK
    return _delete(args, ids)
