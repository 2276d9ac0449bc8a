"""The agent side: MCP servers started on first need, their tools kept in the agent's registry."""

from __future__ import annotations

import asyncio
import atexit
import threading
from typing import Any

from clawkit.prompt import PromptContributor, PromptSection

from . import tools as mcptools
from .client import Hub, ServerUnavailable, log
from .config import McpConfig

_STATES: dict[int, "AgentMcp"] = {}
_LOCK = threading.Lock()


def mcp_config(agent_config: Any) -> McpConfig | None:
    cfg = getattr(agent_config, "mcp", None)
    return cfg if isinstance(cfg, McpConfig) and cfg.servers else None


class AgentMcp:
    """One agent's MCP servers: the hub, and which of their tools the registry holds."""

    def __init__(self, config: Any, cfg: McpConfig, agent: Any = None):
        self.config, self.cfg, self.agent = config, cfg, agent
        self.hub = Hub(cfg.servers, config.workspace)
        self.registered: dict[str, list[str]] = {}  # server -> tool names in the registry
        self.synced: dict[str, int] = {}  # server -> id() of the tool list last registered
        self.prompts: dict[tuple[str, str], str] = {}
        self.announced: dict[str, float] = {}  # server -> ``ready`` of the start last reported (mcp.server_started)

    def needed(self) -> list[str]:
        return [s for s in self.cfg.servers if mcptools.may_allow(list(self.config.tools), s)]

    async def prepare(self, ctx: Any) -> None:
        """Start the needed servers (concurrently, once), refresh changed tool lists, sync the registry."""
        conns = [self.hub.connections[s] for s in self.needed()]
        todo = [c for c in conns if c.state not in ("ready",) and c.name not in self.registered or c.changed]
        if todo:
            # every server at once, on the hub's loop: the slowest one's start, not the sum
            outcomes = await asyncio.gather(*(self.hub.run(c.refresh() if c.changed else c.ensure()) for c in todo),
                                            return_exceptions=True)
            for conn, out in zip(todo, outcomes):
                if isinstance(out, ServerUnavailable):
                    ctx.emit("mcp.server_error", server=conn.name, error=str(out))
                elif isinstance(out, Exception):
                    ctx.emit("mcp.server_error", server=conn.name, error=f"{type(out).__name__}: {out}")
                elif conn.ready is not None and conn.started is not None and self.announced.get(conn.name) != conn.ready:
                    self.announced[conn.name] = conn.ready
                    ctx.emit("mcp.server_started", server=conn.name, transport=conn.config.transport, started=conn.started,
                             ready=conn.ready, seconds=round(conn.ready - conn.started, 3), tools=len(conn.tools))
        for conn in conns:
            self.sync(ctx, conn)
        self.mark(ctx)

    def mark(self, ctx: Any) -> None:
        """Tool descriptions of a server not marked ``trusted`` are untrusted content in the prompt."""
        from clawkit import provenance

        for server, names in self.registered.items():
            if self.cfg.servers[server].trusted or not any(ctx.tools.get(n) is not None for n in names):
                continue
            first = provenance.mark_once(ctx.session, source=f"mcp:{server}", detail=f"tool descriptions of MCP server {server}",
                                         kind="mcp-description")
            if first:
                ctx.emit("provenance.untrusted", source=f"mcp:{server}", kind="mcp-description", server=server,
                         reason=provenance.describe(ctx.session))

    def sync(self, ctx: Any, conn: Any) -> None:
        registry = ctx.tools
        if conn.state == "ready" and self.synced.get(conn.name) == id(conn.tools):
            return
        if conn.state != "ready" and conn.name in self.registered:
            return  # keep what it offered: calls say it is down and restart it
        scfg = self.cfg.servers[conn.name]
        if conn.state == "ready":
            new = [mcptools.build(self.hub, conn.name, scfg, t) for t in conn.tools]
            self.pin(ctx, conn.name, new)
            if scfg.resources and getattr(conn.capabilities, "resources", None) is not None:
                new += mcptools.resource_tools(self.hub, conn.name, scfg)
        else:  # never started: explicitly allowlisted names report the failure when called
            prefix = mcptools.server_prefix(conn.name)
            new = [mcptools.unavailable(self.hub, conn.name, scfg, n) for n in self.config.tools
                   if n.startswith(prefix) and not any(ch in n for ch in "*?[")]
        old = set(self.registered.get(conn.name, []))
        for name in old:
            registry.unregister(name)
        for t in new:
            if t.name in registry.tools:
                continue  # a clash with another plugin's tool: theirs stays
            registry.register(t, plugin="mcp")
        self.registered[conn.name] = [t.name for t in new]
        if conn.state == "ready":
            self.synced[conn.name] = id(conn.tools)
        if old and old != {t.name for t in new}:
            ctx.emit("mcp.tools_changed", server=conn.name, added=sorted({t.name for t in new} - old),
                     removed=sorted(old - {t.name for t in new}))

    def pin(self, ctx: Any, server: str, tools: list[Any]) -> None:
        """Each tool's description and schema pinned at first sight; a difference is a change to approve."""
        from . import pins

        for t in tools:
            if t.pin is None:
                continue
            t.change = pins.check(ctx, server, t.remote, *t.pin)
            if t.change is not None:
                ctx.emit("mcp.tool_changed", server=server, tool=t.remote, name=t.name,
                         old_description=t.change["old_description"][:2000], new_description=t.change["new_description"][:2000],
                         old_schema=t.change["old_schema"][:2000], new_schema=t.change["new_schema"][:2000],
                         reason=pins.explain(server, t.remote, t.change))

    def close(self) -> None:
        self.hub.close()


def state_for(config: Any, agent: Any = None, create: bool = True) -> AgentMcp | None:
    """The MCP state of the agent whose config is ``config`` (created on first need)."""
    cfg = mcp_config(config)
    if cfg is None:
        return None
    with _LOCK:
        found = _STATES.get(id(config))
        if found is not None and found.agent is None and agent is not None:
            found.agent = agent
        if found is None and create:
            found = _STATES[id(config)] = AgentMcp(config, cfg, agent)
        return found


async def message_received(ctx: Any) -> None:
    state = state_for(ctx.agent, agent=ctx.runtime)
    if state is not None:
        await state.prepare(ctx)


async def before_llm_call(ctx: Any, request: Any) -> None:
    """Between rounds: a server that announced ``tools/list_changed`` is re-listed and the request's tools rebuilt."""
    state = state_for(ctx.agent, create=False)
    if state is None or not request.tools:
        return
    if any(c.changed or (c.state == "ready" and state.synced.get(c.name) != id(c.tools))
           for c in state.hub.connections.values() if c.name in state.registered):
        await state.prepare(ctx)
        # keep what other plugins chose to send (tool selection); swap in changed MCP tools, add new ones
        visible = {t.name: t.definition for t in ctx.tools.visible()}
        sent = {d.name for d in request.tools}
        request.tools = [visible[d.name] for d in request.tools if d.name in visible] + [
            d for name, d in visible.items() if name not in sent and name.startswith(mcptools.PREFIX)]


def close_closed_agents() -> None:
    """On ``agent.close``: stop the servers of every agent that is closed (their processes end)."""
    with _LOCK:
        done = [k for k, s in _STATES.items() if s.agent is None or getattr(s.agent, "_closed", False)]
        states = [_STATES.pop(k) for k in done]
    for s in states:
        s.close()


@atexit.register
def _close_all() -> None:
    with _LOCK:
        states = list(_STATES.values())
        _STATES.clear()
    for s in states:
        s.close()


class McpPromptContributor(PromptContributor):
    """A server prompt (fetched once, without arguments) as a section of the system prompt."""

    priority = 60

    def __init__(self, server: str, prompt: str, max_chars: int = 4000):
        self.server, self.prompt = server, prompt
        self.id = f"mcp.{server}.{prompt}"
        self.max_chars = max_chars

    async def prepare(self, cctx: Any) -> None:
        if (cctx.state or {}).get("preview"):
            return  # `clawkit prompt`: no server is started for a preview
        state = state_for(cctx.agent)
        if state is None or (self.server, self.prompt) in state.prompts:
            return
        conn = state.hub.connections[self.server]
        try:
            got = await state.hub.run(conn.request("get_prompt", self.prompt))
            text = "\n\n".join(getattr(m.content, "text", "") or "" for m in got.messages).strip()
        except ServerUnavailable as exc:
            text = ""
            log.warning("prompt %s of MCP server %s: %s", self.prompt, self.server, exc)
        state.prompts[(self.server, self.prompt)] = text

    def should_contribute(self, cctx: Any) -> bool:
        state = state_for(cctx.agent, create=False)
        return bool(state and state.prompts.get((self.server, self.prompt)))

    def contribute(self, cctx: Any) -> PromptSection:
        state = state_for(cctx.agent, create=False)
        return PromptSection(heading=f"{self.server}: {self.prompt}", content=state.prompts[(self.server, self.prompt)] if state else "")


def contributors(agent_config: Any) -> list[McpPromptContributor]:
    cfg = mcp_config(agent_config)
    if cfg is None:
        return []
    return [McpPromptContributor(s, p) for s, scfg in cfg.servers.items() for p in scfg.prompts]
