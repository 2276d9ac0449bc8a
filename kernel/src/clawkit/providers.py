"""Model providers: the interface, and the registry fed by ``register_providers``.

The kernel never imports a model SDK; ``clawkit-litellm`` is the default provider.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol, runtime_checkable

from .types import LlmRequest, LlmResponse

OnText = Callable[[str], "Awaitable[None] | None"]


class ProviderError(Exception):
    """A model call failed for good (retries exhausted, bad credentials, …).

    ``retryable`` says whether the failure was transient; ``context_overflow`` that the
    request was larger than the model's window (compaction may help).
    """

    def __init__(self, message: str, *, retryable: bool = False, context_overflow: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.context_overflow = context_overflow
        self.status = status


@runtime_checkable
class Provider(Protocol):
    """What a provider implements.

    ``complete`` performs one model call. When ``request.stream`` is true and
    ``on_text`` is given, each text delta is passed to ``on_text`` (awaiting it if
    it returns an awaitable) as it arrives; the full :class:`LlmResponse`, with
    tool calls and usage, is returned at the end. Errors raise
    :class:`ProviderError`.
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
