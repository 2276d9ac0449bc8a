"""SQLite WAL checkpoints off the reply path.

In WAL mode with ``synchronous=NORMAL`` a commit only appends to the WAL file; the fsyncs happen
when the WAL is copied back into the database (a checkpoint). SQLite runs that checkpoint inside
whichever commit crosses ``wal_autocheckpoint`` pages, so every few dozen turns one turn paid two
fsyncs (measured: ~0.2–0.3 ms per turn on average, tens of ms for the unlucky turn). The store
turns automatic checkpoints off on its connection and this thread, with a connection of its own,
runs a PASSIVE checkpoint (never blocks writers or readers) whenever the WAL has grown past the
same threshold. Durability is unchanged: what a commit wrote is in the WAL either way.

The thread is a daemon and starts on first use; ``close()`` stops it (bounded wait) and the store's
own close then checkpoints what is left, as SQLite does when the last connection closes.
"""

from __future__ import annotations

import os
import sqlite3
import threading

#: the WAL size that triggers a checkpoint: SQLite's default (1000 pages of 4 KiB)
WAL_LIMIT = 1000 * 4096
#: commits between two looks at the WAL's size (a stat, in the thread)
EVERY = 32


class Checkpointer:
    def __init__(self, path: str):
        self.path = path
        self._wal = path + "-wal"
        self._commits = 0
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self.checkpoints = 0  # how many ran (tests, benchmarks)

    def committed(self) -> None:
        """Count a commit; every ``EVERY`` commits the thread checks the WAL."""
        self._commits += 1
        if self._commits >= EVERY:
            self._commits = 0
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="clawkit-checkpoint", daemon=True)
                self._thread.start()
            self._wake.set()

    def _run(self) -> None:
        conn = None
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=1000")
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stop:
                    return
                try:
                    if os.path.getsize(self._wal) >= WAL_LIMIT:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                        self.checkpoints += 1
                except (OSError, sqlite3.Error):
                    pass  # busy or gone: the next look (or the store's close) checkpoints
        except sqlite3.Error:
            return
        finally:
            if conn is not None:
                conn.close()

    def close(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._stop = True
            self._wake.set()
            self._thread.join(timeout)
            self._thread = None
