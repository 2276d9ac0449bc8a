"""Audit records written off the hot path.

A gate must decide in microseconds, but a durable SQLite commit costs hundreds.
:class:`LedgerWriter` takes records on a queue and a daemon thread — with its own
connection to the same database file — redacts, hashes and commits them in
batches, usually while the tool is still running. ``flush()`` waits until
everything submitted is committed (the policy flushes at the end of every turn,
and at interpreter exit). A write that fails is kept as ``error``; the next gate
call raises it, so the policy fails closed instead of running calls it cannot
record. In-memory databases (no file to open twice) are written synchronously.
"""

from __future__ import annotations

import atexit
import queue
import sqlite3
import threading
import weakref
from typing import Any, Callable

from .ledger import AuditLedger

_live: "weakref.WeakSet[LedgerWriter]" = weakref.WeakSet()
IDLE_EXIT = 1.0  # seconds a writer thread waits for work before it ends (restarted on demand)


class LedgerWriter:
    """Queue audit records for ``path`` (a file) or append them at once (``conn`` only)."""

    def __init__(self, conn: sqlite3.Connection, path: str | None, prepare: Callable[[dict[str, Any]], dict[str, Any]]):
        self.sync = AuditLedger(conn)
        self.path = path if path and path != ":memory:" else None
        self.prepare = prepare
        self.error: BaseException | None = None
        self._queue: "queue.Queue[tuple[str, dict[str, Any]] | None]" = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        _live.add(self)

    def submit(self, kind: str, fields: dict[str, Any]) -> None:
        """Record later (soon); raises the last write error, if any (fail closed)."""
        if self.error is not None:
            raise RuntimeError(f"the audit ledger cannot be written: {self.error}") from self.error
        if self.path is None:
            self.sync.append(kind, **self.prepare(fields))
            return
        with self._lock:
            self._pending += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="clawkit-audit", daemon=True)
                self._thread.start()
            self._queue.put((kind, fields))  # under the lock: an idle writer cannot exit past it

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every submitted record is committed."""
        with self._lock:
            self._idle.wait_for(lambda: self._pending == 0, timeout)

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=5000")
        ledger = AuditLedger(conn, create=False)
        try:
            while True:
                try:
                    item = self._queue.get(timeout=IDLE_EXIT)
                except queue.Empty:
                    with self._lock:
                        if self._queue.empty():
                            self._thread = None
                            return
                    continue
                batch = [item]
                while True:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                try:
                    ledger.append_many([(kind, self.prepare(fields)) for kind, fields in batch if kind])
                except BaseException as exc:  # disk full, locked too long: the next gate call fails closed
                    self.error = exc
                with self._lock:
                    self._pending -= len(batch)
                    self._idle.notify_all()
        finally:
            conn.close()


@atexit.register
def _flush_all() -> None:
    for writer in list(_live):
        writer.flush(5.0)
