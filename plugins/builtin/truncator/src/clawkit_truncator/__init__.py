"""clawkit-truncator: tool results that fit the context window.

* ``after_tool_call`` cuts a result over its token budget (default 30% of the
  window) to a head — plus a tail when the end carries the signal — with a marker
  saying how much was removed and how to get the rest; the full output is kept
  in the session database and read back in ranges with ``read_tool_output``.
* ``before_llm_call`` trims old tool results in the request once the history
  fills the window (soft head+tail first, then clearing the oldest), never the
  last few turns.

Cost does not grow with the size of a result: only what can be kept is
tokenized. Any failure falls back to a character budget and says so.
"""

from __future__ import annotations


from clawkit import hook_order, hookimpl
from clawkit.lazy import lazy_exports, lazy_module

# Thin hookimpls: ``clawkit --help`` imports every plugin, so pydantic, the kernel types and
# the output store (sqlite3) load (with :mod:`clawkit_truncator.plugin`) only when a hook runs.
_EXPORTS = dict.fromkeys(
    ("TruncatorConfig", "read_tool_output", "marker_text", "budget_tokens", "message_tokens", "context_window",
     "counter_for", "cut_result", "READ_TOOL", "DEFAULT_READ_CHARS"), "plugin"
)
__all__ = ["TruncatorConfig", "read_tool_output", "marker_text", "budget_tokens", "message_tokens"]


__getattr__ = lazy_exports(__name__, _EXPORTS)
_plugin = lazy_module(__name__, "plugin")  # the implementation, imported by the first hook call


@hookimpl
def register_config(register):
    _plugin().register_config(register)


@hookimpl
@hook_order(20)
def after_tool_call(ctx, call, result):
    """Cut a result over its budget before it enters the context."""
    return _plugin().after_tool_call(ctx, call, result)


@hookimpl
@hook_order(50)
def before_llm_call(ctx, request):
    """Trim old tool results in the request once it fills the window."""
    return _plugin().before_llm_call(ctx, request)


@hookimpl
def register_tools(register, agent):
    """``read_tool_output``: read back parts of a truncated result."""
    _plugin().register_tools(register, agent)
