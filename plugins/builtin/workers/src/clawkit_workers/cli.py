"""``clawkit worker``, ``clawkit submit`` and ``clawkit approvals``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2
PG = ("postgresql://", "postgres://")


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="URL", default=argparse.SUPPRESS,
                   help="the PostgreSQL database the workers share (postgresql://USER@HOST:PORT/DB; or CLAWKIT_DB)")


def register(cli: Any) -> None:
    from clawkit.cli import add_agent_options

    w = cli.command("worker", help="run queued turns of these agents (durable: DBOS workflows in PostgreSQL)")
    w.add_argument("agents", nargs="+", metavar="AGENT.yaml", help="agent files this worker runs turns for")
    w.add_argument("--concurrency", type=int, default=8, help="turns this worker runs at once (default 8)")
    w.add_argument("--executor-id", help="this worker's name in the queue (default HOST-PID-RANDOM)")
    w.add_argument("--dead-after", type=float, default=15.0,
                   help="seconds without a heartbeat after which a worker's turns are recovered by the others (default 15)")
    w.add_argument("--poll", type=float, default=0.1, help="seconds between looks at the queue (default 0.1)")
    w.add_argument("--shutdown-timeout", type=float, default=10.0,
                   help="on SIGTERM, seconds running turns get to finish before the others take them over (default 10)")
    add_agent_options(w)  # --model, --set…, and --db (the PostgreSQL URL the workers share)
    w.set_defaults(handler=cmd_worker)

    s = cli.command("submit", help="enqueue a turn for the workers; prints the turn id (with --wait, the reply)")
    s.add_argument("agent", help="the agent's name (as the workers load it)")
    s.add_argument("text", help="the user's message")
    _db(s)
    s.add_argument("--session", help="continue this session (default: a new one)")
    s.add_argument("--wait", action="store_true", help="wait for the turn and print its reply")
    s.add_argument("--timeout", type=float, default=None, help="with --wait: give up after this many seconds")
    s.add_argument("--json", action="store_true")
    s.add_argument("-a", "--attachment", action="append", default=[], metavar="PATH_OR_URL",
                   help="an image or file sent with the message (repeatable; a URL is fetched by the worker, through its gates)")
    s.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                   help="a model setting for this turn: temperature, max_tokens, top_p, seed, stop… (VALUE read as YAML, as --set's)")
    s.set_defaults(handler=cmd_submit)

    a = cli.command("approvals", help="list and answer approvals of queued turns, from any machine")
    sub = a.add_subparsers(dest="approvals_command", metavar="ACTION")
    ls = sub.add_parser("list", help="pending approvals (or --status STATUS)")
    _db(ls)
    ls.add_argument("--status", default="pending", help="pending (default), approved, denied, expired, or all")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(handler=cmd_approvals_list)
    for verb in ("approve", "deny"):
        v = sub.add_parser(verb, help=f"{verb} a pending request by its id")
        v.add_argument("id")
        _db(v)
        v.add_argument("--by", default="cli", help="who answers (recorded)")
        v.add_argument("--note")
        v.set_defaults(handler=cmd_approvals_answer, approve=verb == "approve")
    a.set_defaults(handler=lambda args: (a.print_help(), EXIT_USAGE)[1])


def _url(args: Any, command: str) -> str | None:
    import os

    url = getattr(args, "db", None) or os.environ.get("CLAWKIT_DB")
    if not url or not str(url).startswith(PG):
        print(f"clawkit {command}: --db must be a PostgreSQL URL (postgresql://USER@HOST:PORT/DB), got {url!r}",
              file=sys.stderr)
        return None
    return str(url)


def cmd_worker(args: Any) -> int:
    from clawkit.cli import overrides_from

    url = _url(args, "worker")
    if url is None:
        return EXIT_USAGE
    args.db = url  # from CLAWKIT_DB too: the sessions go where the queue is (overrides_from → state_db)
    for path in args.agents:
        if not Path(path).is_file():
            print(f"clawkit worker: {path}: no such agent file", file=sys.stderr)
            return EXIT_USAGE
    if args.concurrency < 1:
        print("clawkit worker: --concurrency must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    from .engine import Worker, serve_forever

    worker = Worker(args.agents, url, concurrency=args.concurrency, executor_id=args.executor_id,
                    overrides=overrides_from(args), dead_after=args.dead_after, poll=args.poll)

    def ready() -> None:
        print(f"clawkit worker {worker.executor_id}: ready (agents: {', '.join(worker.configs)}; "
              f"concurrency {args.concurrency})", file=sys.stderr, flush=True)

    try:
        serve_forever(worker, ready, args.shutdown_timeout)
    except Exception as exc:  # the database unreachable, a schema it cannot create…
        from clawkit.storage import redact_url

        print(f"clawkit worker: cannot run on {redact_url(url)}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    return EXIT_OK


def cmd_submit(args: Any) -> int:
    url = _url(args, "submit")
    if url is None:
        return EXIT_USAGE
    from .client import TurnFailed, TurnQueue

    try:
        settings, files = _settings(args.settings), _attachments(args.attachment)
    except ValueError as exc:
        print(f"clawkit submit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        q = TurnQueue(url)
    except Exception as exc:
        from clawkit.storage import redact_url

        print(f"clawkit submit: cannot reach the queue at {redact_url(url)}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    with q:
        if files:
            from .queued import PgBlobStore, stored

            files = stored(files, PgBlobStore(url))  # the bytes where every worker reads them; references queued
        turn = q.submit(args.agent, args.text, session_id=args.session, settings=settings or None,
                        attachments=files or None)
        if not args.wait:
            print(json.dumps({"turn_id": turn}) if args.json else turn)
            return EXIT_OK
        try:
            result = q.result(turn, timeout=args.timeout)
        except TimeoutError as exc:
            print(f"clawkit submit: {exc}", file=sys.stderr)
            return EXIT_RUNTIME
        except TurnFailed as exc:
            print(f"clawkit submit: {exc}", file=sys.stderr)
            return EXIT_RUNTIME
    print(json.dumps({"turn_id": turn, **result}) if args.json else result["reply"])
    return EXIT_OK


def _settings(items: list[str]) -> dict[str, Any]:
    """``--setting temperature=0.2`` … as the model settings a queued turn may carry."""
    from clawkit.cliopts import key_values
    from clawkit.errors import UsageError

    from .queued import check_settings

    try:
        return check_settings(key_values(items, "--setting"))
    except UsageError as exc:
        raise ValueError(str(exc)) from None


def _attachments(items: list[str]) -> list[Any]:
    """Local files read and typed here (a bad one is a usage error before anything is queued); URLs kept."""
    if not items:
        return []
    from clawkit.attachments import DEFAULT_MAX_BYTES, AttachmentError, is_url, read_local, to_block

    out: list[Any] = []
    for item in items:
        try:
            out.append(item if is_url(item) else to_block(read_local(item, DEFAULT_MAX_BYTES), DEFAULT_MAX_BYTES))
        except AttachmentError as exc:
            raise ValueError(str(exc)) from None
    return out


def cmd_approvals_list(args: Any) -> int:
    url = _url(args, "approvals")
    if url is None:
        return EXIT_USAGE
    from .approvals import ensure_schema, list_approvals

    ensure_schema(url)
    rows = list_approvals(url, None if args.status == "all" else args.status)
    if args.json:
        print(json.dumps(rows, default=str))
        return EXIT_OK
    if not rows:
        print(f"no {args.status} approvals", file=sys.stderr)
    for r in rows:
        print(f"{r['id']}  {r['status']:8} {r['agent']}  {r['session_id']}  {r['tool']}({json.dumps(r['arguments'])})  {r['reason']}")
    return EXIT_OK


def cmd_approvals_answer(args: Any) -> int:
    url = _url(args, "approvals")
    if url is None:
        return EXIT_USAGE
    from .approvals import ApprovalError, answer, ensure_schema

    ensure_schema(url)
    try:
        row = answer(url, args.id, args.approve, by=args.by, note=args.note)
    except ApprovalError as exc:
        print(f"clawkit approvals: {exc}", file=sys.stderr)
        return EXIT_USAGE if exc.status == 404 else EXIT_RUNTIME
    print(f"{row['id']} {row['status']}")
    return EXIT_OK
