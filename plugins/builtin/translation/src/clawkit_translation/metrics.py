"""The translation device's counters, in its own table of the state db.

``translation_metrics (metric TEXT PRIMARY KEY, value REAL, updated REAL)`` — the
shape every ``<plugin>_metrics`` table shares, so ``clawkit skills stats`` shows
it too. Metrics never break a turn: a write that fails is logged and dropped.

:func:`bump` writes at once (autocommit); :func:`bump_with_turn` queues the increments on the
session store so they are committed in the same transaction as the kernel's next write
(the message that follows, or the turn-end flush) — no commit of its own; the increments of
every turn sharing a store until its next commit are summed into one statement.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import weakref
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from clawkit.storage import declare, metrics_table, metrics_upsert

log = logging.getLogger("clawkit.translation")
TABLE = "translation_metrics"
METRICS = metrics_table(TABLE)
UPSERT = metrics_upsert(TABLE)

_created: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()  # store -> its conn, table ensured


def bump(conn: Any, metric: str, by: float = 1.0) -> None:
    """Add ``by`` to ``metric`` (created at 0), committed now."""
    row = (metric, by, time.time())
    try:
        try:
            conn.execute(UPSERT, row)
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc) and "does not exist" not in str(exc):
                raise
            declare(conn, METRICS)
            conn.execute(UPSERT, row)
    except Exception as exc:
        log.debug("translation metrics: %r", exc)


def store_queue(store: Any) -> Callable[[str, tuple], None] | None:
    """The session store's queue of rows committed with its next write (None: not offered).

    ``SessionStore`` queues events and usage rows this way; a public ``queue`` is used when
    the kernel offers one.
    """
    q = getattr(store, "queue", None) or getattr(store, "_queue", None)
    return q if callable(q) and hasattr(store, "flush") else None


def ensure_table(store: Any) -> bool:
    """Create the table on ``store``'s connection once (per store). False when that failed."""
    conn = store.conn
    if _created.get(store) is conn:
        return True
    try:
        declare(conn, METRICS)
        _created[store] = conn
        return True
    except Exception as exc:
        log.debug("translation metrics: %r", exc)
        return False


def bump_with_turn(store: Any, metric: str, by: float = 1.0, *more: tuple[str, float]) -> None:
    """Add ``by`` to ``metric`` (and each ``(metric, by)`` of ``more``), committed with the store's
    next write (inside a turn: before it ends). The increments queued on a store until its next
    commit are summed and written by one statement in it (:class:`_Counts`): concurrent turns
    sharing a store share it."""
    if not _counts_for(store, metric, by, more):
        queue = store_queue(store)
        if queue is None or not ensure_table(store):
            bump(store.conn, metric, by)
            for m, b in more:
                bump(store.conn, m, b)
            return
        now = time.time()
        rows = ((metric, by), *more)
        queue(_upsert_rows(len(rows)), tuple(v for m, b in rows for v in (m, b, now)))


_STALE_S = 30.0  # a sum queued this long ago and not yet written: later increments start a new one
_lock = threading.Lock()
_open: "weakref.WeakKeyDictionary[Any, _Counts]" = weakref.WeakKeyDictionary()  # store -> the sum its next commit writes


class _Counts:
    """Increments queued on one store (``store.queue_call``), written in its next commit as one
    multi-row UPSERT. Once the commit has started writing it, increments go to a new one (a retried
    commit writes the same sums again, as it would re-run a queued statement)."""

    __slots__ = ("counts", "started", "queued_at")

    def __init__(self) -> None:
        self.counts: dict[str, float] = {}
        self.started = False
        self.queued_at = time.monotonic()

    def __call__(self, conn: Any) -> None:
        with _lock:
            self.started = True
            rows = list(self.counts.items())
        if not rows:
            return
        now = time.time()
        for i in range(0, len(rows), 64):  # (bounded statement size)
            part = rows[i:i + 64]
            conn.execute(_upsert_rows(len(part)), tuple(v for m, b in part for v in (m, b, now)))


def _counts_for(store: Any, metric: str, by: float, more: tuple[tuple[str, float], ...]) -> bool:
    """Add the increments to the store's open sum (a new one queued on it when there is none, or
    its commit has begun). False when the store offers no ``queue_call`` or the table could not be
    made: the caller queues a statement."""
    try:
        pending = _open.get(store)
    except TypeError:  # not weak-referenceable
        return False
    if pending is not None:
        with _lock:
            if not pending.started and time.monotonic() - pending.queued_at <= _STALE_S:
                _add(pending.counts, metric, by, more)
                return True
    queue_call = getattr(store, "queue_call", None)
    if not callable(queue_call) or not hasattr(store, "flush") or not ensure_table(store):  # (not under the lock:
        return False  # a statement on store.conn commits what is queued, which may run a _Counts)
    fresh = _Counts()
    _add(fresh.counts, metric, by, more)
    _open[store] = fresh
    queue_call(fresh)
    return True


def _add(counts: dict[str, float], metric: str, by: float, more: tuple[tuple[str, float], ...]) -> None:
    counts[metric] = counts.get(metric, 0.0) + by
    for m, b in more:
        counts[m] = counts.get(m, 0.0) + b


@lru_cache(maxsize=64)
def _upsert_rows(n: int) -> str:
    """UPSERT for ``n`` rows in one statement (distinct metrics: one row may not update twice)."""
    head, tail = UPSERT.split(" ON CONFLICT", 1)
    return head + ", (?, ?, ?)" * (n - 1) + " ON CONFLICT" + tail


def read(db: str | Path) -> dict[str, float]:
    """Every metric in ``db`` (empty when the db or the table does not exist)."""
    from clawkit.storage import connect, exists

    if not exists(db):
        return {}
    try:
        conn = connect(db, read_only=True)
    except sqlite3.Error:
        return {}
    try:
        return {m: v for m, v in conn.execute(f"SELECT metric, value FROM {TABLE} ORDER BY metric")}
    except sqlite3.Error:
        return {}
    finally:
        conn.close()


def summary(metrics: dict[str, float]) -> dict[str, Any]:
    """The headline figures: counts plus the transport compression ratios."""
    ct1 = metrics.get("transport_chars_ct1", 0.0)
    dense = metrics.get("transport_chars_dense", 0.0)
    js = metrics.get("transport_chars_json", 0.0)
    return {
        "messages_routed": int(metrics.get("routed", 0)),
        "routes_by_profile": {k.split(":", 1)[1]: int(v) for k, v in metrics.items() if k.startswith("profile:")},
        "artifacts_stripped": int(metrics.get("artifacts_stripped", 0)),
        "messages_encoded": int(metrics.get("messages_encoded", 0)),
        "messages_decoded": int(metrics.get("messages_decoded", 0)),
        "subagent_dispatches": int(metrics.get("subagent_dispatches", 0)),
        "dispatch_routes": int(metrics.get("dispatch_routes", 0)),
        "dispatch_multi": int(metrics.get("dispatch_multi", 0)),
        "transport_ratio_vs_ct1": round(dense / ct1, 3) if ct1 else None,
        "transport_ratio_vs_json": round(dense / js, 3) if js else None,
    }
