"""clawkit-compaction: long sessions stay within the context window.

Before each model call (``before_llm_call``), when the request would exceed the
window minus a reserve, the older turns are summarized by a model (the agent's
own, or a cheaper one configured as ``model``) and replaced by the summary; the
most recent turns stay verbatim. The new history is persisted (the summary is a
message with ``metadata.compaction_summary``, visible in ``clawkit sessions
show``) and ``compaction.before`` / ``compaction.after`` events carry the token
counts. A context-overflow error from the provider (``llm_call_failed``)
compacts harder and retries once. If summarizing fails, the older turns are
dropped instead, and the history says so.
"""

from __future__ import annotations


from clawkit import hook_order, hookimpl
from clawkit.lazy import lazy_exports, lazy_module

# Thin hookimpls: ``clawkit --help`` imports every plugin, so pydantic and the kernel
# types load (with :mod:`clawkit_compaction.plugin`) only when a hook first runs.
_EXPORTS = {"CompactionConfig": "plugin", "compact": "plugin", "SUMMARY_FLAG": "compactor"}
__all__ = ["CompactionConfig", "compact", "SUMMARY_FLAG"]


__getattr__ = lazy_exports(__name__, _EXPORTS)
_plugin = lazy_module(__name__, "plugin")  # the implementation, imported by the first hook call


@hookimpl
def register_config(register):
    _plugin().register_config(register)


@hookimpl
@hook_order(60)
def before_llm_call(ctx, request):
    """Compact when the request would exceed the window minus the reserve (an awaitable then;
    the usual call, far below the limit, returns None without a coroutine)."""
    over = _plugin().over_limit(ctx, request)
    return None if over is None else _plugin().compact_over_limit(ctx, request, *over)


@hookimpl
async def llm_call_failed(ctx, request, error):
    """Compact harder and retry once when the provider says the context overflowed."""
    return await _plugin().llm_call_failed(ctx, request, error)
