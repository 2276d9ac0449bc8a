"""clawkit-mcp: Model Context Protocol both ways.

* MCP servers declared under ``mcp.servers`` in the agent YAML (stdio ``command`` or
  streamable HTTP ``url``) give tools named ``mcp__<server>__<tool>``; the agent's
  ``tools:`` allowlist (globs) decides which are shown. They are ``guarded`` by default,
  pass every ``before_tool_call`` gate, and their results are untrusted content.
* Servers start on the first turn that can use them, are reused across turns, restarted
  after a crash (with backoff) and stopped on ``Agent.close()`` and at exit.
* ``clawkit mcp list AGENT.yaml`` shows servers, state and tools; ``clawkit mcp serve
  AGENT.yaml`` exposes the agent itself as an MCP server (stdio or streamable HTTP).
"""

from __future__ import annotations

from clawkit import hook_order, hookimpl, on_events
from clawkit.lazy import loaded

# Thin hookimpls: ``clawkit --help`` imports every plugin; the mcp SDK loads only when used.


@hookimpl
def register_config(register):
    from .config import McpConfig

    register("mcp", McpConfig, top_level=True)


@hookimpl
@hook_order(25)
def message_received(ctx):
    if getattr(getattr(ctx.agent, "mcp", None), "servers", None) and not ctx.state.get("preview"):  # `clawkit prompt` starts no server
        from .plugin import message_received as impl

        return impl(ctx)
    return None


@hookimpl
@hook_order(47)
def before_llm_call(ctx, request):
    if getattr(getattr(ctx.agent, "mcp", None), "servers", None) and not ctx.state.get("preview"):
        from .plugin import before_llm_call as impl

        return impl(ctx, request)
    return None


@hookimpl
@hook_order(25)
def before_tool_call(ctx, call):
    """A tool whose description or schema changed since it was first seen needs approval (see pins)."""
    if not call.name.startswith("mcp__"):
        return None
    tool = ctx.tools.get(call.name) if ctx.tools is not None else None
    change = getattr(tool, "change", None)
    if change is None:
        return None
    from clawkit.types import Decision

    from .pins import explain

    return Decision(action="require_approval", reason=explain(tool.server, tool.remote, change))


@hookimpl
def register_tools(register, agent):
    """Each declared server's tools arrive at run time: declare ``mcp__<server>__*`` so the
    allowlist accepts their names now (the allowlist still decides which are shown and run)."""
    servers = getattr(getattr(agent, "mcp", None), "servers", None) or {}
    group = getattr(register, "group", None)
    if group is not None:
        for name in servers:
            group(f"mcp__{name}", [f"mcp__{name}__*"])


@hookimpl
def register_prompt_contributor(register, agent):
    if getattr(getattr(agent, "mcp", None), "servers", None):
        from .plugin import contributors

        for c in contributors(agent):
            register(c)


@hookimpl
@on_events("agent.close")
def on_event(event):
    if event.type == "agent.close":
        plugin = loaded("clawkit_mcp.plugin")
        if plugin is not None:  # nothing was started when the module was never loaded
            plugin.close_closed_agents()


@hookimpl
def register_commands(cli):
    from .commands import register

    register(cli)
