"""``clawkit mcp list AGENT.yaml`` and ``clawkit mcp serve AGENT.yaml``."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def register(cli) -> None:
    from clawkit.cli import add_agent_options

    p = cli.command("mcp", help="MCP: list an agent's MCP servers and tools, or serve the agent as an MCP server")
    sub = p.add_subparsers(dest="mcp_command", metavar="ACTION")
    ls = sub.add_parser("list", help="start the agent's MCP servers and show their state and tools")
    ls.add_argument("agent", help="agent YAML file")
    ls.add_argument("--json", action="store_true")
    add_agent_options(ls)
    ls.set_defaults(handler=cmd_list)
    sv = sub.add_parser("serve", help="expose the agent as an MCP server (one tool: a task in, the reply out)")
    sv.add_argument("agent", help="agent YAML file")
    sv.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    add_agent_options(sv)
    sv.set_defaults(handler=cmd_serve)

    def usage(args) -> int:
        p.print_help(sys.stderr)
        return 2

    p.set_defaults(handler=usage)


def _load(args):
    from clawkit.cli import overrides_from
    from clawkit.errors import UsageError
    from clawkit.runtime import load_config

    if not Path(args.agent).is_file():
        raise UsageError(f"{args.agent}: no such agent file")
    cfg, _ = load_config(args.agent, overrides_from(args), pm=getattr(args, "pm", None))
    return cfg


def cmd_list(args) -> int:
    from .client import Hub
    from .plugin import mcp_config
    from .tools import build, tool_name

    cfg = _load(args)
    mcp = mcp_config(cfg)
    if mcp is None:
        print(f"{args.agent}: no MCP servers (mcp.servers is empty)", file=sys.stderr)
        return 0
    hub = Hub(mcp.servers, cfg.workspace)
    from clawkit.tools import ToolRegistry

    allow = ToolRegistry(cfg.tools)
    rows = []
    try:
        hub.run_sync(hub.start_all())  # concurrently; a server that fails keeps its error, the others go on
        for name, conn in hub.connections.items():
            tools = []
            for t in conn.tools:
                d = build(hub, name, mcp.servers[name], t).definition
                tools.append({"name": tool_name(name, t.name), "risk": d.risk.value, "allowed": allow.allowed(d.name),
                              "description": (t.description or "").strip().splitlines()[0] if t.description else ""})
            rows.append({"server": name, "transport": conn.config.transport, "state": conn.state, "error": conn.error,
                         "started": conn.started, "ready": conn.ready,
                         "start_seconds": round(conn.ready - conn.started, 3) if conn.ready and conn.started else None,
                         "tools": tools})
    finally:
        hub.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0 if all(r["state"] == "ready" for r in rows) else 1
    for r in rows:
        took = f" in {r['start_seconds']:.2f} s" if r["start_seconds"] is not None else ""
        print(f"{r['server']} ({r['transport']}): {r['state']}{took}" + (f" — {r['error']}" if r["error"] else ""))
        for t in r["tools"]:
            mark = "allowed" if t["allowed"] else "not in tools:"
            print(f"  {t['name']:48} {t['risk']:8} {mark:14} {t['description'][:60]}")
    return 0 if all(r["state"] == "ready" for r in rows) else 1


def cmd_serve(args) -> int:
    from .serve import serve

    return serve(args)
