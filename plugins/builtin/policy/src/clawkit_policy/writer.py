"""Audit records written off the hot path.

A gate must decide in microseconds, but redacting, canonicalising, hash-chaining
and committing a record costs tens to hundreds. :meth:`LedgerWriter.submit` only
appends ``(kind, fields)`` to a deque; a daemon thread — with its own connection
to the same database file — does the rest in batches. The thread is not woken
per record (it would take the GIL from the gate that is still deciding): it
writes when asked to with :meth:`kick` (the policy kicks after each tool has
executed, while the model is being called again; kicks within :data:`COALESCE`
share one commit), when :data:`MAX_DELAY` has
passed (a long-running tool does not leave its decision record in memory for
long), when :data:`BATCH` records are waiting, and on :meth:`flush`, which waits
until everything submitted before it is committed (the policy flushes at the end
of every turn, and at interpreter exit). While it works it releases the GIL every
few records, so a gate that runs meanwhile is not held up for a switch interval:
in a turn the writer runs while the event loop waits for the tool or the model.

A write that fails is kept as ``error``; the next gate call raises it, so the
policy fails closed instead of running calls it cannot record. In-memory
databases (no file to open twice) are written synchronously.
"""

from __future__ import annotations

import atexit
import sqlite3
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable

from .ledger import AuditLedger

_live: "weakref.WeakSet[LedgerWriter]" = weakref.WeakSet()
IDLE_EXIT = 1.0  # seconds a writer thread waits for work before it ends (restarted on demand)
MAX_DELAY = 0.25  # seconds a record may wait for its batch when nobody kicks the writer
BATCH = 256  # records waiting that wake the writer by themselves
COALESCE = 0.002  # seconds a kicked writer waits (GIL released) so that kicks close together share a commit
CHUNK = 64  # records per transaction (hash-chained inside it: the GIL is held for ~0.3 ms)
YIELD_EVERY = 8  # records prepared between voluntary GIL releases
MAX_BACKLOG = 8192  # a drain this large runs flat out instead of yielding


class LedgerWriter:
    """Queue audit records for ``path`` (a file) or append them at once (``conn`` only)."""

    def __init__(self, conn: sqlite3.Connection, path: str | None, prepare: Callable[[dict[str, Any]], dict[str, Any]]):
        self.sync = AuditLedger(conn)
        self.path = path if path and path != ":memory:" else None
        self.prepare = prepare
        self.error: BaseException | None = None
        # (kind, fields) records, or (None, threading.Event) flush markers; deque appends are atomic
        self._items: "deque[tuple[str | None, Any]]" = deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()  # only for starting and ending the thread
        self._thread: threading.Thread | None = None
        self._urgent = False  # a flush is waiting: no coalescing delay
        _live.add(self)

    def submit(self, kind: str, fields: dict[str, Any]) -> None:
        """Record later (soon); raises the last write error, if any (fail closed)."""
        if self.error is not None:
            raise RuntimeError(f"the audit ledger cannot be written: {self.error}") from self.error
        if self.path is None:
            self.sync.append(kind, **self.prepare(fields))
            return
        items = self._items
        items.append((kind, fields))
        if self._thread is None:  # read after the append: a writer that has just ended is seen as None
            self._start()
        elif len(items) >= BATCH:
            self._wake.set()

    def kick(self) -> None:
        """Write what is queued now (without waiting for it)."""
        if self._items:
            self._wake.set()

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every record submitted before this call is committed (or has failed)."""
        if self.path is None:
            return
        done = threading.Event()
        self._items.append((None, done))
        self._urgent = True
        if self._thread is None:
            self._start()
        self._wake.set()
        done.wait(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="clawkit-audit", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=5000")
        ledger = AuditLedger(conn, create=False)
        items, wake = self._items, self._wake
        idle = 0.0
        try:
            while True:
                woken = wake.wait(MAX_DELAY)
                wake.clear()
                if not items:
                    idle = 0.0 if woken else idle + MAX_DELAY
                    if idle < IDLE_EXIT:
                        continue
                    with self._lock:
                        self._thread = None
                        if not items:
                            return
                        self._thread = threading.current_thread()  # a record slipped in: keep going
                idle = 0.0
                if woken and not self._urgent:
                    time.sleep(COALESCE)
                self._urgent = False
                self._drain(ledger)
        finally:
            conn.close()

    def _drain(self, ledger: AuditLedger) -> None:
        """Commit every queued record (in transactions of :data:`CHUNK`); release flush markers after."""
        items = self._items
        batch: list[tuple[str, dict[str, Any]]] = []
        markers: list[threading.Event] = []
        while items:
            kind, fields = items.popleft()
            if kind is None:
                markers.append(fields)
            else:
                batch.append((kind, fields))
        # A nice writer: it gives the GIL back every few records (a gate waiting for it runs at once
        # instead of after the 5 ms switch interval), unless a flush is waiting or the backlog is large.
        nice = len(batch) < MAX_BACKLOG
        for start in range(0, len(batch), CHUNK):
            prepared = []
            for i, (kind, fields) in enumerate(batch[start:start + CHUNK], 1):
                prepared.append((kind, self.prepare(fields)))
                if nice and i % YIELD_EVERY == 0 and not self._urgent:
                    time.sleep(0)
            try:  # still attempted after an error: the chain stays as complete as the disk allows
                ledger.append_many(prepared)
            except BaseException as exc:  # disk full, locked too long: the next gate call fails closed
                self.error = exc
            if nice and not self._urgent:
                time.sleep(0)
        for marker in markers:
            marker.set()


@atexit.register
def _flush_all() -> None:
    for writer in list(_live):
        writer.flush(5.0)
