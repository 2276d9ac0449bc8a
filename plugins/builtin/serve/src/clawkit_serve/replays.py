"""Recognising a chat-completions request the client sent again, so a retry never starts a
second turn (a second session, a second approval, a second side effect).

The official ``openai`` SDKs retry a timeout, 408, 409, 429 and 5xx twice by default, with
the same body and an ``x-stainless-retry-count`` header counting the attempt; they send no
``Idempotency-Key`` unless asked (``extra_headers``). A request is a retry of an earlier one
when, for the same API key,

* it carries the same ``Idempotency-Key`` (any client; with a different body: 400), or
* it says it is a retry (``x-stainless-retry-count`` > 0) and its fingerprint — SHA-256 of
  the body, the ``X-Clawkit-Session`` and ``X-Clawkit-Wait`` headers — matches one seen
  within the window.

A retry attaches to that request's turn: it waits for the turn if it still runs (an
approval pending) and answers with its result, or replays the result (or the error) when it
has finished. A first attempt (no retry count, no key) always runs: sending the same
message twice on purpose still makes two turns. Entries live in this process's memory for
``ttl`` seconds after their turn ends (default one hour), at most ``size`` of them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from .httperror import HttpError


@dataclass
class Attempt:
    """The turn one request started, which its retries share."""

    fingerprint: str
    session_id: str
    cid: str
    created: int
    task: asyncio.Future | None = None
    ended: float | None = None
    replays: int = field(default=0)


def retry_count(request: Request) -> int:
    raw = request.headers.get("x-stainless-retry-count", "0").strip()
    return int(raw) if raw.isdigit() else 0


def fingerprint(key_id: str, body: dict[str, Any], request: Request) -> str:
    h = hashlib.sha256()
    for part in (key_id, request.headers.get("x-clawkit-session", ""), request.headers.get("x-clawkit-wait", ""),
                 json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)):
        h.update(part.encode("utf-8", "replace"))
        h.update(b"\0")
    return h.hexdigest()


class Replays:
    def __init__(self, ttl: float = 3600.0, size: int = 10_000):
        self.ttl, self.size = ttl, size
        self._by_key: OrderedDict[tuple[str, str], Attempt] = OrderedDict()  # (key id, Idempotency-Key)
        self._by_print: OrderedDict[str, Attempt] = OrderedDict()  # fingerprint -> the latest attempt

    def find(self, key_id: str, idempotency_key: str | None, fp: str, retry: bool) -> Attempt | None:
        """The earlier attempt this request repeats, or None (then it is new: call :meth:`begin`)."""
        self._expire()
        if idempotency_key:
            found = self._by_key.get((key_id, idempotency_key))
            if found is not None and found.fingerprint != fp:
                raise HttpError(400, "this Idempotency-Key was used with a different request; use a new key for a new "
                                "request", code="idempotency_key_reused", headers={"x-should-retry": "false"})
            if found is not None:
                found.replays += 1
            return found
        found = self._by_print.get(fp) if retry else None
        if found is not None:
            found.replays += 1
        return found

    def begin(self, key_id: str, idempotency_key: str | None, attempt: Attempt, task: asyncio.Future) -> None:
        attempt.task = task
        if idempotency_key:
            self._by_key[(key_id, idempotency_key)] = attempt
        self._by_print[attempt.fingerprint] = attempt
        self._by_print.move_to_end(attempt.fingerprint)

        def ended(t: asyncio.Future) -> None:
            attempt.ended = time.monotonic()
            exc = None if t.cancelled() else t.exception()
            if isinstance(exc, HttpError) and exc.status in (409, 429):  # nothing ran: a retry may run it
                self._forget(attempt)

        task.add_done_callback(ended)
        while len(self._by_print) > self.size:
            self._forget(next(iter(self._by_print.values())))

    def _forget(self, attempt: Attempt) -> None:
        if self._by_print.get(attempt.fingerprint) is attempt:
            del self._by_print[attempt.fingerprint]
        for k in [k for k, a in self._by_key.items() if a is attempt]:
            del self._by_key[k]

    def _expire(self) -> None:
        """Drop ended attempts past the window, oldest first (stops at the first one still kept:
        cheap per request; ``size`` bounds the rest)."""
        cutoff = time.monotonic() - self.ttl
        for table in (self._by_print, self._by_key):
            while table:
                k, a = next(iter(table.items()))
                if a.ended is None or a.ended >= cutoff:
                    break
                del table[k]
