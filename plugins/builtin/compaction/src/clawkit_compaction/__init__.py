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

# The entry point names :mod:`clawkit_compaction.plugin`: the kernel reads its hooks from the source and imports
# it on the first hook call (clawkit.lazyplugin), so ``clawkit --help`` loads none of it.
from clawkit.lazy import lazy_exports

_EXPORTS = {"CompactionConfig": "plugin", "compact": "plugin", "SUMMARY_FLAG": "compactor"}
__all__ = ["CompactionConfig", "compact", "SUMMARY_FLAG"]

__getattr__ = lazy_exports(__name__, _EXPORTS)
