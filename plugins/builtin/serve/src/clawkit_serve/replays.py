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
``ttl`` seconds after their turn ends (default one hour), at most ``size`` of them — and in the
server's state database (:mod:`.request_log`), so a retry that reaches a restarted server is
recognised too: its outcome is replayed, or (the turn was cut by the restart) it is answered
from the session or refused, never run again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from .httperror import HttpError

log = logging.getLogger("clawkit.serve")


@dataclass
class Outcome:
    """A finished turn's answer as a retry after a restart replays it (what a TurnResult gives)."""

    reply: str
    usage_data: dict[str, Any]

    @property
    def usage(self) -> Any:
        from clawkit.types import Usage

        return Usage.model_validate(self.usage_data)


def _outcome(task: asyncio.Future, exc: BaseException | None) -> dict[str, Any]:
    if exc is None:
        result = task.result()
        return {"reply": result.reply, "usage": result.usage.model_dump(exclude_defaults=True)}
    if isinstance(exc, HttpError):
        return {"error": {"status": exc.status, "message": exc.message, "code": exc.code, "headers": exc.headers}}
    return {"error": {"status": 500, "message": f"the turn failed ({type(exc).__name__}); the server log has the details",
                      "code": "turn_failed", "headers": {"x-should-retry": "false"}}}


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
    interrupted: bool = False  # found in the log with no outcome: the process that ran it stopped
    started: float = 0.0  # wall-clock start (the log's), to find the turn's messages in its session


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
    def __init__(self, ttl: float = 3600.0, size: int = 10_000, log: Any = None):
        self.ttl, self.size, self.log = ttl, size, log  # log: a RequestLog (request_log.py), or None
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
            return self._logged(key_id, idempotency_key, fp, retry)
        found = self._by_print.get(fp) if retry else None
        if found is not None:
            found.replays += 1
            return found
        return self._logged(key_id, idempotency_key, fp, retry)

    def _logged(self, key_id: str, idempotency_key: str | None, fp: str, retry: bool) -> Attempt | None:
        """An attempt a server process before this one started (the log outlives the process)."""
        row = self.log.find(key_id, idempotency_key, fp, retry) if self.log is not None else None
        if row is None:
            return None
        if idempotency_key and row["fingerprint"] != fp:
            raise HttpError(400, "this Idempotency-Key was used with a different request; use a new key for a new "
                            "request", code="idempotency_key_reused", headers={"x-should-retry": "false"})
        attempt = Attempt(row["fingerprint"], row["session_id"], row["cid"], int(row["created"]), replays=1,
                          ended=time.monotonic(), started=float(row["created"]))
        outcome = row["outcome"]
        if outcome is None:
            attempt.interrupted = True
            return attempt
        self.settle(attempt, outcome)
        return attempt

    def settle(self, attempt: Attempt, outcome: dict[str, Any]) -> None:
        """Give ``attempt`` a finished task holding a recorded ``outcome`` (reply and usage, or error)."""
        attempt.task = asyncio.get_running_loop().create_future()
        if "error" in outcome:
            err = outcome["error"]
            attempt.task.set_exception(HttpError(int(err["status"]), err["message"], code=err.get("code"),
                                                 headers=dict(err.get("headers") or {})))
        else:
            attempt.task.set_result(Outcome(outcome.get("reply", ""), outcome.get("usage") or {}))

    def begin(self, key_id: str, idempotency_key: str | None, attempt: Attempt, task: asyncio.Future) -> None:
        attempt.task = task
        if idempotency_key:
            self._by_key[(key_id, idempotency_key)] = attempt
        self._by_print[attempt.fingerprint] = attempt
        self._by_print.move_to_end(attempt.fingerprint)

        if self.log is not None:
            self.log.start(attempt.cid, key_id, idempotency_key, attempt.fingerprint, attempt.session_id)

        def ended(t: asyncio.Future) -> None:
            attempt.ended = time.monotonic()
            exc = None if t.cancelled() else t.exception()
            if isinstance(exc, HttpError) and exc.status in (409, 429):  # nothing ran: a retry may run it
                self._forget(attempt)
                if self.log is not None:
                    self.log.forget(attempt.cid)
            elif self.log is not None and not t.cancelled() and not (isinstance(exc, HttpError) and exc.code == "checkpointed"):
                # (cancelled or checkpointed: the server stops; the turn resumes later, so it has no outcome yet)
                try:
                    self.log.finish(attempt.cid, _outcome(t, exc))
                except Exception:  # the log is a convenience for retries: never fail the request over it
                    log.warning("recording the outcome of %s failed", attempt.cid, exc_info=True)

        task.add_done_callback(ended)
        while len(self._by_print) > self.size:
            self._forget(next(iter(self._by_print.values())))

    def forget_sessions(self, session_ids: Any) -> int:
        """Drop the attempts of deleted sessions (``DELETE /api/sessions/{id}``) and their request-log
        rows: a retry must not replay a forgotten conversation's answer, from this process's memory or
        from the server's database (``--db``; the ``forget_sessions`` hook reaches only the agent's
        store, the same file by default). Returns how many in-memory attempts were dropped."""
        gone = set(session_ids)
        attempts = {id(a): a for a in [*self._by_print.values(), *self._by_key.values()] if a.session_id in gone}
        for attempt in attempts.values():
            self._forget(attempt)
        if self.log is not None:  # the server's database, which may not be the agent's store
            self.log.forget_sessions(sorted(gone))
        return len(attempts)

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
