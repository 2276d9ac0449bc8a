"""Which tool definitions a request carries, and ``find_tools``."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clawkit import hook_order, hookimpl
from clawkit.tools import tool

from . import vectors
from .index import index_for

ACTIVE = "toolsearch.active"  # session metadata: tools brought in by find_tools
FIND = "find_tools"


class ToolSearchConfig(BaseModel):
    """``plugins.toolsearch`` in the agent YAML."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_tools: int = Field(40, ge=1, description="more tools than this in a request → send only the relevant ones")
    share: float = Field(0.15, gt=0, le=1, description="tool definitions over this share of the window → retrieval")
    top_k: int = Field(8, ge=1, le=64, description="tools chosen by relevance per request")
    embeddings: str | None = Field("local", description="embedding provider (registered through register_embedding_provider) "
                                   "whose ranking is fused with BM25; null for BM25 alone")
    find_limit: int = Field(5, ge=1, le=50, description="most tools find_tools returns (and brings into the next requests)")


def _config(ctx: Any) -> ToolSearchConfig:
    cfg = ctx.plugin_config("toolsearch")
    return cfg if isinstance(cfg, ToolSearchConfig) else ToolSearchConfig()


def _key(defs: list[Any]) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    return tuple((d.name, d.description, tuple((d.parameters or {}).get("properties", {}))) for d in defs)


_sizes: dict[int, tuple[Any, int]] = {}  # id(ToolDef) -> (the def, its JSON size): definitions rarely change


def _size(d: Any) -> int:
    hit = _sizes.get(id(d))
    if hit is not None and hit[0] is d:
        return hit[1]
    n = len(json.dumps(d.openai_schema(), separators=(",", ":")))
    if len(_sizes) > 20_000:
        _sizes.clear()
    _sizes[id(d)] = (d, n)
    return n


# the identities of a request's definitions -> (those definitions, held: their ids stay theirs; ≈ tokens): the
# kernel offers the same definitions on every model call of an agent, in a new list each time
_totals: dict[tuple[int, ...], tuple[list[Any], int]] = {}


def def_tokens(defs: list[Any]) -> int:
    """≈ tokens of the definitions as sent (JSON, ~4 characters a token)."""
    key = tuple(map(id, defs))
    hit = _totals.get(key)
    if hit is not None:
        return hit[1]
    tokens = sum(_size(d) for d in defs) // 4
    if len(_totals) >= 1024:
        _totals.clear()
    _totals[key] = (list(defs), tokens)
    return tokens


# id(agent config) -> (agent config, its plugins, (section, the agent's window)): looked up once per agent
# (config objects are not changed once loaded; a reloaded config is a new object, and so is a replaced ``plugins``)
_AGENTS: dict[int, tuple[Any, Any, tuple[ToolSearchConfig, int]]] = {}


def _settings(ctx: Any) -> tuple[ToolSearchConfig, int]:
    """``(section, window)``: :func:`_config` and the agent's context window."""
    agent = ctx.agent
    hit = _AGENTS.get(id(agent))
    if hit is not None and hit[0] is agent and hit[1] is getattr(agent, "plugins", None):
        return hit[2]
    out = (_config(ctx), int(agent.limits.context_window))
    if len(_AGENTS) >= 256:
        _AGENTS.clear()
    _AGENTS[id(agent)] = (agent, getattr(agent, "plugins", None), out)
    return out


def _query(request: Any) -> str:
    for m in reversed(request.messages):
        if m.role == "user" and not m.metadata.get("kernel_note"):
            return m.content or ""
    return ""


def _used(ctx: Any) -> list[str]:
    """Tools found with find_tools or called in the session, most recent last."""
    used = [c.name for m in ctx.session.history if m.role == "assistant" for c in m.tool_calls]
    return list(dict.fromkeys([*(ctx.session.get(ACTIVE) or []), *used]))


def search(ctx: Any, cfg: ToolSearchConfig, key: tuple, query: str, k: int) -> list[str]:
    """BM25, combined with the embedding provider's similarities when one is available (``vectors.hybrid``)."""
    index = index_for(key)
    emb = vectors.provider(ctx.hooks, cfg.embeddings) if cfg.embeddings and query.strip() else None
    if emb is None:
        return index.search(query, k)
    try:
        return vectors.hybrid(emb, key, query, index.scores(query), k)
    except Exception as exc:
        ctx.emit("context.tools_embedding_failed", error=f"{type(exc).__name__}: {exc}"[:300])
        return index.search(query, k)


@hookimpl(tryfirst=True, specname="before_llm_call")
@hook_order(45)
def select_tools(ctx: Any, request: Any) -> None:
    """``before_llm_call``: send only the relevant tool definitions when there are too many (first,
    so that the plugins measuring the request — compaction — see the definitions actually sent)."""
    defs = request.tools  # (replaced below, never changed in place: no copy)
    if not defs:
        return
    cfg, window = _settings(ctx)
    if not cfg.enabled:
        return
    window = int(request.metadata.get("context_window") or window)
    before = def_tokens(defs)
    if len(defs) <= cfg.max_tools and before <= cfg.share * window:
        return
    searchable = [d for d in defs if d.name != FIND]
    ranked = search(ctx, cfg, _key(searchable), _query(request), 2 * cfg.top_k)
    offered = {d.name for d in defs}
    pinned = [n for n in _used(ctx) if n in offered and n != FIND][-cfg.top_k:]  # used or found: they stay
    keep = set(pinned)
    for name in ranked:  # then the most relevant, up to top_k in all
        if len(keep) >= cfg.top_k:
            break
        keep.add(name)
    keep.add(FIND)
    request.tools = [d for d in defs if d.name in keep]
    ctx.emit(
        "context.tools_selected",
        offered=len(defs), sent=len(request.tools), tokens_before=before, tokens_after=def_tokens(request.tools),
        ranked=ranked, find_tools=any(d.name == FIND for d in defs),
    )


# what it returns are this agent's own tool definitions; an MCP server's descriptions among them marked the
# session when they were registered (clawkit-mcp), so showing them again brings in nothing new
@tool(trusted_output=True)
def find_tools(query: str, ctx: Any = None) -> str:
    """Search every tool you may use for ones that fit a need; the ones found are offered from your next step on.

    Args:
        query: what the tool should do, in a few words
    """
    cfg = _config(ctx)
    allowed = [t.definition for t in ctx.tools.visible() if t.name != FIND]
    found = search(ctx, cfg, _key(allowed), query, cfg.find_limit)
    if not found:
        return f"No tool matches {query!r}."
    active = list(dict.fromkeys([*(ctx.session.get(ACTIVE) or []), *found]))[-200:]
    ctx.session.set(ACTIVE, active)
    by_name = {d.name: d for d in allowed}
    lines = [f"- {n}: {by_name[n].description.splitlines()[0] if by_name[n].description else ''}" for n in found]
    return "Tools now available (call them directly):\n" + "\n".join(lines)


@hookimpl
def register_config(register):
    register("toolsearch", ToolSearchConfig)


@hookimpl
def register_tools(register, agent):
    """``find_tools`` (offered only when the allowlist admits it)."""
    register(find_tools)
