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

A flush on the thread that uses the session store writes with the store's own
connection (a commit by a second connection makes SQLite drop the other's page
cache: every turn re-read its pages twice); the thread, and a flush from any other
thread, write with a connection of the writer's own (opened on the first such
write, closed when the thread idles out). One lock: records are committed in the
order they were submitted, whichever thread writes them.
The thread gives the GIL back every few records, so a gate that runs meanwhile
is not held up for a switch interval.

Durability (group commit). A commit is made with ``synchronous=NORMAL``: once
:meth:`flush` returns, the records are in the WAL and survive the process being
killed (SIGKILL, OOM, a crash), but not yet a power loss. The thread then makes
them durable off the reply path, at most :data:`SYNC_DELAY` after the first commit
not yet synced (at once when a caller waits for it) — ``fdatasync`` of the WAL,
one for every record committed so far, by this or any other session: one fsync
and one anchor write per window instead of per turn (with many sessions at once,
per commit), which cost a busy process's turns more than their own work — and only then
advances the anchor outside the database (:func:`.anchor.advance_anchor`):
the anchor never claims a record a power loss could take. A gate does not decide
a session's next call while that session's earlier records are not yet durable
(:meth:`durable`, awaited by ``before_tool_call``); the fsync takes far less than the model call between two
tool calls, so that wait is almost always nil. A session that goes on (a chat) asks for the sync as
its next turn opens (:meth:`sync_soon`), so the fsync overlaps that turn's model call. Because SQLite replays a WAL only
up to its first missing frame, what a power loss can take is always a suffix of
the commits: never an audit record while a later tool-result message survives.

A write that fails (the database cannot be opened, the disk is full, a lock is
held too long, the anchor or an fsync fails) is kept as ``error``; the next
:meth:`submit` — the next gate call — raises it, so the policy fails closed
instead of running calls it cannot record. In-memory databases (no file to open
twice) are written synchronously.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
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
SYNC_DELAY = 0.05  # seconds a commit may wait for its fsync when nobody waits for it (group commit window)
BATCH = 256  # records waiting that wake the writer thread by themselves
CHUNK = 64  # records per transaction on the thread (hash-chained inside it: the GIL is held for ~0.3 ms)
FLUSH_CHUNK = 512  # records per transaction of a flush (it holds the GIL throughout anyway: fewer commits)
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
        self._order = threading.Lock()  # a record's number and its place in the queue, together
        self._submitted = 0  # records submitted (queued) so far
        self._taken = 0  # of those, records whose commit has ended (committed, or failed: see ``error``)
        self._wake = threading.Event()
        self._lock = threading.Lock()  # starting and ending the thread
        self._io = threading.Lock()  # held while records are taken from the queue and until they are committed
        self._ledger: AuditLedger | None = None  # on the writer's own connection (opened by the first write)
        self._conn = conn
        self._owner = threading.current_thread()  # the thread that uses ``conn`` (the agent's loop)
        self._shared: AuditLedger | None = None  # on ``conn``, for flushes on its owner thread
        self._thread: threading.Thread | None = None
        self._urgent = False  # a flush is waiting for the thread: it stops yielding
        self._stopping = False  # close(): the thread ends as soon as the queue is empty
        self._synced = threading.Condition()  # guards the three below; notified when ``durable_seq`` moves
        self._head: tuple[int, str] | None = None  # (seq, hash) of the last record committed here
        self.durable_seq = 0  # every record up to here is on disk and anchored
        self._session_seq: dict[str, int] = {}  # session -> its last committed record not yet durable
        self._due = 0.0  # monotonic time by which the thread writes queued records nobody flushed
        self._sync_at = 0.0  # monotonic time by which the thread syncs what is committed (0: nothing to sync)
        self._sync_now = False  # a caller waits for durability: the thread syncs without waiting for _sync_at
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._soon: tuple[asyncio.AbstractEventLoop, asyncio.Future] | None = None  # the flush_soon of a loop
        _live.add(self)

    def submit(self, kind: str, fields: dict[str, Any]) -> int:
        """Record later (soon); raises the last write error, if any (fail closed). Returns the record's
        number for :meth:`flush_through` (0: written already)."""
        if self.error is not None:
            raise RuntimeError(f"the audit ledger cannot be written: {self.error}") from self.error
        if self.path is None:
            self.sync.append(kind, **self.prepare(fields))
            return 0
        items = self._items
        if not items:
            self._due = time.monotonic() + MAX_DELAY  # the thread writes it then if no flush has
        with self._order:  # numbered in queue order, whichever thread submits
            self._submitted = number = self._submitted + 1
            items.append((kind, fields))
        if self._thread is None:  # read after the append: a writer that has just ended is seen as None
            self._start()
        elif len(items) >= BATCH:
            self.kick()
        return number

    def kick(self) -> None:
        """Let the thread write what is queued now (without waiting for it)."""
        if self._items:
            self._due = 0.0
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

    def flush_through(self, number: int, timeout: float = 10.0) -> None:
        """:meth:`flush`, unless record ``number`` (:meth:`submit`'s) and every one before it are committed
        already: a turn's end commits its own records, not (at once, in a transaction of their own) the ones
        other sessions have queued since — those ride with the next flush."""
        if number > self._taken:
            self.flush(timeout)

    def flush_soon(self) -> "asyncio.Future":
        """A future of the running loop, done once every record submitted before this call is committed
        (or the failure recorded in :attr:`error`): one :meth:`flush` for every caller of the same loop
        iteration. Many sessions' tool calls that end together then share one transaction instead of a
        transaction each (with 500 concurrent sessions this was a transaction per tool call)."""
        loop = asyncio.get_running_loop()
        soon = self._soon
        if soon is not None and soon[0] is loop and not soon[1].done():
            return soon[1]
        fut = loop.create_future()
        self._soon = (loop, fut)
        loop.call_soon(self._flush_for, fut)
        return fut

    def _flush_for(self, fut: "asyncio.Future") -> None:
        if self._soon is not None and self._soon[1] is fut:
            self._soon = None  # a later caller gets a later flush: its record may not be queued yet for this one
        try:
            self.flush()
        except BaseException as exc:  # flush records write failures in ``error``; anything else fails the waiters
            if not fut.done():
                fut.set_exception(exc)
            return
        if not fut.done():
            fut.set_result(None)

    # durability ------------------------------------------------------------------------

    def _behind(self) -> bool:
        head = self._head
        return head is not None and head[0] > self.durable_seq and self.error is None

    def durable(self, session_id: str) -> "asyncio.Future | None":
        """None when every record of ``session_id`` committed so far is on disk and anchored (or the
        writer failed: the caller's next :meth:`submit` raises); else a future of the running loop,
        done once they are (the gate awaits it before deciding that session's next call)."""
        target = self._session_seq.get(session_id)
        if target is None or target <= self.durable_seq or self.error is not None:
            return None
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._synced:
            if target <= self.durable_seq or self.error is not None:
                return None
            self._waiters.append((target, loop, fut))
        self._ask_sync()
        return fut

    def sync_soon(self, session_id: str) -> None:
        """Start syncing now (not at the end of the group-commit window) when ``session_id`` has records
        committed and not yet durable: its next tool call is going to wait for them (:meth:`durable`),
        and the fsync then runs while that turn builds its prompt and calls the model."""
        target = self._session_seq.get(session_id)
        if target is not None and target > self.durable_seq and self.error is None:
            self._ask_sync()

    def wait_durable(self, timeout: float = 10.0) -> None:
        """Block until every record committed so far is on disk and anchored (or the writer failed)."""
        if not self._behind():
            return
        self._ask_sync()
        with self._synced:
            target = self._head[0] if self._head else 0
            if not self._synced.wait_for(lambda: self.durable_seq >= target or self.error is not None, timeout):
                log.warning("audit: records were not synced to disk within %.0f s", timeout)

    def _ask_sync(self) -> None:
        """Sync now: somebody waits for durability."""
        self._sync_now = True
        if self._thread is None:  # read after the commit: a writer that has just ended is seen as None
            self._start()
        else:
            self._wake.set()

    def _sync(self) -> None:
        """fdatasync the WAL (or the database file), then advance the anchor (on the writer's thread)."""
        self._sync_now = False  # reset before the head is read: whoever asked since is covered by this sync
        self._sync_at = 0.0
        with self._synced:
            head = self._head
        if head is None or head[0] <= self.durable_seq or self.error is not None:
            return
        ledger = self._ledger or self.sync
        try:
            base = ledger.db or self.path
            # PostgreSQL: durable when COMMIT returns, anchored by the ledger itself; no file to sync
            inline = is_postgres_url(self.path)
            # The WAL alone: what is committed is in it, or was checkpointed into the database file,
            # which SQLite syncs after every checkpoint (synchronous=NORMAL) before it reuses the WAL.
            # Without a WAL (the last connection checkpointed and removed it), the file itself.
            for name in () if inline else (f"{base}-wal", base):
                try:
                    fd = os.open(name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                except FileNotFoundError:
                    continue
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
                break
            if not inline and ledger.db is not None and ledger.key is not None:
                from .anchor import advance_anchor

                advance_anchor(ledger.key, ledger.db, head[0], head[1])
        except BaseException as exc:
            self._fail(exc, 0)
            return
        with self._synced:
            self.durable_seq = done = max(self.durable_seq, head[0])
            self._session_seq = {sid: seq for sid, seq in self._session_seq.items() if seq > done}
            self._release(lambda target: target <= done)

    def _release(self, ready: Callable[[int], bool]) -> None:
        """Wake waiters whose target is ``ready`` (hold ``_synced``)."""
        self._synced.notify_all()
        keep = []
        for target, loop, fut in self._waiters:
            if not ready(target):
                keep.append((target, loop, fut))
                continue
            try:
                loop.call_soon_threadsafe(_settle, fut)
            except RuntimeError:  # that loop is closed: nobody waits any more
                pass
        self._waiters = keep

    def close(self, timeout: float = 5.0) -> None:
        """Commit what is queued, make it durable and end the writer thread, joined (it starts
        again on the next record). Called when an agent closes and at interpreter exit."""
        self.flush(timeout)
        self.wait_durable(timeout)
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
                now = time.monotonic()
                behind = self._behind()
                # queued records are the flushes' to write, unless they wait too long (a slow tool): a
                # drain here, while the turn writes, would make its commits wait for SQLite's lock
                if items and (self._stopping or now >= self._due):
                    idle = 0.0
                    with self._io:
                        self._drain(nice=True)
                    continue
                # group commit: one fsync for every commit of the last SYNC_DELAY, sooner when a caller waits
                if behind and (self._sync_now or self._stopping or now >= self._sync_at):
                    idle = 0.0
                    self._sync()  # outside ``_io``: flushes on other threads commit meanwhile
                    continue
                delay = MAX_DELAY
                if items:
                    delay = min(delay, self._due - now)
                if behind:
                    delay = min(delay, self._sync_at - now)
                woken = wake.wait(max(0.0, delay))
                wake.clear()
                if woken or items or self._behind():
                    idle = 0.0
                    continue
                idle += delay
                if idle < IDLE_EXIT and not self._stopping:
                    continue
                with self._lock:
                    self._thread = None
                    if not items and not self._behind():
                        return
                    self._thread = threading.current_thread()  # a record slipped in: keep going
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
                # committed = in the WAL (survives a killed process); the thread fsyncs it (see the module doc)
                conn.execute("PRAGMA synchronous=NORMAL")
                ledger = AuditLedger(conn, create=False)
                if ledger.db is not None and ledger.key is not None:
                    from .anchor import check_writable

                    check_writable(ledger.db)  # a broken audit home fails this write, not a later sync
            except BaseException:
                conn.close()
                raise
            ledger.anchor = False  # advanced by _sync once the records are durable
            self._ledger = ledger
        return self._ledger

    def _flusher(self) -> AuditLedger:
        """The ledger a flush writes with: on the session store's own connection when the flush runs on
        the thread that uses it (SQLite). One connection for the turn's writes and the ledger's: a commit
        by a second connection makes SQLite drop the other's page cache, so each turn would re-read its
        pages twice. The thread (and a flush from elsewhere, or after the store closed) uses its own."""
        if self._owner is not threading.current_thread() or is_postgres_url(self.path):
            return self._open()
        try:
            busy = self._conn.in_transaction  # raises once the store has closed its connection
        except sqlite3.ProgrammingError:
            return self._open()
        if busy:  # its records would commit with someone else's transaction, after the anchor may name them
            return self._open()
        if self._shared is None:
            ledger = AuditLedger(self._conn, create=False, key=self.sync.key)
            if ledger.db is not None and ledger.key is not None:
                from .anchor import check_writable

                check_writable(ledger.db)  # a broken audit home fails this write, not a later sync
            ledger.anchor = False  # advanced by _sync once the records are durable
            self._shared = ledger
        return self._shared

    def _drain(self, nice: bool) -> None:
        """Commit every queued record in order (transactions of :data:`CHUNK` on the thread, :data:`FLUSH_CHUNK`
        in a flush). Hold ``_io``."""
        items = self._items
        if not items:
            return
        batch = []
        while items:
            batch.append(items.popleft())
        try:
            self._drain_batch(batch, nice)
        finally:
            self._taken += len(batch)  # (under ``_io``: one drain at a time, in queue order)

    def _drain_batch(self, batch: list[tuple[str, dict[str, Any]]], nice: bool) -> None:
        try:
            ledger = self._open() if nice else self._flusher()
        except BaseException as exc:  # the directory is gone, permissions: fail closed from now on
            self._fail(exc, len(batch))
            return
        # A nice writer (the thread) gives the GIL back every few records (a gate waiting for it runs
        # at once instead of after the 5 ms switch interval), unless a flush waits or the backlog is large.
        nice = nice and len(batch) < MAX_BACKLOG
        prepare = self.prepare
        wake_thread = False
        size = CHUNK if nice else FLUSH_CHUNK
        for start in range(0, len(batch), size):
            chunk = batch[start:start + size]
            try:  # still attempted after an error: the chain stays as complete as the disk allows
                prepared = []
                for i, (kind, fields) in enumerate(chunk, 1):
                    prepared.append((kind, prepare(fields)))
                    if nice and i % YIELD_EVERY == 0 and not self._urgent:
                        time.sleep(0)
                rows = ledger.append_many(prepared)
                if rows and ledger.last is not None:
                    with self._synced:
                        self._head = ledger.last
                        for row in rows:
                            if row["session_id"] is not None:
                                self._session_seq[row["session_id"]] = row["seq"]
                    if not self._sync_at:
                        self._sync_at = time.monotonic() + SYNC_DELAY
                        wake_thread = True
            except BaseException as exc:  # disk full, locked too long: the next gate call fails closed
                self._fail(exc, len(chunk))
            if nice and not self._urgent:
                time.sleep(0)
        if self._thread is None:  # read after the commit: a writer that has just ended is seen as None
            self._start()
        elif wake_thread and self._thread is not threading.current_thread():
            self._wake.set()  # once per group-commit window: the thread sleeps until _sync_at

    def _fail(self, exc: BaseException, lost: int) -> None:
        if self.error is None:
            log.warning("audit ledger %s: %d record(s) could not be written (%s); further tool calls are blocked",
                        self.path, lost, exc)
        self.error = exc
        with self._synced:
            self._release(lambda target: True)  # waiters go on to fail closed on ``error``


def _settle(fut: "asyncio.Future") -> None:
    if not fut.done():
        fut.set_result(None)


@atexit.register
def close_all() -> None:
    """Commit every queued record and join every writer thread (agent close, interpreter exit)."""
    for writer in list(_live):
        writer.close(5.0)  # nothing to do (no connection opened) for a writer with nothing queued
