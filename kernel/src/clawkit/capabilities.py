"""What a model can do: native tool calling, images, JSON-schema answers.

``model_capabilities(model_config)`` answers from the model mapping first
(``supports_tools``, ``supports_vision``, ``supports_json_schema``), then from litellm's
bundled model table, read as data (litellm is never imported; only the model's own entry
is decoded): ``supports_function_calling``, ``supports_vision``,
``supports_response_schema``. A model neither names is assumed to call tools natively (the
behaviour of every OpenAI-compatible server) and to take neither images nor JSON schemas.

The kernel uses ``supports_tools``: a model without native tool calling is sent no
``tools`` and gets the text protocol of :mod:`clawkit.tooltext` instead of a provider error.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass
from typing import Any

TABLE = "model_prices_and_context_window_backup.json"
TABLE_KEYS = {"supports_tools": "supports_function_calling", "supports_vision": "supports_vision",
              "supports_json_schema": "supports_response_schema"}
DEFAULTS = {"supports_tools": True, "supports_vision": False, "supports_json_schema": False}


@dataclass(frozen=True)
class Capabilities:
    supports_tools: bool = True
    supports_vision: bool = False
    supports_json_schema: bool = False
    source: str = "default"  # "config", "litellm table", "default" (or a mix, e.g. "config+litellm table")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@functools.cache
def table_text() -> str | None:
    """litellm's bundled model table as text, read once per process (None without litellm).

    Shared by every reader of the table (capability flags here, prices in clawkit-http): it is a
    ~3 MB file, and only the entries asked about are ever decoded."""
    from .tokens import litellm_package_dir

    base = litellm_package_dir()
    if base is None:
        return None
    try:
        return (base / TABLE).read_text(encoding="utf-8")
    except OSError:
        return None


@functools.cache
def lookup(key: str) -> dict[str, Any] | None:
    """The table's entry under exactly ``key``, decoded alone (found by its quoted key)."""
    text = table_text()
    if text is None:
        return None
    at = text.find(json.dumps(key) + ":")
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, text.find("{", at))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def table_entry(model: str) -> dict[str, Any] | None:
    """litellm's table entry for ``model`` (tried as given, then without its ``provider/`` prefix)."""
    bare = model.split("/", 1)[1] if "/" in model else model
    for key in dict.fromkeys((model, bare)):
        value = lookup(key)
        if value is not None:
            return value
    return None


def model_capabilities(model_config: Any, model: str | None = None) -> Capabilities:
    """The flags of ``model`` (default: ``model_config.name``): config, then litellm's table, then defaults."""
    name = model or str(getattr(model_config, "name", "") or "")
    entry = None
    flags: dict[str, bool] = {}
    sources: list[str] = []
    for flag, key in TABLE_KEYS.items():
        configured = getattr(model_config, flag, None)
        if configured is not None:
            flags[flag] = bool(configured)
            sources.append("config")
            continue
        if entry is None:
            entry = table_entry(name) or {}
        if isinstance(entry.get(key), bool):
            flags[flag] = entry[key]
            sources.append("litellm table")
        else:
            flags[flag] = DEFAULTS[flag]
            sources.append("default")
    return Capabilities(**flags, source="+".join(dict.fromkeys(sources)))
