"""Audit records written off the gate's path, committed on the caller's thread at flush points.

A gate must decide in microseconds, but redacting, canonicalising, hash-chaining
and committing a record costs tens. :meth:`LedgerWriter.submit` only appends
``(kind, fields)`` to a deque. The records are committed:

* by :meth:`flush`, **on the calling thread**: the policy flushes at the end of
  every turn (the turn's records are durable before its reply goes out), and
  :func:`~clawkit_policy.ledger_for` before reading. Waking a thread and waiting
  for it cost a turn milliseconds (a thread switch, GIL hand-offs, a coalescing
  sleep) for work worth tens of microseconds; writing in place costs just the work.
  With nothing queued, a flush does nothing (no thread, no connection);
* by a daemon thread, for records nobody flushes soon (a long-running tool, a
  model call that takes seconds): it wakes every :data:`MAX_DELAY`, or when
  :data:`BATCH` records are waiting, and ends after :data:`IDLE_EXIT` idle seconds.

Both write with one connection of the writer's own to the database file (opened
on the first write, closed when the thread idles out), under one lock: records
are committed in the order they were submitted, whichever thread writes them.
The thread gives the GIL back every few records, so a gate that runs meanwhile
is not held up for a switch interval.

A write that fails (the database cannot be opened, the disk is full, a lock is
held too long) is kept as ``error``; the next :meth:`submit` — the next gate
call — raises it, so the policy fails closed instead of running calls it cannot
record. In-memory databases (no file to open twice) are written synchronously.
"""

from __future__ import annotations

import atexit
import logging
import sqlite3
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable

from clawkit.storage import connect, is_postgres_url

from .ledger import AuditLedger

log = logging.getLogger("clawkit.policy")

_live: "weakref.WeakSet[LedgerWriter]" = weakref.WeakSet()
IDLE_EXIT = 1.0  # seconds a writer thread waits for work before it ends (restarted on demand)
MAX_DELAY = 0.25  # seconds a record may wait for the thread when nobody flushes
BATCH = 256  # records waiting that wake the writer thread by themselves
CHUNK = 64  # records per transaction (hash-chained inside it: the GIL is held for ~0.3 ms)
YIELD_EVERY = 8  # records prepared between voluntary GIL releases (thread only)
MAX_BACKLOG = 8192  # a drain this large runs flat out instead of yielding


class LedgerWriter:
    """Queue audit records for ``path`` (a file) or append them at once (``conn`` only)."""

    def __init__(self, conn: sqlite3.Connection, path: str | None, prepare: Callable[[dict[str, Any]], dict[str, Any]]):
        self.sync = AuditLedger(conn)
        self.path = path if path and path != ":memory:" else None
        self.prepare = prepare
        self.error: BaseException | None = None
        self._items: "deque[tuple[str, dict[str, Any]]]" = deque()  # appends and pops are atomic
        self._wake = threading.Event()
        self._lock = threading.Lock()  # starting and ending the thread
        self._io = threading.Lock()  # held while records are taken from the queue and until they are committed
        self._ledger: AuditLedger | None = None  # on the writer's own connection (opened by the first write)
        self._thread: threading.Thread | None = None
        self._urgent = False  # a flush is waiting for the thread: it stops yielding
        self._stopping = False  # close(): the thread ends as soon as the queue is empty
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
        """Let the thread write what is queued now (without waiting for it)."""
        if self._items:
            self._wake.set()

    @property
    def pending(self) -> int:
        """Records submitted and not yet taken for writing."""
        return len(self._items)

    def flush(self, timeout: float = 10.0) -> None:
        """Commit every record submitted before this call (or record the failure), on this thread.

        Returns at once when nothing is queued or being written. Records the thread is
        writing are waited for (up to ``timeout`` seconds), then the rest is written here.
        """
        if self.path is None or (not self._items and not self._io.locked()):
            return  # the queue is read first: a record taken from it is committed before the lock is released
        self._urgent = True
        if not self._io.acquire(timeout=timeout):
            log.warning("audit flush: the writer was busy for %.0f s; records may not be committed yet", timeout)
            return
        try:
            self._urgent = False
            self._drain(nice=False)
        finally:
            self._io.release()

    def close(self, timeout: float = 5.0) -> None:
        """Commit what is queued and end the writer thread, joined (it starts again on the
        next record). Called when an agent closes and at interpreter exit."""
        self.flush(timeout)
        with self._lock:
            thread = self._thread
            self._stopping = True
        try:
            if thread is not None and thread is not threading.current_thread():
                self._wake.set()
                thread.join(timeout)
                if thread.is_alive():
                    log.warning("audit writer thread still running after %.0f s", timeout)
        finally:
            self._stopping = False

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="clawkit-audit", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        items, wake = self._items, self._wake
        idle = 0.0
        try:
            while True:
                woken = wake.wait(MAX_DELAY)
                wake.clear()
                if not items:
                    idle = 0.0 if woken else idle + MAX_DELAY
                    if idle < IDLE_EXIT and not self._stopping:
                        continue
                    with self._lock:
                        self._thread = None
                        if not items:
                            return
                        self._thread = threading.current_thread()  # a record slipped in: keep going
                idle = 0.0
                with self._io:
                    self._drain(nice=True)
        finally:
            with self._lock:
                if self._thread is threading.current_thread():  # ended by an error: restart on demand
                    self._thread = None
            with self._io:
                if self._ledger is not None and self._thread is None:
                    self._ledger.conn.close()
                    self._ledger = None

    def _open(self) -> AuditLedger:
        if self._ledger is None:
            if is_postgres_url(self.path):
                conn = connect(self.path)  # commits are durable on the server when COMMIT returns
                self._ledger = AuditLedger(conn, create=False)
                return self._ledger
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)  # type: ignore[arg-type]
            try:
                conn.execute("PRAGMA busy_timeout=5000")
                conn.execute("PRAGMA synchronous=FULL")  # a commit is on disk (WAL fsynced) when flush returns
            except BaseException:
                conn.close()
                raise
            self._ledger = AuditLedger(conn, create=False)
        return self._ledger

    def _drain(self, nice: bool) -> None:
        """Commit every queued record in order (transactions of :data:`CHUNK`). Hold ``_io``."""
        items = self._items
        if not items:
            return
        batch = []
        while items:
            batch.append(items.popleft())
        try:
            ledger = self._open()
        except BaseException as exc:  # the directory is gone, permissions: fail closed from now on
            self._fail(exc, len(batch))
            return
        # A nice writer (the thread) gives the GIL back every few records (a gate waiting for it runs
        # at once instead of after the 5 ms switch interval), unless a flush waits or the backlog is large.
        nice = nice and len(batch) < MAX_BACKLOG
        prepare = self.prepare
        for start in range(0, len(batch), CHUNK):
            chunk = batch[start:start + CHUNK]
            try:  # still attempted after an error: the chain stays as complete as the disk allows
                prepared = []
                for i, (kind, fields) in enumerate(chunk, 1):
                    prepared.append((kind, prepare(fields)))
                    if nice and i % YIELD_EVERY == 0 and not self._urgent:
                        time.sleep(0)
                ledger.append_many(prepared)
            except BaseException as exc:  # disk full, locked too long: the next gate call fails closed
                self._fail(exc, len(chunk))
            if nice and not self._urgent:
                time.sleep(0)

    def _fail(self, exc: BaseException, lost: int) -> None:
        if self.error is None:
            log.warning("audit ledger %s: %d record(s) could not be written (%s); further tool calls are blocked",
                        self.path, lost, exc)
        self.error = exc


@atexit.register
def close_all() -> None:
    """Commit every queued record and join every writer thread (agent close, interpreter exit)."""
    for writer in list(_live):
        writer.close(5.0)  # nothing to do (no connection opened) for a writer with nothing queued
