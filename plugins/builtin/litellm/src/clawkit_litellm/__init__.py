"""clawkit-litellm: clawkit's default model provider, every model litellm supports.

Registers the provider ``litellm`` (``model.provider: litellm``, the default) and the
embedding provider ``litellm`` (``register_embedding_provider``: memory's remote embeddings).
Importing this package does not import litellm or tiktoken: the ``clawkit`` CLI
loads every plugin at start and must stay fast. Other plugins may use the offline
token counting helpers :func:`count_tokens`, :func:`encoding_for` and
:func:`truncate_to_tokens`.
"""

from __future__ import annotations

from clawkit.hookspecs import hookimpl
from clawkit.lazy import lazy_exports

__all__ = ["LitellmProvider", "LiteLLMEmbeddings", "count_tokens", "encoding_for", "encoding_name_for", "truncate_to_tokens",
           "register_providers"]

# The provider module imports the kernel types (pydantic): it loads on first use too.
_EXPORTS = {
    "LitellmProvider": "provider",
    "LiteLLMEmbeddings": "embeddings",
    **dict.fromkeys(("count_tokens", "encoding_for", "encoding_name_for", "truncate_to_tokens"), "tokens"),
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


@hookimpl
def register_providers(register):
    """The ``litellm`` provider: ``LitellmProvider(model_config)``."""
    from .provider import LitellmProvider

    register("litellm", LitellmProvider)


@hookimpl
def register_embedding_provider(register):
    """``litellm``: remote embedding models (``plugins.memory.embedding.model``)."""
    from .embeddings import LiteLLMEmbeddings

    register("litellm", LiteLLMEmbeddings)
