"""Full outputs of truncated tool calls, kept in the session database.

Tables ``truncator_outputs`` (one row per output) and ``truncator_output_chunks``
(the text in chunks of ``CHUNK_CHARS``) live in the session's SQLite file.
Chunks make a read at any offset cost one chunk, and keep each write small:
binding a value copies it while holding the GIL, so one 100 MB value would
stall the turn. Writing a 100 MB output takes a few hundred milliseconds, so for
a file database it runs on a background thread with its own connection (the
turn does not wait); :func:`read_range` waits for a pending write of the output
it reads. An in-memory store is written synchronously.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from clawkit.storage import Column, Index, Table, connect, declare

log = logging.getLogger("clawkit.truncator")

TABLE = "truncator_outputs"
CHUNKS = "truncator_output_chunks"
CHUNK_CHARS = 1_000_000
TABLES = (
    Table(TABLE, (
        Column("id", nullable=False), Column("session_id", nullable=False), Column("call_id"), Column("tool"),
        Column("chars", "integer", nullable=False), Column("stored_chars", "integer", nullable=False),
        Column("chunk_chars", "integer", nullable=False), Column("created", "real", nullable=False),
    ), primary_key=("id",), indexes=(Index(f"{TABLE}_session", ("session_id",)),)),
    Table(CHUNKS, (Column("output_id", nullable=False), Column("seq", "integer", nullable=False),
                   Column("content", nullable=False)), primary_key=("output_id", "seq")),
)
_pending: dict[str, threading.Thread] = {}
_errors: dict[str, str] = {}
_lock = threading.Lock()


def _db_path(store: Any) -> str | None:
    path = str(getattr(store, "path", ":memory:"))
    return None if path == ":memory:" else path


def ensure_table(conn: Any) -> None:
    declare(conn, *TABLES)


def save(store: Any, session_id: str, call_id: str, tool: str, content: str, max_chars: int) -> str:
    """Keep ``content`` (up to ``max_chars``) for the session; returns the output id at once."""
    output_id = "out_" + uuid.uuid4().hex[:12]
    stored = min(len(content), max_chars)
    row = (output_id, session_id, call_id, tool, len(content), stored, CHUNK_CHARS, time.time())
    ensure_table(store.conn)
    path = _db_path(store)
    if path is None:
        _insert(store.conn, row, content)
        return output_id

    def write() -> None:
        try:
            conn = connect(path, timeout=30)
            try:
                _insert(conn, row, content)
            finally:
                conn.close()
        except Exception as exc:  # reported to whoever reads this output
            log.warning("could not store output %s: %r", output_id, exc)
            _errors[output_id] = f"{type(exc).__name__}: {exc}"
        finally:
            with _lock:
                _pending.pop(output_id, None)

    thread = threading.Thread(target=write, name=f"truncator-store-{output_id}")
    with _lock:
        _pending[output_id] = thread
    thread.start()
    return output_id


def _insert(conn: sqlite3.Connection, row: tuple, content: str) -> None:
    output_id, stored = row[0], row[5]
    chunks = ((output_id, i // CHUNK_CHARS, content[i : min(i + CHUNK_CHARS, stored)]) for i in range(0, stored, CHUNK_CHARS))
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(f"INSERT INTO {TABLE} (id, session_id, call_id, tool, chars, stored_chars, chunk_chars, created)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
        conn.executemany(f"INSERT INTO {CHUNKS} (output_id, seq, content) VALUES (?, ?, ?)", chunks)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def wait(output_id: str | None = None, timeout: float = 60.0) -> None:
    """Wait for a pending write (one output, or all of them)."""
    with _lock:
        threads = [_pending[output_id]] if output_id in _pending else ([] if output_id else list(_pending.values()))
    for t in threads:
        t.join(timeout)


@dataclass
class OutputRange:
    output_id: str
    offset: int
    text: str
    chars: int
    stored_chars: int
    tool: str

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.text)
        return end if end < self.stored_chars else None


class OutputNotFound(LookupError):
    pass


def read_range(conn: sqlite3.Connection, session_id: str, output_id: str, offset: int, limit: int) -> OutputRange:
    """Characters ``[offset, offset+limit)`` of a stored output of this session."""
    wait(output_id)
    if output_id in _errors:
        raise OutputNotFound(f"output {output_id} could not be stored: {_errors[output_id]}")
    ensure_table(conn)
    row = conn.execute(f"SELECT chars, stored_chars, tool, chunk_chars FROM {TABLE} WHERE id = ? AND session_id = ?",
                       (output_id, session_id)).fetchone()
    if row is None:
        raise OutputNotFound(f"no stored output {output_id!r} in this session")
    chars, stored, tool, size = row
    end = min(offset + limit, stored)
    text = ""
    if offset < end:
        first, last = offset // size, (end - 1) // size
        parts = conn.execute(f"SELECT content FROM {CHUNKS} WHERE output_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                             (output_id, first, last)).fetchall()
        joined = "".join(p[0] for p in parts)
        text = joined[offset - first * size : end - first * size]
    return OutputRange(output_id, offset, text, chars, stored, tool or "")


def grep(conn: sqlite3.Connection, session_id: str, output_id: str, pattern: re.Pattern[str], offset: int,
         limit: int, chunk: int = 1_000_000) -> tuple[list[str], int | None, OutputRange]:
    """Lines matching ``pattern`` from ``offset`` on, as ``@<offset>: line``, up to ``limit`` chars.

    Returns (lines, offset to continue from or None, first range read). Reads the
    output a chunk at a time so memory stays bounded.
    """
    out: list[str] = []
    used = 0
    pos = offset
    first: OutputRange | None = None
    carry = ""
    while True:
        rng = read_range(conn, session_id, output_id, pos, chunk)
        first = first or rng
        if not rng.text:
            return out, None, first
        block = carry + rng.text
        base = pos - len(carry)
        last_nl = block.rfind("\n")
        complete, carry = (block[: last_nl + 1], block[last_nl + 1 :]) if rng.next_offset is not None else (block, "")
        start = 0
        for line in complete.splitlines(keepends=True):
            if pattern.search(line):
                entry = f"@{base + start}: {line.rstrip()}"
                if used + len(entry) + 1 > limit:
                    return out, base + start, first
                out.append(entry)
                used += len(entry) + 1
            start += len(line)
        if rng.next_offset is None:
            return out, None, first
        pos = rng.next_offset
