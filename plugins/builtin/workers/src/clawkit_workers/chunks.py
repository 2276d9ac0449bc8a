"""Streaming a queued turn's reply from the worker that runs it to the front-end that waits on it.

The worker writes what its turn delivers (the model's text deltas, a reply that was not
streamed) as rows of ``clawkit_turn_chunks`` and ``NOTIFY clawkit_chunks, '<turn id>'`` in the
same transaction; the front-end (``serve --db postgresql://…``) ``LISTEN``s, reads the rows past
the last one it delivered, and hands them to the request's ``deliver`` — the same callback an
in-process turn calls, so a client gets the same chunks either way.

Exactly once: a row's key is (turn, part, position): ``part`` is ``m<k>`` for the k-th model
call of the turn (counted the same way when a recovered turn replays its recorded calls) or
``r<k>`` for a reply delivered whole; ``position`` is the character offset in that part. A turn
recovered after its worker died re-runs only the model call that was cut short; its new
execution writes only the text *past* what the dead worker had already written for that call
(and a replayed call writes nothing), so the client's stream continues where it stopped, with
no character twice. The front-end reads rows by their id in order and remembers the last.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
from typing import Any, Callable

from . import pg

log = logging.getLogger("clawkit.workers.chunks")
CHANNEL = "clawkit_chunks"
KEEP_SECONDS = 3600.0  # rows older than this are swept (a front-end reads them while the turn runs)
DDL = """
CREATE TABLE IF NOT EXISTS clawkit_turn_chunks (
    id BIGSERIAL PRIMARY KEY, turn_id TEXT NOT NULL, part TEXT NOT NULL, pos INTEGER NOT NULL,
    kind TEXT NOT NULL, text TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL DEFAULT extract(epoch from clock_timestamp()),
    UNIQUE (turn_id, part, pos)
)"""


def ensure_schema(url: str) -> None:
    pg.ensure(url, "clawkit_turn_chunks", DDL)


def sweep(url: str, keep: float = KEEP_SECONDS) -> None:
    with pg.connect(url) as conn:
        conn.execute("DELETE FROM clawkit_turn_chunks WHERE created < extract(epoch from clock_timestamp()) - %s", (keep,))


# --- the worker's side -------------------------------------------------------------------


class ChunkWriter:
    """One per worker process: a thread writes queued rows in batches (one transaction and one
    NOTIFY per turn a batch touches), so a turn's event loop never waits on the database."""

    def __init__(self, url: str):
        self.url = url
        self._q: queue.Queue = queue.Queue()
        self._conn: Any = None
        self._thread = threading.Thread(target=self._run, name="clawkit-chunk-writer", daemon=True)
        self._thread.start()

    def put(self, turn_id: str, part: str, pos: int, kind: str, text: str) -> None:
        self._q.put((turn_id, part, pos, kind, text))

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every row put before this call is written."""
        done = threading.Event()
        self._q.put(done)
        done.wait(timeout)

    def stored(self, turn_id: str) -> dict[str, str]:
        """Text already written for each part of ``turn_id`` (by an earlier execution of it)."""
        with pg.connect(self.url) as conn:
            rows = conn.execute("SELECT part, string_agg(text, '' ORDER BY pos) FROM clawkit_turn_chunks "
                                "WHERE turn_id = %s GROUP BY part", (turn_id,)).fetchall()
        return {part: text for part, text in rows}

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(5)

    def _run(self) -> None:
        while True:
            item = self._q.get()
            batch, events, stop = [], [], False
            while True:
                if item is None:
                    stop = True
                elif isinstance(item, threading.Event):
                    events.append(item)
                else:
                    batch.append(item)
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._write(batch)
            for e in events:
                e.set()
            if stop:
                return

    def _write(self, batch: list[tuple]) -> None:
        for attempt in range(2):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = pg.connect(self.url)
                with self._conn.transaction():
                    with self._conn.cursor() as cur:
                        cur.executemany("INSERT INTO clawkit_turn_chunks (turn_id, part, pos, kind, text) "
                                        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (turn_id, part, pos) DO NOTHING", batch)
                    for turn_id in dict.fromkeys(row[0] for row in batch):
                        self._conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, turn_id))
                return
            except Exception as exc:  # the stream loses these rows; the turn's result still arrives whole
                self._conn = None
                if attempt:
                    log.warning("writing %d stream chunks failed: %s", len(batch), exc)


class TurnSink:
    """The ``deliver`` a streamed queued turn runs with: outbound messages become rows."""

    def __init__(self, writer: ChunkWriter, turn_id: str, stored: dict[str, str]):
        self.writer, self.turn_id, self.stored = writer, turn_id, stored
        self.calls = 0  # model calls finished (each ends with a ``final`` stream marker, replayed ones too)
        self.text = ""  # what the current model call has streamed in this execution

    def __call__(self, out: Any) -> None:
        if out.kind == "stream_chunk":
            if out.metadata.get("final"):
                self.calls, self.text = self.calls + 1, ""
                return
            if not out.content:
                return
            part = f"m{self.calls}"
            start, self.text = len(self.text), self.text + out.content
            cut = max(start, len(self.stored.get(part, "")))
            if cut < len(self.text):  # what an earlier execution already wrote is not written again
                self.writer.put(self.turn_id, part, cut, "chunk", self.text[cut:])
        elif out.kind == "final_reply" and not out.metadata.get("streamed") and out.content:
            part = f"r{self.calls}"
            if part not in self.stored:
                self.writer.put(self.turn_id, part, 0, "reply", out.content)


# --- the front-end's side ----------------------------------------------------------------


class _Watch:
    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[Any], Any]):
        self.loop, self.deliver = loop, deliver
        self.last = 0
        self.delivered = 0  # characters handed to ``deliver``
        self.lock = threading.Lock()


class ChunkFeed:
    """One per front-end process: a thread ``LISTEN``s on the channel and delivers new rows of the
    turns being watched, in order, on the watcher's event loop (a poll every ``interval`` s covers
    a notification lost to a reconnect)."""

    def __init__(self, url: str, interval: float = 0.5):
        self.url, self.interval = url, interval
        self._watches: dict[str, _Watch] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._conn: Any = None
        self._conn_lock = threading.Lock()

    def watch(self, turn_id: str, deliver: Callable[[Any], Any], loop: asyncio.AbstractEventLoop) -> None:
        """Start delivering ``turn_id``'s rows on ``loop`` (call before the turn is submitted)."""
        with self._lock:
            self._watches[turn_id] = _Watch(loop, deliver)
            if self._thread is None:
                self._thread = threading.Thread(target=self._listen, name="clawkit-chunk-feed", daemon=True)
                self._thread.start()
        self._ready.wait(10)  # listening before the worker can write (a miss would wait for the poll)

    async def finish(self, turn_id: str) -> int:
        """The turn ended: deliver its remaining rows, stop watching; returns the characters delivered."""
        w = self._watches.get(turn_id)
        if w is None:
            return 0
        try:
            rows = await asyncio.to_thread(self._fetch, turn_id, w)
            _deliver_rows(w, rows)
        finally:
            with self._lock:
                self._watches.pop(turn_id, None)
        return w.delivered

    def forget(self, turn_id: str) -> None:
        with self._lock:
            self._watches.pop(turn_id, None)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _fetch(self, turn_id: str, w: _Watch) -> list[tuple]:
        with w.lock, self._conn_lock:
            if self._conn is None or self._conn.closed:
                self._conn = pg.connect(self.url)
            rows = self._conn.execute("SELECT id, kind, text FROM clawkit_turn_chunks WHERE turn_id = %s AND id > %s "
                                      "ORDER BY id", (turn_id, w.last)).fetchall()
            if rows:
                w.last = rows[-1][0]
            return rows

    def _pass(self, turn_ids: set[str]) -> None:
        for turn_id in turn_ids:
            w = self._watches.get(turn_id)
            if w is None:
                continue
            rows = self._fetch(turn_id, w)
            if rows:
                w.loop.call_soon_threadsafe(_deliver_rows, w, rows)

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                with pg.connect(self.url) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._ready.set()
                    self._pass(set(self._watches))  # rows written while (re)connecting
                    while not self._stop.is_set():
                        heard = {n.payload for n in conn.notifies(timeout=self.interval, stop_after=1)}
                        self._pass(heard or set(self._watches))
            except Exception as exc:
                log.warning("listening for stream chunks failed (retrying): %s", exc)
                self._ready.set()
                self._stop.wait(1.0)


def _deliver_rows(w: _Watch, rows: list[tuple]) -> None:
    from clawkit.types import Outbound

    for _, kind, text in rows:
        w.delivered += len(text)
        out = (Outbound(kind="stream_chunk", content=text) if kind == "chunk"
               else Outbound(kind="final_reply", content=text, metadata={"streamed": False}))
        try:
            res = w.deliver(out)
            if inspect.isawaitable(res):
                asyncio.ensure_future(res)
        except Exception:
            log.exception("delivering a stream chunk failed")
