"""``clawkit serve`` and ``clawkit keys create|list|revoke``."""

from __future__ import annotations

import ipaddress
import json
import sys
import time
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2


def register(cli: Any) -> None:
    from clawkit.cli import add_agent_options

    p = cli.command("serve", help="serve agents over HTTP: OpenAI-compatible API, native API, approvals, /panel")
    p.add_argument("agents", nargs="+", metavar="AGENT.yaml", help="agent files (their names are the API's model names)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8787, help="port (default 8787; 0 picks a free one)")
    p.add_argument("--dev", action="store_true",
                   help="development only: with no API keys, serve without auth (refused unless bound to loopback)")
    p.add_argument("--max-body", type=int, default=1_048_576, help="largest request body in bytes (default 1 MiB)")
    p.add_argument("--rate-limit", type=int, default=120, help="requests per minute per key unless the key sets its own (0 = none)")
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="allow browser calls from this origin (repeatable; CORS is off by default)")
    p.add_argument("--approval-timeout", type=float, default=3600.0,
                   help="seconds an approval request waits before it is denied (default 3600)")
    p.add_argument("--shutdown-timeout", type=float, default=30.0,
                   help="seconds running turns get to finish on shutdown (default 30)")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds a connection has to send a request's headers, once opened or after a response (default 10)")
    p.add_argument("--body-timeout", type=float, default=30.0,
                   help="seconds a request body may take to arrive; a slower one gets 408 (default 30)")
    p.add_argument("--max-connections", type=int, default=None,
                   help="connections at once; past it the oldest idle one is closed (default: what the open-file limit leaves)")
    p.add_argument("--proxy-headers", action="store_true", help="trust X-Forwarded-* from --forwarded-allow-ips")
    p.add_argument("--forwarded-allow-ips", default="127.0.0.1", help="proxies trusted for X-Forwarded-* (default 127.0.0.1)")
    add_agent_options(p)
    p.set_defaults(handler=cmd_serve)

    k = cli.command("keys", help="manage the API keys of clawkit serve (stored hashed in the state database)")
    sub = k.add_subparsers(dest="keys_command", metavar="ACTION")
    c = sub.add_parser("create", help="create a key and print it once")
    c.add_argument("--name", required=True, help="who or what uses the key")
    c.add_argument("--role", default="full", choices=("full", "approver", "read"),
                   help="full: run turns + approve + read; approver: approve + read; read: read-only (default full)")
    c.add_argument("--agent", action="append", default=[], metavar="NAME", help="limit the key to this agent (repeatable; default all)")
    c.add_argument("--rate-limit", type=int, help="requests per minute for this key (default: the server's)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(handler=cmd_keys_create)
    ls = sub.add_parser("list", help="list keys (never their secrets)")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(handler=cmd_keys_list)
    r = sub.add_parser("revoke", help="revoke a key by its id")
    r.add_argument("id")
    r.set_defaults(handler=cmd_keys_revoke)
    k.set_defaults(handler=lambda args: (k.print_help(), EXIT_USAGE)[1])


def _db(args: Any) -> str:
    """``--db`` (before or after the command), else the working directory's state database.
    (``--agent`` here names agents a key is scoped to, not an agent file.)"""
    return str(getattr(args, "db", None) or Path(".clawkit") / "state.db")


def _keys(args: Any):
    from .keys import KeyStore, connect

    return KeyStore(connect(_db(args)))


def cmd_keys_create(args: Any) -> int:
    try:
        secret, key = _keys(args).create(args.name, role=args.role, agents=args.agent or None, rate_per_minute=args.rate_limit)
    except ValueError as exc:
        print(f"clawkit keys create: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps({"key": secret, **key.public()}))
    else:
        print(secret)
        print(f"key {key.id} ({key.role}, agents: {', '.join(key.agents)}) — shown once; store it now", file=sys.stderr)
    return EXIT_OK


def cmd_keys_list(args: Any) -> int:
    keys = _keys(args).list()
    if args.json:
        print(json.dumps([k.public() for k in keys]))
        return EXIT_OK
    if not keys:
        print("no keys (create one with: clawkit keys create --name NAME)", file=sys.stderr)
    for k in keys:
        state = "revoked " + time.strftime("%Y-%m-%d", time.localtime(k.revoked)) if k.revoked else "active"
        print(f"{k.id}  {k.name:20} {k.role:8} agents={','.join(k.agents)}  {state}")
    return EXIT_OK


def cmd_keys_revoke(args: Any) -> int:
    if not _keys(args).revoke(args.id):
        print(f"clawkit keys revoke: no active key {args.id}", file=sys.stderr)
        return EXIT_USAGE
    print(f"revoked {args.id}")
    return EXIT_OK


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: Any) -> int:
    from clawkit.cli import overrides_from

    for path in args.agents:
        if not Path(path).is_file():
            print(f"clawkit serve: {path}: no such agent file", file=sys.stderr)
            return EXIT_USAGE
    if _keys(args).active_count() == 0:
        if not args.dev:
            print("clawkit serve: no API keys: create one with `clawkit keys create --name NAME` "
                  "(or, on loopback for development only, pass --dev)", file=sys.stderr)
            return EXIT_USAGE
        if not is_loopback(args.host):
            print(f"clawkit serve: --dev without keys is refused on {args.host}: bind to 127.0.0.1 or create a key",
                  file=sys.stderr)
            return EXIT_USAGE
    elif args.dev:
        print("clawkit serve: keys exist, so --dev is ignored: every request needs a key", file=sys.stderr)
    from .app import ServeOptions, build, uvicorn_server

    dev = args.dev and _keys(args).active_count() == 0
    options = ServeOptions(max_body=args.max_body, rate_per_minute=args.rate_limit, cors_origins=args.cors_origin,
                           dev=dev, shutdown_timeout=args.shutdown_timeout, header_timeout=args.header_timeout,
                           body_timeout=args.body_timeout, max_connections=args.max_connections)
    app = build(args.agents, _db(args), options, overrides_from(args), approval_timeout=args.approval_timeout)
    server = uvicorn_server(app, host=args.host, port=args.port, log_level="info" if args.verbose else "warning",
                            proxy_headers=args.proxy_headers, forwarded_allow_ips=args.forwarded_allow_ips,
                            access_log=args.verbose, server_header=False)
    _announce(server, app, dev)
    import signal

    # uvicorn re-raises the signal that stopped it once it has shut down; what it re-raises into
    # is what was installed before it ran: a graceful stop then ends with exit 0, not death by signal
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    server.run()
    return EXIT_OK


def _announce(server: Any, app: Any, dev: bool) -> None:
    """Print the bound address once uvicorn listens (port 0 picks one; tests read this line)."""
    original = server.startup

    async def startup(sockets=None):
        await original(sockets=sockets)
        for s in server.servers:
            for sock in s.sockets:
                host, port = sock.getsockname()[:2]
                names = ", ".join(app.state.server.runner.agent_names())
                print(f"clawkit serve: http://{host}:{port} (agents: {names}; panel: /panel){' [dev: no auth]' if dev else ''}",
                      file=sys.stderr, flush=True)

    server.startup = startup
