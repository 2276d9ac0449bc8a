"""Which models the ``http`` provider serves, and in which wire format (read by the plugin's
``register_providers`` and by the provider itself; its own module so that neither imports the
other)."""

from __future__ import annotations

from typing import Any

FORMATS = {"openai": "openai", "anthropic": "anthropic"}


def wire_format(model_config: Any) -> str | None:
    """``"openai"`` or ``"anthropic"`` when this provider can serve the model, else None."""
    name = str(getattr(model_config, "name", "") or "")
    extras = model_config.settings() if hasattr(model_config, "settings") else {}
    explicit = extras.get("api_format")
    if explicit in FORMATS:
        return FORMATS[explicit]
    prefix, sep, _ = name.partition("/")
    if sep:
        return FORMATS.get(prefix)
    return "openai" if getattr(model_config, "api_base", None) else None


def serves(model_config: Any) -> bool:
    """Whether ``provider: auto`` gives this model to the native provider."""
    return wire_format(model_config) is not None
