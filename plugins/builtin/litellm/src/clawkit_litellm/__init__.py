"""clawkit-litellm: clawkit's default model provider, every model litellm supports.

Registers the provider ``litellm`` (``model.provider: litellm``, the default).
Importing this package does not import litellm or tiktoken: the ``clawkit`` CLI
loads every plugin at start and must stay fast. Other plugins may use the offline
token counting helpers :func:`count_tokens`, :func:`encoding_for` and
:func:`truncate_to_tokens`.
"""

from __future__ import annotations

from clawkit.hookspecs import hookimpl

from .provider import LitellmProvider
from .tokens import count_tokens, encoding_for, encoding_name_for, truncate_to_tokens

__all__ = ["LitellmProvider", "count_tokens", "encoding_for", "encoding_name_for", "truncate_to_tokens",
           "register_providers"]


@hookimpl
def register_providers(register):
    """The ``litellm`` provider: ``LitellmProvider(model_config)``."""
    register("litellm", LitellmProvider)
