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


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _keys_for(args: Any, where: str) -> Any:
    """The API keys (``clawkit keys create``, kept by clawkit-serve through ``open_api_keys``) that
    guard a non-loopback bind; refuses (UsageError) when there are none. Fails closed."""
    from pathlib import Path

    from clawkit.errors import UsageError

    db = str(getattr(args, "db", None) or Path(".clawkit") / "state.db")
    keys, count, why = None, 0, ""
    try:
        pm = getattr(args, "pm", None)
        if pm is None:
            from clawkit.plugins import get_plugin_manager

            pm = get_plugin_manager()
        keys = pm.hook.open_api_keys(db=db)
        count = keys.active_count() if keys is not None else 0
    except Exception as exc:  # no keys readable: refuse, as with none
        keys, why = None, f" ({type(exc).__name__}: {exc})"
    if keys is None or count == 0:
        raise UsageError(f"--http {where}: refused: serving beyond loopback needs API keys and {db} has none{why}; "
                         "create one with `clawkit keys create --name NAME` (clawkit-serve), or bind 127.0.0.1")
    return keys


class BearerKeys:
    """ASGI middleware: every request needs ``Authorization: Bearer <key>`` of a key that may run turns."""

    def __init__(self, app: Any, keys: Any):
        self.app, self.keys = app, keys

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            scheme, _, token = header.partition(" ")
            key = None
            if scheme.lower() == "bearer" and token.strip():
                try:
                    key = self.keys.authenticate(token.strip())
                except Exception:  # fails closed
                    key = None
            if key is None or not key.can("run"):
                from starlette.responses import JSONResponse

                status = 401 if key is None else 403
                message = "missing or invalid API key" if key is None else f"key {key.id} may not run turns"
                await JSONResponse({"error": {"message": message, "code": status}}, status_code=status,
                                   headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        await self.app(scope, receive, send)


def serve(args: Any) -> int:
    from clawkit.errors import UsageError

    host, port = "127.0.0.1", 0
    keys = None
    if args.http:
        host, _, raw = args.http.rpartition(":")
        try:
            port = int(raw)
        except ValueError:
            raise UsageError(f"--http {args.http!r}: expected HOST:PORT, e.g. 127.0.0.1:8931") from None
        host = host or "127.0.0.1"
        if not _is_loopback(host):
            keys = _keys_for(args, args.http)  # before the agent starts: a refused bind leaves nothing behind
    server = AgentServer(args)
    try:
        mcp = server.build()
        if args.http:
            auth = " (API keys required)" if keys is not None else ""
            print(f"clawkit mcp serve: agent {server.agent.config.name!r} at http://{host}:{port}/mcp{auth}",
                  file=sys.stderr, flush=True)
            if keys is None:
                mcp.run("streamable-http", host=host, port=port)
            else:
                import uvicorn

                app = BearerKeys(mcp.streamable_http_app(host=host), keys)
                uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
        else:
            mcp.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
