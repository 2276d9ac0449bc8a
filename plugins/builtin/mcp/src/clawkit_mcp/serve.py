"""``clawkit mcp serve``: the agent as an MCP server with one tool — a task in, the reply out.

Every turn runs through the agent's plugins as in ``clawkit run`` (policy, shield, ledger…).
An MCP client cannot be asked for approval, so approval requests are denied unless
``mcp.serve.approvals: allow``; the result names each denied call and why.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from .config import McpConfig


class AgentServer:
    """The agent behind the MCP tool: turns serialised on one agent, denials reported per turn."""

    def __init__(self, args: Any):
        from clawkit.cli import overrides_from
        from clawkit.runtime import open_agent

        self.agent = open_agent(args.agent, overrides_from(args), approver=self.approve)
        self.agent.channel = "mcp"  # its own channel: elevation set elsewhere (chat, run) is not used here
        cfg = getattr(self.agent.config, "mcp", None)
        self.settings = (cfg if isinstance(cfg, McpConfig) else McpConfig()).serve
        self.denied: dict[str, list[dict[str, str]]] = {}
        self._lock = asyncio.Lock()

    def approve(self, call: Any, reason: str, ctx: Any) -> bool:
        if self.settings.approvals == "allow":
            return True
        self.denied.setdefault(ctx.run_id, []).append({"tool": call.name, "reason": reason})
        return False

    async def ask(self, task: str, session_id: str | None = None) -> dict[str, Any]:
        from mcp.server.mcpserver.exceptions import ToolError

        from clawkit.errors import ProviderError

        if session_id and not self.agent.store.exists(session_id):
            raise ToolError(f"unknown session_id {session_id!r}: omit it to start a new session")
        async with self._lock:
            try:
                result = await self.agent.turn(task, session_id=session_id)
            except ProviderError as exc:
                raise ToolError(f"the agent's model call failed: {exc}") from None
        out: dict[str, Any] = {"reply": result.reply, "session_id": result.session_id, "stop_reason": result.stop_reason}
        denied = self.denied.pop(result.run_id, [])
        if denied:
            out["denied_approvals"] = denied
            out["note"] = ("This MCP server runs non-interactively: tool calls that need approval were denied "
                           f"({', '.join(d['tool'] for d in denied)}). The server's operator can set "
                           "mcp.serve.approvals: allow for trusted clients.")
        return out

    def build(self):
        from mcp.server.mcpserver import MCPServer
        from mcp.types import ToolAnnotations

        cfg = self.agent.config
        server = MCPServer(f"clawkit-{cfg.name}", instructions=f"The clawkit agent {cfg.name!r}.")
        about = (cfg.instructions.strip().splitlines() or [""])[0][:200]

        async def ask_agent(task: str, session_id: str | None = None) -> dict[str, Any]:
            return await self.ask(task, session_id)

        ask_agent.__doc__ = (
            f"Give the agent {cfg.name!r} a task and get its reply. {about}\n\n"
            "Args:\n    task: what to do, in plain language\n"
            "    session_id: continue an earlier conversation (the session_id of a previous reply)"
        )
        server.add_tool(ask_agent, name=self.settings.tool_name,
                        annotations=ToolAnnotations(readOnlyHint=False, openWorldHint=True))
        return server

    def close(self) -> None:
        self.agent.close()


def serve(args: Any) -> int:
    from clawkit.errors import UsageError

    host, port = "127.0.0.1", 0
    if args.http:
        host, _, raw = args.http.rpartition(":")
        try:
            port = int(raw)
        except ValueError:
            raise UsageError(f"--http {args.http!r}: expected HOST:PORT, e.g. 127.0.0.1:8931") from None
        host = host or "127.0.0.1"
    server = AgentServer(args)
    try:
        mcp = server.build()
        if args.http:
            print(f"clawkit mcp serve: agent {server.agent.config.name!r} at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
            mcp.run("streamable-http", host=host, port=port)
        else:
            mcp.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
