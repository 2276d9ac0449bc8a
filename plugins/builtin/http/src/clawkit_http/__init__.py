"""clawkit-http: the native model provider for the two wire formats almost everyone speaks.

Registers the provider ``http``: OpenAI-compatible chat completions and Anthropic
Messages over httpx, with streaming, parallel tool calls, usage, cost (from
litellm's bundled price table, read as data) and retries honouring
``Retry-After``. With ``model.provider: auto`` (the default) it serves:

- ``openai/<model>`` — chat completions at ``api_base`` (default ``$OPENAI_BASE_URL``
  or ``https://api.openai.com/v1``), key from ``api_key`` or ``$OPENAI_API_KEY``;
- ``anthropic/<model>`` — Messages at ``api_base`` (default ``https://api.anthropic.com``),
  key from ``api_key`` or ``$ANTHROPIC_API_KEY``;
- a model name without a provider prefix given an ``api_base`` (an OpenAI-compatible
  server; ``api_format: anthropic`` in the model config says otherwise).

Every other model (``gemini/…``, ``bedrock/…``, ``ollama/…``) and any model whose
config says ``provider: litellm`` goes to clawkit-litellm. Importing this package
imports nothing heavy: httpx loads on the first model call.
"""

from __future__ import annotations

from typing import Any

from clawkit.hookspecs import hookimpl

from .serving import FORMATS, serves, wire_format  # noqa: F401  (public names)

__all__ = ["serves", "register_providers"]


def _create(model_config: Any) -> Any:
    from .provider import HttpProvider

    return HttpProvider(model_config)


@hookimpl
def register_providers(register):
    """The ``http`` provider, serving the OpenAI and Anthropic wire formats (see :func:`serves`)."""
    register("http", _create, serves=serves)
