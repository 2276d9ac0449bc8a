"""clawkit-toolsearch: with many tools, each request carries only the relevant ones (clawhive §8.1).

When the tools offered in a request are more than ``max_tools`` or their definitions take
more than ``share`` of the context window, only the ``top_k`` most relevant to the
current request are sent: first the tools already called in the session or brought in by
``find_tools`` (the most recent ones), then the most relevant — ranked by BM25 (SQLite FTS5,
Porter stemming) over each tool's name, description and argument names, fused with an
embedding provider's ranking — up to ``top_k`` in all, plus ``find_tools`` itself. ``find_tools(query)`` lets the model search the allowed tools and bring others
into the next request. The agent's ``tools:`` allowlist still decides what may run:
retrieval only decides which allowed definitions are *sent*; ``find_tools`` searches
allowed tools only, and must itself be allowed (``tools: [..., find_tools]``).

Each selection is a ``context.tools_selected`` event with the tools and tokens before
and after, so nothing is dropped silently.
"""

from __future__ import annotations

from clawkit import hook_order, hookimpl
from clawkit.lazy import lazy_module

_select = lazy_module(__name__, "select")  # imported by the first hook call


@hookimpl
def register_config(register):
    from .select import ToolSearchConfig

    register("toolsearch", ToolSearchConfig)


@hookimpl
def register_tools(register, agent):
    """``find_tools`` (offered only when the allowlist admits it)."""
    from .select import find_tools

    register(find_tools)


@hookimpl(tryfirst=True)
@hook_order(45)
def before_llm_call(ctx, request):
    """Send only the relevant tool definitions when there are too many (first, so that the plugins
    measuring the request — compaction — see the definitions actually sent)."""
    _select().select_tools(ctx, request)
