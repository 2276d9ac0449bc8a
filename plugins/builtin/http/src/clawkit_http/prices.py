"""Per-token prices from litellm's bundled price table, read as data (litellm is never imported).

The table is a ~3 MB JSON file; parsing all of it costs more than a whole model
call, so only the entry for the model asked about is decoded (found by its quoted
key), and the answer is cached per model.
"""

from __future__ import annotations

import functools

from clawkit.capabilities import lookup
from clawkit.capabilities import table_text as _table_text  # noqa: F401  (one cached read per process)


@functools.cache
def price_per_token(model: str, wire_format: str) -> tuple[float, float] | None:
    """``(input, output)`` USD per token for ``model`` (``gpt-4o-mini``, ``openai/gpt-4o-mini``…)."""
    bare = model.split("/", 1)[1] if "/" in model else model
    for key in dict.fromkeys((model, bare, f"{wire_format}/{bare}")):
        entry = lookup(key)
        if entry and ("input_cost_per_token" in entry or "output_cost_per_token" in entry):
            return float(entry.get("input_cost_per_token") or 0), float(entry.get("output_cost_per_token") or 0)
    return None
