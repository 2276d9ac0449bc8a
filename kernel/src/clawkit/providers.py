"""Model providers: the interface, and the registry fed by ``register_providers``.

The kernel never imports a model SDK; ``clawkit-litellm`` is the default provider.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol, runtime_checkable

from .errors import ProviderError
from .types import LlmRequest, LlmResponse

__all__ = ["OnText", "Provider", "ProviderError", "ProviderFactory", "ProviderRegistry"]

OnText = Callable[[str], "Awaitable[None] | None"]


@runtime_checkable
class Provider(Protocol):
    """What a provider implements.

    ``complete`` performs one model call. When ``request.stream`` is true and
    ``on_text`` is given, each text delta is passed to ``on_text`` (awaiting it if
    it returns an awaitable) as it arrives; the full :class:`LlmResponse`, with
    tool calls and usage, is returned at the end. Errors raise
    :class:`ProviderError`.

    Optionally ``warm()``: load heavy dependencies ahead of the first call. A long-lived
    process (``clawkit serve``) calls it at start-up, in a thread, so the first request's
    import does not stall every other request on the event loop.
    """

    async def complete(self, request: LlmRequest, on_text: OnText | None = None) -> LlmResponse: ...


ProviderFactory = Callable[[Any], Provider]


class ProviderRegistry:
    """Provider factories by name, collected from ``register_providers``."""

    def __init__(self) -> None:
        self.factories: dict[str, ProviderFactory] = {}

    def register(self, name: str, factory: ProviderFactory) -> None:
        if name in self.factories:
            raise ValueError(f"model provider {name!r} is registered twice")
        self.factories[name] = factory

    def create(self, name: str, model_config: Any) -> Provider:
        try:
            factory = self.factories[name]
        except KeyError:
            known = ", ".join(sorted(self.factories)) or "none (is clawkit-litellm installed?)"
            raise ProviderError(f"no model provider named {name!r}; installed: {known}") from None
        return factory(model_config)
