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


from clawkit.lazy import lazy_exports

# The entry point names :mod:`clawkit_truncator.plugin`; the kernel reads its hooks from the
# source and imports it on the first hook call (``clawkit --help`` loads no pydantic or sqlite3).
_EXPORTS = dict.fromkeys(
    ("TruncatorConfig", "read_tool_output", "marker_text", "budget_tokens", "message_tokens", "context_window",
     "counter_for", "cut_result", "READ_TOOL", "DEFAULT_READ_CHARS"), "plugin"
)
__all__ = ["TruncatorConfig", "read_tool_output", "marker_text", "budget_tokens", "message_tokens"]

__getattr__ = lazy_exports(__name__, _EXPORTS)
