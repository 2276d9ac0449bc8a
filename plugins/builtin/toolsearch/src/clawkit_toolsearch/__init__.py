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

# The entry point names :mod:`clawkit_toolsearch.select`: the kernel reads its hooks from the source and imports
# it on the first hook call (clawkit.lazyplugin), so ``clawkit --help`` loads none of it.
