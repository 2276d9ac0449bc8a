"""The native provider: one ``complete`` call = one model answer over httpx, retried as needed.

Retries are the kernel's (:func:`clawkit.retry.call_with_retries`, from the model
config's ``max_retries``, ``retry_base_delay``, ``retry_max_delay``,
``max_retry_after``, ``retry_timeout``): every failure is classified here into a
:class:`~clawkit.errors.ProviderError` kind first.

Provider-only settings, read from the model config's extra keys (not sent to the
model): ``api_format`` (``openai`` | ``anthropic``), ``headers`` (extra HTTP
headers), ``max_connections`` (per event loop, 1000), ``input_cost_per_token`` /
``output_cost_per_token`` (prices for models the bundled table does not know).
Every other extra key goes into the request body.

Usage: streamed OpenAI-format requests ask for it (``stream_options.include_usage``); a
server that still sends none gets its tokens counted locally (:func:`clawkit.tokens.estimate_usage`,
``usage.estimated``), and the cost is priced from that estimate.

A stream that breaks after text reached the user is not retried (the user would
see the text twice): it raises ``ProviderError(kind="stream_cut")`` with the text
delivered so far in ``partial_text``.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Awaitable, Callable

from clawkit.providers import DeliveryError, OnText, ProviderError, deliver_text
from clawkit.retry import OnRetry, RetryPolicy, call_with_retries
from clawkit.types import LlmRequest, LlmResponse

from . import anthropic_format, openai_format
from .serving import wire_format
from .errors import Failure, from_exception, from_status
from .prices import price_per_token

PROVIDER_ONLY = ("api_format", "headers", "max_connections", "input_cost_per_token", "output_cost_per_token")
RETRY_SETTINGS = ("retry_base_delay", "retry_max_delay", "max_retry_after", "retry_timeout")
LOCAL_API_KEY = "sk-clawkit-no-key"
DEFAULTS = {
    "openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
}


class _Failed(Exception):
    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


ENDPOINT_SUFFIXES = {"openai": ("/chat/completions",), "anthropic": ("/messages",)}


def full_endpoint(api_base: str, api_format: str) -> bool:
    """Whether ``api_base`` is already the whole endpoint URL (its path ends in the format's
    endpoint path): then it is used as given, not extended to ``…/chat/completions/chat/completions``."""
    from urllib.parse import urlsplit

    path = urlsplit(api_base).path.rstrip("/")
    return path.endswith(ENDPOINT_SUFFIXES.get(api_format, ()))


def _environment_proxies() -> bool:
    """Whether ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (or the system's settings) name a proxy."""
    from urllib.request import getproxies

    found = getproxies()
    return any(found.get(scheme) for scheme in ("http", "https", "all"))


def _json_bytes(body: dict[str, Any]) -> bytes:
    """The request body as httpx's ``json=`` encodes it (attachments' payloads spliced in unescaped:
    :func:`clawkit.attachments.json_bytes`)."""
    from clawkit.attachments import json_bytes

    return json_bytes(body, lambda b: json.dumps(b, ensure_ascii=False, separators=(",", ":"), allow_nan=False))


class _Pool:
    """One event loop's connection pool (httpx's transport over :mod:`clawkit_http.pool`) and
    what every request through it shares: the parsed URL, the headers, the timeouts.

    Requests go to the transport directly rather than through ``httpx.AsyncClient``, whose
    per-request work (URL merging, cookies, auth and redirect handling) the provider never
    needs; the requests, responses and exception classes are httpx's."""

    def __init__(self, provider: "HttpProvider", tls: Any) -> None:
        import httpx

        from .pool import LeanTransport

        limits = httpx.Limits(max_connections=provider.max_connections,
                              max_keepalive_connections=min(provider.max_connections, 1000))
        self.client: Any = None
        if _environment_proxies():  # httpx's own client applies them (and NO_PROXY) exactly as it always did
            self.client = httpx.AsyncClient(timeout=httpx.Timeout(provider.config.timeout), verify=tls, limits=limits)
        self.transport = LeanTransport(verify=tls, limits=limits)
        self.url = httpx.URL(provider.endpoint)
        self.headers = {"Accept": "*/*", "Accept-Encoding": "gzip, deflate", "User-Agent": "clawkit-http",
                        **provider._headers()}
        self.timeout = httpx.Timeout(provider.config.timeout).as_dict()
        self._request = httpx.Request

    async def send(self, body: dict[str, Any]) -> Any:
        """POST ``body`` as JSON; the response's body is still to be read (and closed)."""
        request = self._request("POST", self.url, headers=self.headers, content=_json_bytes(body),
                                extensions={"timeout": self.timeout})
        if self.client is not None:
            return await self.client.send(request, stream=True)
        response = await self.transport.handle_async_request(request)
        response.request = request
        return response

    async def aclose(self) -> None:
        await self.transport.aclose()
        if self.client is not None:
            await self.client.aclose()


class HttpProvider:
    """A :class:`clawkit.providers.Provider` speaking OpenAI chat completions or Anthropic Messages.

    ``config`` is a :class:`clawkit.config.ModelConfig`; ``on_retry(notice)`` (a
    :class:`clawkit.retry.RetryNotice`) is told about each retry before its wait (the
    agent emits ``llm.retry``); ``sleep`` is injectable.
    """

    def __init__(self, config: Any, *, on_retry: OnRetry | None = None,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.config = config
        extras = dict(config.settings()) if hasattr(config, "settings") else {}
        self.format = wire_format(config) or "openai"
        self.wire = anthropic_format if self.format == "anthropic" else openai_format
        self.headers = {str(k): str(v) for k, v in (extras.pop("headers", None) or {}).items()}
        for key in RETRY_SETTINGS:  # ModelConfig fields (older configs carry them as extras): never sent
            extras.pop(key, None)
        self.policy = RetryPolicy.from_model_config(config)
        self.max_connections = int(extras.pop("max_connections", 1000))
        self.prices = (extras.pop("input_cost_per_token", None), extras.pop("output_cost_per_token", None))
        extras.pop("api_format", None)
        self.extra_body = extras
        self.on_retry = on_retry
        self.sleep = sleep
        env_base, default_base, env_key = DEFAULTS[self.format]
        self.base = (config.api_base or os.environ.get(env_base) or default_base).rstrip("/")
        self.api_key = config.api_key or os.environ.get(env_key) or (LOCAL_API_KEY if config.api_base else None)
        self._client: Any = None
        self._loop: Any = None
        self._tls: Any = None  # the TLS context all pools share

    # --- plumbing -----------------------------------------------------------------------

    @property
    def takes_response_format(self) -> bool:
        """Typed output (clawkit.output): the OpenAI wire sends a JSON-schema ``response_format``
        (where the model takes one); the Anthropic wire gets a forced final tool instead."""
        return self.format != "anthropic"

    @property
    def endpoint(self) -> str:
        """The URL posted to: ``api_base`` plus the format's path, or ``api_base`` as given when it
        already ends in the endpoint path (``…/chat/completions``, ``…/messages``; a query kept)."""
        if full_endpoint(self.base, self.format):
            return self.base
        if self.format == "anthropic":
            base = self.base[:-3] if self.base.endswith("/v1") else self.base
            return base + anthropic_format.PATH
        return self.base + openai_format.PATH

    def _headers(self) -> dict[str, str]:
        if self.format == "anthropic":
            head = {"x-api-key": self.api_key or "", "anthropic-version": anthropic_format.VERSION}
        else:
            head = {"Authorization": f"Bearer {self.api_key}"}
        return {**head, "Content-Type": "application/json", **self.headers}

    def client(self) -> "_Pool":
        """One connection pool per event loop (``Agent.run`` starts a loop per turn)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client, self._loop = self._new_client(), loop
        return self._client

    def _new_client(self) -> "_Pool":
        import httpx

        if self._tls is None:  # one TLS context for every pool: loading the CA bundle costs ~25 ms each
            self._tls = httpx.create_ssl_context()
        return _Pool(self, self._tls)

    def _warm_client(self) -> "_Pool":
        import importlib

        # what httpcore imports on its first request (anyio, for its locks: ~100 ms on a busy machine)
        for name in ("anyio._backends._asyncio", "anyio.to_thread"):
            try:
                importlib.import_module(name)
            except ImportError:  # another httpx/anyio layout: the first call imports what it needs
                pass
        return self._new_client()

    async def warm(self) -> None:
        """Import httpx and build this loop's pool (its TLS context) in a thread: a fresh process's
        first call — a classifier's, whose wait counts from its request — does not pay for them."""
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is loop:
            return
        client = await asyncio.to_thread(self._warm_client)
        if self._client is None or self._loop is not loop:
            self._client, self._loop = client, loop
        else:  # built meanwhile by a call
            await client.aclose()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def model_id(self, request: LlmRequest) -> str:
        """The model as the server knows it: ``openai/gpt-4o`` → ``gpt-4o``."""
        name = request.model or self.config.name
        prefix, sep, rest = name.partition("/")
        return rest if sep and prefix in ("openai", "anthropic") else name

    # --- the call -----------------------------------------------------------------------

    async def complete(self, request: LlmRequest, on_text: OnText | None = None) -> LlmResponse:
        """One model answer; retries transient failures; raises :class:`ProviderError`."""
        body = self.wire.build_body(request, self.model_id(request), self.config, self.extra_body)

        async def attempt(n: int) -> LlmResponse:
            if not self.api_key:  # through the retry helper, so the error says it is not retried
                raise self._error(request, Failure("auth", f"no API key: set model.api_key or "
                                                   f"${DEFAULTS[self.format][2]}", False, reason="no API key"))
            delivered: list[str] = []
            try:
                if body["stream"]:
                    return await self._stream(body, on_text, delivered)
                return await self._whole(body)
            except _Failed as exc:
                raise self._error(request, exc.failure, partial="".join(delivered)) from exc.__cause__

        def classify(exc: BaseException) -> ProviderError:
            if isinstance(exc, DeliveryError):
                raise exc  # a display failure is the caller's, not the model's
            return self._error(request, from_exception(exc, streaming=bool(body["stream"])))

        try:
            response = await call_with_retries(attempt, policy=self.policy, classify=classify,
                                               on_retry=self.on_retry, sleep=self.sleep)
        except DeliveryError as exc:
            raise exc.error from None
        if not response.usage.total_tokens:  # the server sent none (even when asked): counted here, marked estimated
            from clawkit.tokens import estimate_usage

            response.usage = estimate_usage(request, response, body["model"])
        response.usage.cost = self._cost(body["model"], response)
        response.model = response.model or body["model"]
        return response

    async def _post_failed(self, response: Any) -> _Failed:
        raw = await response.aread()
        try:
            data = json.loads(raw)
        except ValueError:
            data = raw.decode("utf-8", "replace")
        message = self.wire.error_message(data)
        return _Failed(from_status(response.status_code, f"HTTP {response.status_code}: {message}", response.headers))

    async def _whole(self, body: dict[str, Any]) -> LlmResponse:
        try:
            response = await self.client().send(body)
            try:
                if response.status_code >= 400:
                    raise await self._post_failed(response)
                data = json.loads(await response.aread())
            finally:
                await response.aclose()
        except _Failed:
            raise
        except ValueError as exc:
            raise _Failed(Failure("stream_cut", f"the answer is not valid JSON: {exc}", True)) from exc
        except Exception as exc:
            raise _Failed(from_exception(exc, streaming=False)) from exc
        return self.wire.parse_response(data)

    async def _stream(self, body: dict[str, Any], on_text: OnText | None, delivered: list[str]) -> LlmResponse:
        """Server-sent events, split by hand on the raw bytes: httpx's ``aiter_lines`` decodes
        every chunk to text through three generator layers, and only ``data:`` lines matter."""
        assembler = self.wire.StreamAssembler()
        try:
            response = await self.client().send(body)
            try:
                if response.status_code >= 400:
                    raise await self._post_failed(response)
                data: list[bytes] = []
                rest = b""
                async for chunk in response.aiter_bytes():
                    *lines, rest = (rest + chunk).split(b"\n")
                    for line in lines:
                        if line.startswith(b"data:"):
                            data.append(line[5:].strip(b" \r"))
                            continue
                        if line.rstrip(b"\r") or not data:
                            continue  # event names, comments, keep-alives
                        payload, data = b"\n".join(data), []
                        if payload == b"[DONE]":
                            assembler.done = True
                            continue  # read on to the body's end: a connection left mid-body cannot be reused
                        delta = assembler.add(json.loads(payload))
                        if delta:
                            await deliver_text(on_text, delta)
                            delivered.append(delta)
            finally:
                await response.aclose()
        except (_Failed, DeliveryError):
            raise
        except anthropic_format.StreamError as exc:
            retryable = exc.type in ("overloaded_error", "api_error", "rate_limit_error")
            raise _Failed(Failure("http", f"{exc.type}: {exc}", retryable)) from exc
        except ValueError as exc:
            raise _Failed(Failure("stream_cut", f"a stream event is not valid JSON: {exc}", True)) from exc
        except Exception as exc:
            raise _Failed(from_exception(exc, streaming=True)) from exc
        if not assembler.complete:
            raise _Failed(Failure("stream_cut", "the stream ended before the model finished its answer", True))
        return assembler.response()

    # --- reporting ----------------------------------------------------------------------

    def _error(self, request: LlmRequest, failure: Failure, *, partial: str = "") -> ProviderError:
        model = request.model or self.config.name
        where = f"model {model} at {self.endpoint}"
        if failure.kind == "context_overflow":
            head = f"{where}: the request exceeds the model's context window"
        elif partial:
            head = (f"{where}: the stream broke after {len(partial)} characters had been delivered "
                    f"(not retried, the text would repeat)")
        elif failure.kind == "timeout":
            head = f"{where}: no answer within {self.config.timeout:g}s"
        else:
            head = where
        reason = failure.reason if not partial else "the stream broke mid-answer"
        return ProviderError(f"{head}: {failure.message}", kind="stream_cut" if partial else failure.kind,
                             endpoint=self.endpoint, status=failure.status,
                             retryable=False if partial else failure.retryable, retry_after=failure.retry_after,
                             partial_text=partial or None, model=model, reason=reason)

    def _cost(self, model: str, response: LlmResponse) -> float | None:
        usage = response.usage
        if not usage.total_tokens:
            return None
        inp, out = self.prices
        if inp is None and out is None:
            found = price_per_token(response.model or model, self.format) or (
                price_per_token(model, self.format) if response.model and response.model != model else None)
            if found is None:
                return None
            inp, out = found
        if usage.cache_read_tokens or usage.cache_write_tokens:  # priced as the provider prices cache tokens
            from clawkit.provider_features import cost

            return cost(usage, float(inp or 0), float(out or 0), response.model or model)
        return usage.prompt_tokens * float(inp or 0) + usage.completion_tokens * float(out or 0)
