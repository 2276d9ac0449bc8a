"""Per-token prices from litellm's bundled price table, read as data (litellm is never imported).

The table is a ~3 MB JSON file; parsing all of it costs more than a whole model
call, so only the entry for the model asked about is decoded (found by its quoted
key), and the answer is cached per model.
"""

from __future__ import annotations

import functools
import json

TABLE = "model_prices_and_context_window_backup.json"


@functools.cache
def _table_text() -> str | None:
    from clawkit.tokens import litellm_package_dir

    base = litellm_package_dir()
    if base is None:
        return None
    try:
        return (base / TABLE).read_text(encoding="utf-8")
    except OSError:
        return None


def _entry(text: str, key: str) -> dict | None:
    at = text.find(json.dumps(key) + ":")
    if at < 0:
        return None
    start = text.find("{", at)
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@functools.cache
def price_per_token(model: str, wire_format: str) -> tuple[float, float] | None:
    """``(input, output)`` USD per token for ``model`` (``gpt-4o-mini``, ``openai/gpt-4o-mini``…)."""
    text = _table_text()
    if text is None:
        return None
    bare = model.split("/", 1)[1] if "/" in model else model
    for key in dict.fromkeys((model, bare, f"{wire_format}/{bare}")):
        entry = _entry(text, key)
        if entry and ("input_cost_per_token" in entry or "output_cost_per_token" in entry):
            return float(entry.get("input_cost_per_token") or 0), float(entry.get("output_cost_per_token") or 0)
    return None
