"""clawkit-litellm: clawkit's default model provider, every model litellm supports.

Registers the provider ``litellm`` (``model.provider: litellm``, the default).
Importing this package does not import litellm or tiktoken: the ``clawkit`` CLI
loads every plugin at start and must stay fast. Other plugins may use the offline
token counting helpers :func:`count_tokens`, :func:`encoding_for` and
:func:`truncate_to_tokens`.
"""

from __future__ import annotations

from typing import Any

from clawkit.hookspecs import hookimpl

__all__ = ["LitellmProvider", "count_tokens", "encoding_for", "encoding_name_for", "truncate_to_tokens",
           "register_providers"]

# The provider module imports the kernel types (pydantic): it loads on first use too.
_EXPORTS = {
    "LitellmProvider": "provider",
    **dict.fromkeys(("count_tokens", "encoding_for", "encoding_name_for", "truncate_to_tokens"), "tokens"),
}


def __getattr__(name: str) -> Any:
    """The public names, imported on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


@hookimpl
def register_providers(register):
    """The ``litellm`` provider: ``LitellmProvider(model_config)``."""
    from .provider import LitellmProvider

    register("litellm", LitellmProvider)
