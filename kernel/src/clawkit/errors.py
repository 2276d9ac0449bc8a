"""Exceptions the CLI maps to exit codes, kept import-light so start-up stays fast."""

from __future__ import annotations


class ConfigError(Exception):
    """Bad agent configuration; the message names file, line and field."""


class UsageError(Exception):
    """Bad input on the command line (exit code 2)."""


# What went wrong with a model call. Providers classify every failure into one of these so
# that retrying, reporting and exit codes do not depend on which SDK raised what.
PROVIDER_ERROR_KINDS = (
    "connection",        # refused, reset, unreachable: nothing answered at the endpoint
    "dns",               # the endpoint's host name does not resolve
    "tls",               # the TLS handshake or certificate check failed
    "timeout",           # no (complete) answer within the request timeout
    "http",              # an HTTP error status not covered below (5xx, 408, 409…)
    "auth",              # missing, invalid or unauthorised credentials (401, 403, no key)
    "bad_request",       # the server rejects the request itself (other 4xx)
    "not_found",         # unknown model or route (404)
    "rate_limit",        # 429
    "context_overflow",  # the request is larger than the model's window
    "stream_cut",        # the answer stopped mid-stream; ``partial_text`` holds what arrived
    "config",            # no provider / no model / impossible settings: nothing was sent
)

RETRYABLE_KINDS = frozenset({"connection", "timeout", "rate_limit", "stream_cut"})


class ProviderError(Exception):
    """A model call failed for good (retries exhausted, bad credentials, …).

    ``kind`` is one of :data:`PROVIDER_ERROR_KINDS`; ``endpoint`` the URL (or
    provider name) that was called; ``status`` the HTTP status when there was one;
    ``retryable`` whether the same request may succeed later; ``retry_after`` the
    seconds the server asked to wait; ``partial_text`` the text that reached the user
    before a stream broke (``kind="stream_cut"``); ``attempts`` how many requests were
    made; ``reason`` a few words for one-line notices. ``context_overflow`` is true for ``kind="context_overflow"`` (compaction may help).
    """

    def __init__(self, message: str, *, kind: str | None = None, endpoint: str | None = None,
                 status: int | None = None, retryable: bool | None = None, retry_after: float | None = None,
                 partial_text: str | None = None, context_overflow: bool = False, attempts: int = 1,
                 model: str | None = None, reason: str | None = None):
        super().__init__(message)
        if kind is None:
            kind = "context_overflow" if context_overflow else _kind_for_status(status)
        if kind not in PROVIDER_ERROR_KINDS:
            raise ValueError(f"unknown ProviderError kind {kind!r}; one of {', '.join(PROVIDER_ERROR_KINDS)}")
        self.kind = kind
        self.endpoint = endpoint
        self.status = status
        self.retryable = (kind in RETRYABLE_KINDS or _retryable_status(status)) if retryable is None else retryable
        self.retry_after = retry_after
        self.partial_text = partial_text
        self.attempts = attempts
        self.model = model
        self.reason = reason  # a few words for one-line notices ("connection refused")

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    @property
    def context_overflow(self) -> bool:
        return self.kind == "context_overflow"

    def with_message(self, message: str, **changes: object) -> "ProviderError":
        """A copy with another message (and any attribute changed), keeping the cause."""
        fields = {k: getattr(self, k) for k in ("kind", "endpoint", "status", "retryable", "retry_after",
                                                "partial_text", "attempts", "model", "reason")}
        fields.update(changes)
        new = type(self)(message, **fields)  # type: ignore[arg-type]
        new.__cause__ = self.__cause__
        return new


def _kind_for_status(status: int | None) -> str:
    if status is None:
        return "config"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 429:
        return "rate_limit"
    if 400 <= status < 500 and status not in (408, 409):
        return "bad_request"
    return "http"


def _retryable_status(status: int | None) -> bool:
    return status is not None and (status in (408, 409, 429) or status >= 500)


# --- what a failed model call means: shared by the provider plugins --------------------------

#: what servers say when a request does not fit the model's context window
OVERFLOW_MARKERS = ("context_length_exceeded", "maximum context length", "context window", "prompt is too long",
                    "too many tokens")


def is_overflow_message(text: str) -> bool:
    """Whether an error text says the request exceeds the context window (never for a 429: "tokens
    per minute" rate limits mention tokens too — the caller checks the status)."""
    lowered = text.lower()
    return any(m in lowered for m in OVERFLOW_MARKERS)


def exception_chain(exc: BaseException, limit: int = 8) -> list[BaseException]:
    """``exc`` and its causes (``__cause__``, else ``__context__``), without cycles."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen and len(chain) < limit:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or e.__context__
    return chain


_CONNECTION_NAMES = frozenset((
    "APIConnectionError", "ConnectError", "RemoteProtocolError", "ReadError", "ServerDisconnected",
    "ServerDisconnectedError", "ClientPayloadError", "ClientOSError", "MidStreamFallbackError", "IncompleteRead",
    "ProtocolError"))


def transport_cause(exc: BaseException) -> tuple[str, str, bool] | None:
    """``(kind, what, retryable)`` when the exception chain holds a network-level cause — TLS, DNS, a
    refused connection, a timeout, a dropped connection — else None. Classes are read by name
    (httpx, aiohttp, the OpenAI SDK, litellm), so no client library is imported here. ``what`` says
    it in a few words for the one-line retry notices."""
    import errno
    import socket
    import ssl

    chain = exception_chain(exc)
    names: set[str] = set()
    for e in chain:
        cls_names = {c.__name__ for c in type(e).__mro__}
        if isinstance(e, ssl.SSLError) or cls_names & {"SSLError", "ClientSSLError", "ClientConnectorCertificateError"} \
                or "certificate verify" in str(e).lower():
            return "tls", "TLS failure", False
        if isinstance(e, socket.gaierror) or "ClientConnectorDNSError" in cls_names:
            return "dns", "the host name does not resolve", isinstance(e, socket.gaierror) and e.errno == socket.EAI_AGAIN
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return "connection", "connection refused", True
        if isinstance(e, (TimeoutError, socket.timeout)) or any("Timeout" in n for n in cls_names):
            return "timeout", "timed out", True
        names |= cls_names
    if names & _CONNECTION_NAMES or any(isinstance(e, ConnectionError) for e in chain):
        return "connection", "the connection failed", True
    return None
