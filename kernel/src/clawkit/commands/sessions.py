"""``clawkit sessions list | show ID | export ID`` (``delete`` and ``prune``: :mod:`.forget`)."""

from __future__ import annotations

import json
import sys
import time

from ..cliopts import EXIT_OK, add_workspace_options, session_store
from ..errors import UsageError


def register(cli) -> None:
    p = cli.command("sessions", help="list, show and export sessions")
    sub = p.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    ls = sub.add_parser("list", help="recent sessions")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--limit", type=int, default=50)
    ls.set_defaults(handler=cmd_list)
    show = sub.add_parser("show", help="a session's messages, metadata, classification and usage")
    show.add_argument("id")
    show.add_argument("--tree", action="store_true", help="the session's runs and the sub-agent runs they spawned, with tools, usage and outcome")
    show.set_defaults(handler=cmd_show)
    exp = sub.add_parser("export", help="a session as JSON lines")
    exp.add_argument("id")
    exp.set_defaults(handler=cmd_export)
    from .forget import register as register_forget

    register_forget(sub)  # delete, prune
    add_workspace_options(p)


def _get(store, sid: str) -> None:
    if not store.exists(sid):
        raise UsageError(f"no session {sid!r} in {store.path}")


def cmd_list(args) -> int:
    store = session_store(args)
    rows = store.list(args.limit)
    if args.json:
        print(json.dumps(rows))
        return EXIT_OK
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["updated"]))
        label = f"  {r['label']}" if r.get("label") else ""  # the classification's label: what the session is about
        print(f"{r['id']}  {when}  {r['agent']:16} {r['messages']:>3} messages{label}")
    return EXIT_OK


def _cache_and_thinking(store, session_id: str) -> dict[str, int]:
    """Prompt-cache and thinking tokens of the session's model calls (from their ``llm.call`` events;
    docs/anthropic.md), when there were any."""
    totals = {"cache_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0}
    for event in store.events(session_id, "llm.call"):
        usage = (event.get("data") or {}).get("usage") or {}
        for key in totals:
            totals[key] += int(usage.get(key) or 0)
    return {k: v for k, v in totals.items() if v}


def cmd_show(args) -> int:
    store = session_store(args)
    _get(store, args.id)
    if getattr(args, "tree", False):
        from .tree import print_tree

        print_tree(store, args.id)
        return EXIT_OK
    row = store.row(args.id)
    print(f"session {row['id']}  agent {row['agent']}")
    c = store.load_classification(args.id)
    if c:
        print(f"classification: {c.model_dump_json()}")
    meta = store.load_metadata(args.id)
    if meta:
        print(f"metadata: {json.dumps(meta, default=str)}")
    print(f"usage: {json.dumps({**store.usage_totals(args.id), **_cache_and_thinking(store, args.id)})}")
    print()
    for m in store.messages(args.id):
        label = m.role
        if m.metadata.get("compaction_summary"):
            label = "summary"
        if m.metadata.get("interrupted"):
            label += f", interrupted: {m.metadata.get('interrupted_reason', 'unknown')}"
        if m.content:
            print(f"[{label}] {m.content}")
        for call in m.tool_calls:
            print(f"[{label} → tool] {call.name}({json.dumps(call.arguments)})")
        for block in m.blocks:
            if block.type in ("image", "file") and block.sha256:
                from ..attachments import describe

                print(f"[{label} attachment] {describe(block)}")
    return EXIT_OK


def cmd_export(args) -> int:
    store = session_store(args)
    _get(store, args.id)
    for line in store.export_jsonl(args.id):
        sys.stdout.write(line + "\n")
    return EXIT_OK
