"""Model providers: the interface, and the registry fed by ``register_providers``.

The kernel never imports a model SDK. ``model.provider: auto`` (the default) asks
the registered providers which one serves the model: a provider registered with a
``serves(model_config)`` predicate that says yes wins (``clawkit-http`` serves the
OpenAI and Anthropic wire formats natively); otherwise a catch-all provider (one
registered without ``serves``, ``litellm`` first) takes it.
"""

from __future__ import annotations

import inspect
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

    Optionally ``warm()`` (plain or async): load heavy dependencies ahead of the first call.
    An agent calls it once, before its first turn's classification (a plain one in a thread),
    and a long-lived process (``clawkit serve``) at start-up, so no model call's time budget
    pays for an import and no import stalls other requests on the event loop.
    """

    async def complete(self, request: LlmRequest, on_text: OnText | None = None) -> LlmResponse: ...


ProviderFactory = Callable[[Any], Provider]


class ProviderRegistry:
    """Provider factories by name, collected from ``register_providers``."""

    def __init__(self) -> None:
        self.factories: dict[str, ProviderFactory] = {}
        self.serves: dict[str, Callable[[Any], bool] | None] = {}

    def register(self, name: str, factory: ProviderFactory, serves: Callable[[Any], bool] | None = None) -> None:
        """Add provider ``name``; ``serves(model_config)`` says which models ``auto`` gives it
        (None: a catch-all, used when no specific provider serves the model)."""
        if name in self.factories:
            raise ValueError(f"model provider {name!r} is registered twice")
        self.factories[name] = factory
        self.serves[name] = serves

    def choose(self, model_config: Any) -> str:
        """The provider ``model.provider: auto`` resolves to for ``model_config``."""
        for name, serves in self.serves.items():
            if serves is not None and serves(model_config):
                return name
        catch_all = sorted((n for n, s in self.serves.items() if s is None), key=lambda n: (n != "litellm", n))
        if catch_all:
            return catch_all[0]
        known = ", ".join(sorted(self.factories)) or "none"
        model = getattr(model_config, "name", model_config)
        raise ProviderError(f"no installed model provider serves model {model!r} (installed: {known}; "
                            f"clawkit-litellm serves every provider litellm knows)")

    def create(self, name: str, model_config: Any) -> Provider:
        if name == "auto":
            name = self.choose(model_config)
        try:
            factory = self.factories[name]
        except KeyError:
            known = ", ".join(sorted(self.factories)) or "none (is clawkit-litellm installed?)"
            raise ProviderError(f"no model provider named {name!r}; installed: {known}") from None
        return factory(model_config)


class DeliveryError(Exception):
    """An exception raised by a provider's ``on_text`` callback (the display): the caller's, not a
    model failure — never retried or classified as one. ``error`` is the original exception."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


async def deliver_text(on_text: Callable[[str], Any] | None, delta: str) -> None:
    """Hand a streamed text delta to ``on_text`` (sync or async); what it raises comes back as a
    :class:`DeliveryError`, so a provider's retry loop can tell it from a model failure."""
    if on_text is None:
        return
    try:
        result = on_text(delta)
        if inspect.isawaitable(result):
            await result
    except Exception as exc:
        raise DeliveryError(exc) from exc
