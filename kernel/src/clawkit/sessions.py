"""Sessions in SQLite: the single source of truth for messages, metadata, events, usage.

What a turn writes is committed as soon as the turn next waits (WAL, ``synchronous=NORMAL``;
one transaction for every session's writes since the last commit, see :mod:`clawkit.storewriter`)
and before a tool runs: a process killed mid-turn loses nothing it wrote before its last wait,
and the session resumes from the database. Plugins keep their own tables in the same file,
prefixed by their name (``store.conn`` has the sqlite3 connection's API; every statement through
it first commits what the store has queued).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator

from .checkpoint import Checkpointer
from .errors import UsageError
from .sessionlock import SessionLocks
from .storewriter import LockedConnection, StoreWriter, run_write
from .storage import POSTGRESQL, SQLITE, declare, is_postgres_url, script
from .types import Message, SessionClassification, ToolResult, new_id
from .runlog import RunRecords
from .session_schema import (  # noqa: F401  (TABLES, SCHEMA: importable from here too)
    _DATA_FIELDS, _EVENT_SQL, _MESSAGE_SQL, _META_KEY_SQL, _META_KEY_SQL_PG, _PG_FUNCTIONS, _RESULT_TEXT, _RUN_END_SQL,
    _RUN_END_SQL_PG, SCHEMA, TABLES, _dump, _dump_json, _map_strings, _scrub,
)

log = logging.getLogger("clawkit.sessions")

class SessionNotFound(KeyError):
    pass


class SessionBusy(UsageError):
    """Another process is running a turn on this session (exit code 2, a clear message)."""


#: seconds a turn waits for another process to finish its turn on the same session
LOCK_WAIT = float(__import__("os").environ.get("CLAWKIT_SESSION_LOCK_WAIT") or 10.0)


def _label_of(classification: Any) -> str:
    """A session's display label: its classification's ``label`` ("" when unclassified)."""
    if not classification:
        return ""
    try:
        data = json.loads(classification) if isinstance(classification, (str, bytes)) else classification
    except ValueError:
        return ""
    label = data.get("label") if isinstance(data, dict) else None
    return label if isinstance(label, str) else ""


class SessionStore(RunRecords):
    """One SQLite file (opened, and created, with WAL) or a PostgreSQL database (a ``postgresql://``
    URL, see :mod:`clawkit.storage`). Use one store per process/thread.

    ``conn`` has the ``sqlite3`` API on both backends (plugins write their SQL once); ``dialect``
    says which it is; ``path`` is the file, or the URL.
    """

    dialect = SQLITE
    _run_end_sql = _RUN_END_SQL
    _checkpointer: Any = None
    #: the grouped commits (SQLite; see clawkit.storewriter), None on PostgreSQL
    _writer: StoreWriter | None = None

    def __init__(self, path: str | Path = ".clawkit/state.db", *, persist: bool = True):
        if is_postgres_url(path):
            from .storage import open_url

            self.path: Any = str(path)
            self.dialect = POSTGRESQL
            self._run_end_sql = _RUN_END_SQL_PG
            self.conn: Any = open_url(self.path)  # the storage plugin for the scheme (clawkit-postgres)
            declare(self.conn, *TABLES)
            self.conn.declare_functions(_PG_FUNCTIONS)
        else:
            self.path = Path(path) if persist else Path(":memory:")
            if persist:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            raw = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            raw.execute("PRAGMA journal_mode=WAL")
            raw.execute("PRAGMA synchronous=NORMAL")
            raw.execute("PRAGMA busy_timeout=5000")
            raw.executescript(SCHEMA)
            if persist:  # checkpoints (the fsyncs) in a thread of their own, see clawkit.checkpoint
                self._checkpointer = Checkpointer(str(self.path))
                raw.execute("PRAGMA wal_autocheckpoint=0")
            self._writer = StoreWriter(raw, self._checkpointer.committed if self._checkpointer is not None else None)
            self.conn = LockedConnection(raw, self._writer)
        self._pending: list[tuple] = []  # plugins' queued writes: committed with the next message
        #: observations (events, usage, runs, steps): committed once, at the turn's end (or on flush)
        self._observed: list[tuple] = []
        self._pending_meta: dict[str, str] = {}
        #: text -> text with secrets removed, applied to every message and event before it is stored
        #: (a security plugin sets it; the policy plugin does). The model still sees this turn's text.
        self.redact: Any = None
        #: JSON value -> JSON value with secrets removed (may blank values by their key), for structured data;
        #: may raise TypeError for a value it cannot see into (not JSON: bytes, a set, an object), which an
        #: event's data is then stored through ``redact`` on its dumped text instead
        self.redact_value: Any = None
        #: a :class:`clawkit.transcript.Transcript` (``sessions.transcript: jsonl``): every stored message
        #: and event is also appended to the session's JSONL file, in its redacted, stored form
        self.transcript: Any = None
        self._locks: dict[str, Any] = {}  # PostgreSQL advisory locks held: session id -> [None, count]
        #: cross-process session locks (none in memory: nobody else can see this store)
        self._session_locks = SessionLocks(self.path.parent / "locks") if self.dialect == SQLITE and persist else None

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._writer is not None:
                self._writer.close()
            for sid in list(self._locks):
                self.unlock(sid)
            if self._session_locks is not None:
                self._session_locks.close()
            if self._checkpointer is not None:
                self._checkpointer.close()
            self.conn.close()

    # one process per session at a time ---------------------------------------------------

    def _redact_json(self, text: str) -> str:
        """JSON text with secrets removed value by value (``redact_value`` for whole structures when a
        plugin gave one — it can blank a value by its key — else ``redact`` on every string): the
        result is always valid JSON."""
        if self.redact(text) == text:  # one pass over the text: nothing to remove (the common case)
            return text
        value = json.loads(text)
        if self.redact_value is not None:
            return _dump(self.redact_value(value))
        return _dump(_map_strings(value, self.redact))

    def _event_text(self, data: dict[str, Any]) -> str:
        """An event's data as stored: JSON, secrets removed. With a structural redactor (``redact_value``) the
        data is redacted value by value before it is dumped — its strings (model names, endpoints, reasons)
        repeat from event to event and are remembered clean by the redactor, its numbers are never scanned —
        instead of scanning the dumped text, unique to each event (ids, timings) and full of key names that
        look like assignments (``"prompt_tokens":``)."""
        redact_value = self.redact_value if self.redact is not None else None
        if redact_value is not None:
            try:
                return _dump_json(redact_value(data))  # (what JSON cannot hold raises)
            except (ValueError, TypeError):  # a lone surrogate, something the walk cannot see into: as below
                pass
        try:
            text = _dump(data)
        except (ValueError, TypeError):
            text = _dump(_scrub(json.loads(json.dumps(data, default=str))))
        return text if self.redact is None else self._redact_json(text)

    def try_lock(self, session_id: str) -> bool:
        """Take the session for a turn, or return False when another process holds it (see
        :mod:`clawkit.sessionlock`: it dies with its process); re-entrant within a store; always
        granted in memory. Release with :meth:`unlock`."""
        if self.dialect == POSTGRESQL:  # an advisory lock: held by this connection, gone with it
            held = self._locks.get(session_id)
            if held is not None:
                held[1] += 1
                return True
            if not self.conn.try_advisory_lock(session_id):
                self._holder = "another worker"
                return False
            self._locks[session_id] = [None, 1]
            return True
        if self._session_locks is None:
            return True
        if self._session_locks.acquire(session_id):
            return True
        self._holder = self._session_locks.holder
        return False

    def busy(self, session_id: str, waited: float) -> SessionBusy:
        """The error for a session another process kept for longer than ``waited`` seconds."""
        holder = getattr(self, "_holder", None)
        return SessionBusy(f"session {session_id} is in use by another process{f' (pid {holder})' if holder else ''}; "
                           f"waited {waited:g} s — try again when its turn ends")

    def unlock(self, session_id: str) -> None:
        """Give the session back — once what was written to it is committed (another process that
        takes it next reads it whole)."""
        if self.dialect != POSTGRESQL:
            if self._session_locks is not None:
                locks = self._session_locks
                w = self._writer
                if self._pending or self._pending_meta or self._observed:
                    self.commit()
                if w is not None and w.committed < w.submitted:
                    w.submit([], after=lambda: locks.release(session_id))
                else:
                    locks.release(session_id)
            return
        held = self._locks.get(session_id)
        if held is None:
            return
        held[1] -= 1
        if held[1] <= 0:
            self._locks.pop(session_id, None)
            self.conn.advisory_unlock(session_id)

    # sessions -------------------------------------------------------------------------

    def create(self, agent: str, session_id: str | None = None, *, defer: bool = False) -> str:
        """A new session row: written at once, or (``defer``) with the next commit — a turn's first
        message — so starting a session costs no commit of its own. Every read of the row (and
        every direct write to it) commits what is queued first."""
        sid = session_id or new_id("ses")
        now = time.time()
        sql, row = "INSERT INTO sessions (id, agent, created, updated) VALUES (?, ?, ?, ?)", (sid, agent, now, now)
        if defer:
            self._pending.append((sql, row))
        else:
            self.conn.execute(sql, row)
        return sid

    def exists(self, session_id: str) -> bool:
        if self._pending:
            self.flush()
        return self.conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None

    def row(self, session_id: str) -> dict[str, Any]:
        if self._pending or session_id in self._pending_meta:
            self.flush()
        cur = self.conn.execute(
            "SELECT id, agent, created, updated, metadata, classification FROM sessions WHERE id = ?", (session_id,)
        )
        r = cur.fetchone()
        if r is None:
            raise SessionNotFound(session_id)
        return {"id": r[0], "agent": r[1], "created": r[2], "updated": r[3], "metadata": r[4], "classification": r[5]}

    def list(self, limit: int = 50) -> list[dict[str, Any]]:
        if self._pending:
            self.flush()
        rows = self.conn.execute(
            "SELECT s.id, s.agent, s.created, s.updated, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id),"
            " s.classification FROM sessions s ORDER BY s.updated DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [{**dict(zip(("id", "agent", "created", "updated", "messages"), r[:5])), "label": _label_of(r[5])}
                for r in rows]

    def delete(self, session_ids: Any) -> dict[str, int]:
        """Delete the sessions' kernel rows (sessions, messages, events, usage, runs, steps) in one
        transaction; rows deleted per table. Only the rows: transcripts, attachments and what plugins
        keep are :func:`clawkit.forget.forget`'s (``clawkit sessions delete``)."""
        from .forget import delete_rows

        return delete_rows(self, [session_ids] if isinstance(session_ids, str) else session_ids)

    def load_metadata(self, session_id: str) -> dict[str, Any]:
        """The session's metadata; corrupted JSON yields ``{}`` (callers use safe defaults)."""
        self.flush()
        raw = self.row(session_id)["metadata"]
        try:
            data = json.loads(raw)
        except (TypeError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save_metadata(self, session_id: str, metadata: dict[str, Any], *, now: bool = True) -> None:
        """Write a session's metadata: at once, or (``now=False``) with the next commit.

        Deferred writes coalesce: several ``Session.set`` calls in one turn cost one
        UPDATE, committed with the next message or at the turn's end.
        """
        text = _dump(metadata)
        if self.redact is not None:  # metadata quotes what tools saw too (provenance names a command line)
            text = self._redact_json(text)
        if now:
            self._pending_meta.pop(session_id, None)
            if self._pending:
                self.flush()
            self.conn.execute("UPDATE sessions SET metadata = ?, updated = ? WHERE id = ?", (text, time.time(), session_id))
        else:
            self._pending_meta[session_id] = text

    def queue_metadata_key(self, session_id: str, key: str, value: Any) -> None:
        """Write one metadata key with the next commit; on disk only this key changes, so a full
        metadata write by someone else in between loses nothing. ``value`` must be JSON-able."""
        text = _dump(value)
        if self.redact is not None:
            text = self._redact_json(text)
        if self.dialect == POSTGRESQL:
            self.queue(_META_KEY_SQL_PG, (key, text, time.time(), session_id))
        else:
            self.queue(_META_KEY_SQL, ('$."' + key.replace('"', '') + '"', text, time.time(), session_id))

    def save_classification(self, session_id: str, c: SessionClassification | None) -> None:
        if self._pending:
            self.flush()
        self.conn.execute(
            "UPDATE sessions SET classification = ? WHERE id = ?", (c.model_dump_json() if c else None, session_id)
        )

    def load_classification(self, session_id: str) -> SessionClassification | None:
        raw = self.row(session_id)["classification"]
        if not raw:
            return None
        try:
            return SessionClassification.model_validate_json(raw)
        except ValueError:
            return None

    # messages, events, usage ----------------------------------------------------------

    def _to_transcript(self, row: tuple) -> None:
        """The stored (redacted) message row as a transcript line, the record ``export_jsonl`` gives it."""
        session_id, _run, role, content, data = row[:5]
        try:
            message = _row_message(role, content, data)
            self.transcript.write(session_id, {"type": "message", **message.model_dump(mode="json", exclude_defaults=True)})
        except Exception as exc:  # a transcript that cannot be written never stops the turn
            log.warning("transcript for session %s not written: %s", session_id, exc)

    def append(self, session_id: str, message: Message, run_id: str | None = None, *, defer: bool = False,
               _rewrite: bool = False) -> int:
        """Store a message: committed with whatever is queued — at once outside an event loop, when
        the turn next waits inside one (see :mod:`clawkit.storewriter`) — or (``defer``) with the
        next commit: the turn's last message rides with the turn's end. Returns its row id (0 when
        not yet committed)."""
        sql, row = _MESSAGE_SQL, self._message_row(session_id, message, run_id)
        if self.transcript is not None and not _rewrite:
            self._to_transcript(row)
        if defer and not self.conn.in_transaction:
            self.queue(sql, row)
            return 0
        if self._writer is not None:  # with what is queued: one commit, made when the turn next waits
            self._pending.append((sql, row))
            seq = self.commit(observed=False)
            return int(self._writer.last_rowid or 0) if self._writer.committed >= seq else 0
        if self.conn.in_transaction:
            return int(self.conn.execute(sql, row).lastrowid or 0)
        if self._checkpointer is not None:
            self._checkpointer.committed()
        if not (self._pending or self._pending_meta):
            return int(self.conn.execute(sql, row).lastrowid or 0)
        with self.conn:  # queued writes and the message: one commit
            self.conn.execute("BEGIN")
            self._write_pending()
            return int(self.conn.execute(sql, row).lastrowid or 0)

    def _message_row(self, session_id: str, message: Message, run_id: str | None) -> tuple:
        """The messages row for ``message``: its structured part as JSON, secrets redacted."""
        data = None
        if message.tool_calls or message.tool_result or message.blocks or message.metadata:
            # a tool result's text is the message's content: stored once (it was twice — and redacted
            # twice), put back by messages()
            exclude = _RESULT_TEXT if message.tool_result is not None and message.tool_result.content == message.content else None
            try:
                data = message.model_dump_json(include=_DATA_FIELDS, exclude=exclude, exclude_defaults=True)
            except ValueError:  # a lone surrogate from a model or a tool: stored replaced, never a crash
                data = _dump(_scrub(message.model_dump(include=_DATA_FIELDS, exclude=exclude, exclude_defaults=True)))
        content = _scrub(message.content)
        if self.redact is not None:
            content = self.redact(content)
            if data is not None:
                data = self._redact_json(data)
        return (session_id, run_id, message.role, content, data, time.time())

    def messages(self, session_id: str) -> list[Message]:
        if self._pending:  # a message appended with ``defer``
            self.flush()
        rows = self.conn.execute(
            "SELECT role, content, data FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
        ).fetchall()
        out = []
        for role, content, data in rows:
            out.append(_row_message(role, content, data))
        return out

    def replace_messages(self, session_id: str, messages: list[Message], run_id: str | None = None) -> None:
        """Rewrite a session's history atomically (compaction)."""
        self.flush()  # a deferred message must not be written after the new history
        if self._writer is not None:  # one batch, one transaction, however long the history
            self._pending.append(("DELETE FROM messages WHERE session_id = ?", (session_id,)))
            self._pending.extend((_MESSAGE_SQL, self._message_row(session_id, m, run_id)) for m in messages)
            self.flush()
            return
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            for m in messages:
                self.append(session_id, m, run_id, _rewrite=True)

    def event(self, session_id: str | None, run_id: str | None, type: str, data: dict[str, Any], ts: float) -> None:
        """Queue an event; it is committed at the turn's end (:meth:`flush`).

        Events, usage rows, runs and steps are observations: they cost no commit of their
        own and are written together, once per turn.
        """
        text = self._event_text(data)
        if self.transcript is not None:
            try:
                self.transcript.write(session_id, {"type": "event", "event": type, "data": json.loads(text), "ts": ts})
            except Exception as exc:  # never stops the turn
                log.warning("transcript for session %s not written: %s", session_id, exc)
        self._observe(_EVENT_SQL, (session_id, run_id, type, text, ts))

    def queue(self, sql: str, params: tuple = ()) -> None:
        """Queue a write to commit with the next message (or at the turn's end).

        For plugins' bookkeeping (metrics, routing notes) that need not cost a commit
        of its own. A statement that fails is dropped (and logged); the rest of the commit
        it rides with is kept.
        """
        self._pending.append((sql, params))
        if len(self._pending) >= 256:
            self.commit()

    _queue = queue  # the name plugins used before it was public

    def queue_call(self, fn: Any) -> None:
        """Queue ``fn(conn)`` to run inside the next commit's transaction (which holds the database's
        write lock from its start: ``BEGIN IMMEDIATE``) — for writes that must read first, such as
        appending to a hash chain, without a transaction and a commit of their own. ``conn`` is the
        raw connection; ``fn`` must not commit. If it raises, its writes are rolled back and the
        rest of the commit is kept (the error is logged): report failures yourself if they matter."""
        self._pending.append((fn, None))
        if len(self._pending) >= 256:
            self.commit()

    def _observe(self, sql: str, params: tuple) -> None:
        """Queue an observation (an event, usage, a step, a run's end). Observations are committed
        together at the turn's end instead of riding with each message: every commit rewrites each
        page it touches into the WAL, so spreading them over a turn's message commits wrote the
        events, runs and steps pages (and their indexes) several times."""
        self._observed.append((sql, params))
        if len(self._observed) >= 256:
            self.commit()

    def flush(self) -> None:
        """Commit queued writes (events, usage rows, runs, steps, deferred metadata, plugins' queue)
        and wait until they — and everything handed to the writer before — are on disk."""
        if self._writer is not None:
            self.commit()
            self._writer.wait()
            return
        if self._pending or self._pending_meta or self._observed:
            if self._checkpointer is not None:
                self._checkpointer.committed()
            with self.conn:
                self.conn.execute("BEGIN")
                self._write_pending()
                for sql, row in self._observed:
                    self.conn.execute(sql, row)
                self._observed.clear()

    def commit(self, *, observed: bool = True) -> int:
        """Hand the queued writes to the writer (one transaction; observations too unless
        ``observed=False``) without waiting for it; returns a ticket for :meth:`wait_durable`.
        (PostgreSQL: commits now.)"""
        w = self._writer
        if w is None:
            self.flush()
            return 0
        if not (self._pending or self._pending_meta or (observed and self._observed)):
            return w.submitted
        writes = self._pending
        self._pending = []
        if self._pending_meta:
            now = time.time()
            writes.extend(("UPDATE sessions SET metadata = ?, updated = ? WHERE id = ?", (meta, now, sid))
                          for sid, meta in self._pending_meta.items())
            self._pending_meta.clear()
        if observed and self._observed:
            writes.extend(self._observed)
            self._observed = []
        return w.submit(writes)

    def durable(self) -> bool:
        """Whether everything handed to the writer is committed."""
        w = self._writer
        return w is None or w.committed >= w.submitted

    async def wait_durable(self, ticket: int | None = None) -> None:
        """Commit now what was handed to the writer up to ``ticket`` (default: all of it)."""
        if self._writer is not None:
            self._writer.wait(ticket)

    def _write_pending(self) -> None:
        for sql, row in self._pending:
            run_write(self.conn, sql, row)
        self._pending.clear()
        if self._pending_meta:
            now = time.time()
            self.conn.executemany(
                "UPDATE sessions SET metadata = ?, updated = ? WHERE id = ?",
                [(meta, now, sid) for sid, meta in self._pending_meta.items()],
            )
            self._pending_meta.clear()

    def events(self, session_id: str, type: str | None = None) -> list[dict[str, Any]]:
        self.flush()
        sql = "SELECT type, data, ts, run_id FROM events WHERE session_id = ?"
        args: tuple = (session_id,)
        if type:
            sql += " AND type = ?"
            args += (type,)
        rows = self.conn.execute(sql + " ORDER BY id", args).fetchall()
        return [{"type": t, "data": json.loads(d), "ts": ts, "run_id": r} for t, d, ts, r in rows]

    def export_jsonl(self, session_id: str) -> Iterator[str]:
        """The session as JSON lines: a header, then every message and event in order."""
        row = self.row(session_id)
        yield _dump({"type": "session", **row, "metadata": self.load_metadata(session_id)})
        for m in self.messages(session_id):
            yield _dump({"type": "message", **m.model_dump(exclude_defaults=True)})
        for e in self.events(session_id):
            yield _dump({"type": "event", "event": e["type"], "data": e["data"], "ts": e["ts"]})


def _row_message(role: str, content: str, data: str | None) -> Message:
    """A messages row back as the message (a tool result's text is the row's content)."""
    extra = json.loads(data) if data else {}
    result = extra.get("tool_result")
    if result is not None and "content" not in result:
        result["content"] = content
    return Message(role=role, content=content, **extra)


def repair_interrupted(messages: list[Message]) -> list[Message]:
    """Give every tool call that has no result (the process died mid-call) an error result.

    Models reject histories with unanswered tool calls; the error tells the model
    the call was interrupted, so it can decide whether to retry.
    """
    out: list[Message] = []
    pending: list = []

    def close() -> None:
        for c in pending:
            res = ToolResult(call_id=c.id, name=c.name, content="Error: interrupted — the process stopped before this call finished.", is_error=True)
            out.append(Message(role="tool", content=res.content, tool_result=res, metadata={"interrupted": True}))
        pending.clear()

    for m in messages:
        if m.role == "tool" and m.tool_result is not None:
            pending[:] = [c for c in pending if c.id != m.tool_result.call_id]
        elif pending:
            close()
        out.append(m)
        if m.role == "assistant" and m.tool_calls:
            pending[:] = list(m.tool_calls)
    close()
    return out


class Session:
    """A handle on one session: its id, its agent's config, metadata and history."""

    def __init__(self, store: SessionStore, session_id: str, agent: Any, *, new: bool = False):
        self.store = store
        self.id = session_id
        self.agent = agent
        # a session just created has nothing to load
        self.metadata = {} if new else store.load_metadata(session_id)
        self.classification = None if new else store.load_classification(session_id)
        self.history: list[Message] = []

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def set(self, key: str, value: Any, *, now: bool = False) -> None:
        """Set one metadata key; persisted with the turn's next commit (or at once with ``now``).

        Setting a key to the scalar it already holds writes nothing (containers are
        always written: they may have been changed in place).
        """
        if not now and isinstance(value, (str, int, float, bool, type(None))) and key in self.metadata and self.metadata[key] == value:
            return
        self.metadata[key] = value
        self.store.save_metadata(self.id, self.metadata, now=now)

    def replace_history(self, messages: list[Message]) -> None:
        """Swap the conversation for ``messages`` (compaction), in memory and on disk."""
        self.store.replace_messages(self.id, messages)
        self.history = list(messages)
