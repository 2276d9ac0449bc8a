"""The session store's commits, grouped: made when the turn next waits, not where it writes.

A commit in WAL mode costs tens of microseconds of system calls (two writes per page the
transaction touched, the WAL-index locks): four per turn were a third of the kernel's turn. The
store hands each commit point's statements to this writer, which commits everything handed in
since its last commit as one transaction as soon as the event loop gets control back — when the
turn waits for the model, a tool, or anything else — so a turn's writes between two waits, and a
burst of concurrent sessions, share one commit. Whoever needs a write on disk before going on (a
tool call before the tool runs, a read, the store's close) commits the queue at once
(:meth:`StoreWriter.wait`). Outside a running event loop every hand-in commits at once.

A thread of its own was measured first: on this 2-core machine the thread wake-ups and the GIL
hand-offs cost more than the commits they moved (kernel turn in memory 589 -> 762 us).

``store.conn`` (a :class:`LockedConnection`) commits what is queued before each statement, so a
plugin's direct read sees what the store wrote before it, as when every commit was made in
place; its statements, and an explicit transaction to its end, hold :attr:`StoreWriter.lock`,
which the writer holds for its commits (threads a plugin starts share the connection safely).

A commit that fails is retried without the statement that failed (a plugin's queued statement
must not lose the turn's messages with it; the failure is logged); a failure of the database
itself (a full disk) is kept, raised to whoever waits or hands in more work, and the batch stays
queued for the next attempt. Interpreter exit commits what is queued (``atexit``).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import weakref
from collections import deque
from typing import Any, Callable

log = logging.getLogger("clawkit.sessions")

#: writers alive in this process: committed at interpreter exit
_LIVE: "weakref.WeakSet[StoreWriter]" = weakref.WeakSet()


def run_write(conn: Any, sql: Any, params: tuple | None) -> int | None:
    """One queued write on ``conn``: a statement (returns its row id) or, with ``params`` None, a
    :meth:`SessionStore.queue_call` callable ``sql(conn)``."""
    if params is None and callable(sql):
        sql(conn)
        return None
    return conn.execute(sql, params).lastrowid


class StoreWriter:
    def __init__(self, conn: Any, on_commit: Callable[[], None] | None = None):
        self.conn = conn  # the raw sqlite3 connection
        self.lock = threading.RLock()  # held for a transaction on ``conn``, by anyone
        self._on_commit = on_commit
        self._queue: deque = deque()  # (seq, writes, after)
        self.submitted = 0  # the last batch handed in
        self.committed = 0  # every batch up to here is committed
        self.error: BaseException | None = None
        self._scheduled: Any = None  # the event loop a commit is scheduled on
        self.commits = 0  # transactions made (tests, benchmarks)
        self.last_rowid: int | None = None  # of the last statement committed
        _LIVE.add(self)

    def submit(self, writes: list[tuple[str, tuple]], after: Callable[[], None] | None = None) -> int:
        """Hand ``writes`` (``(sql, params)`` pairs, committed together) in; ``after`` runs once
        they are committed. Returns the batch's ticket for :meth:`wait`."""
        if self.error is not None:
            self._raise()
        with self.lock:
            self.submitted += 1
            seq = self.submitted
            self._queue.append((seq, writes, after))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to come back to: now
            self.commit_queued()
            return seq
        if self._scheduled is not loop:
            self._scheduled = loop
            loop.call_soon(self._when_idle)
        return seq

    def _when_idle(self) -> None:
        self._scheduled = None
        try:
            self.commit_queued()
        except Exception as exc:  # kept in self.error: raised to the next hand-in or wait
            import sqlite3

            if isinstance(exc, sqlite3.DatabaseError):  # locked, corrupt, disk full: raised to the caller, who says it
                log.warning("clawkit: the session store could not commit: %s", exc)
            else:
                log.exception("clawkit: the session store could not commit")

    def commit_queued(self) -> None:
        """Commit every batch handed in so far (one transaction), on the calling thread."""
        with self.lock:
            if not self._queue:
                return
            batches = list(self._queue)
            try:
                self._commit(batches)
            except BaseException as exc:
                self.error = exc
                raise
            self._queue.clear()
            self.error = None
            self.committed = batches[-1][0]
        for _, _, after in batches:
            if after is not None:
                try:
                    after()
                except Exception:
                    log.exception("clawkit: a store writer callback failed")

    def _commit(self, batches: list) -> None:
        conn = self.conn
        writes = [w for _, ws, _ in batches for w in ws]
        if not writes:
            return
        if conn.in_transaction:  # inside a caller's own transaction: committed with it
            for sql, params in writes:
                self.last_rowid = run_write(conn, sql, params)
            return
        while True:
            try:
                self._transaction(writes)
                break
            except Exception as exc:
                bad = getattr(exc, "_clawkit_index", None)
                if bad is None:
                    raise
                # a statement failed (a plugin's queued SQL): the rest is committed without it
                what = writes[bad][0]
                log.warning("clawkit: a queued store write failed and was dropped (%s: %s): %s",
                            type(exc).__name__, exc, what[:200] if isinstance(what, str) else repr(what))
                writes = writes[:bad] + writes[bad + 1:]
        self.commits += 1
        if self._on_commit is not None:
            self._on_commit()

    def _transaction(self, writes: list[tuple[str, tuple]]) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")  # the write lock from the start: a queued call may read, then write
        try:
            for i, (sql, params) in enumerate(writes):
                try:
                    self.last_rowid = run_write(conn, sql, params)  # a raising queue_call: retried without it
                except Exception as exc:
                    if params is None or _is_statement_error(exc):
                        exc._clawkit_index = i  # type: ignore[attr-defined]
                    raise
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def wait(self, seq: int | None = None) -> None:
        """Return once batch ``seq`` (default: every batch handed in) is committed: commits the
        queue now (raises what the commit raised)."""
        if self.committed < (self.submitted if seq is None else seq):
            self.commit_queued()

    def _raise(self) -> None:
        raise OSError(f"the session store could not commit: {self.error}") from self.error

    def close(self) -> None:
        """Commit what is queued."""
        try:
            self.commit_queued()
        finally:
            _LIVE.discard(self)


def _is_statement_error(exc: BaseException) -> bool:
    """A statement's own fault (bad SQL, a constraint) — not the database's (I/O, full, locked)."""
    import sqlite3

    if isinstance(exc, (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError)):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc)
        return not any(s in text for s in ("disk", "full", "locked", "busy", "readonly", "I/O", "unable to open"))
    return False


class LockedConnection:
    """``store.conn``: the sqlite3 connection's API, each statement under the writer's lock (and an
    explicit transaction — ``with conn:``, ``BEGIN`` … ``COMMIT`` — under it to its end), after
    the commits already handed to the writer."""

    def __init__(self, raw: Any, writer: StoreWriter):
        self._raw = raw
        self._writer = writer
        self._held = False  # an explicit transaction is open: its statement's hold on the lock is kept

    def _settle(self) -> None:
        w = self._writer
        if w.committed < w.submitted:
            w.wait()

    def _keep(self) -> None:
        """After a statement (the lock taken once more for it): an explicit transaction the caller
        opened keeps the lock until it ends; otherwise the statement's hold is given back."""
        lock, open_ = self._writer.lock, self._raw.in_transaction
        if open_ and not self._held:
            self._held = True  # kept: the transaction's end releases it
            return
        if not open_ and self._held:
            self._held = False
            lock.release()
        lock.release()

    def _call(self, method: Callable[..., Any], *args: Any, settle: bool = True) -> Any:
        if settle:
            self._settle()
        self._writer.lock.acquire()
        try:
            return method(*args)
        finally:
            self._keep()

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self._call(self._raw.execute, sql, params)

    def executemany(self, sql: str, seq: Any) -> Any:
        return self._call(self._raw.executemany, sql, seq)

    def executescript(self, script: str) -> Any:
        return self._call(self._raw.executescript, script)

    def commit(self) -> None:
        self._call(self._raw.commit, settle=False)

    def rollback(self) -> None:
        self._call(self._raw.rollback, settle=False)

    def __enter__(self) -> "LockedConnection":
        self._settle()
        self._writer.lock.acquire()
        self._raw.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._raw.__exit__(*exc)
        finally:
            self._keep()

    @property
    def in_transaction(self) -> bool:
        return self._raw.in_transaction

    def __getattr__(self, name: str) -> Any:  # row_factory, total_changes, create_function, …
        return getattr(self._raw, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._raw, name, value)


@atexit.register
def _commit_all() -> None:
    for writer in list(_LIVE):
        try:
            writer.close()
        except BaseException:
            pass
