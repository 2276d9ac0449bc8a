"""The chat-completion requests this server started turns for, kept in its state database so a
client's retry is recognised after the server restarted (replays.py keeps the live ones in memory).

A row is written when a request starts a turn — the key's id, the ``Idempotency-Key`` if any, the
request's fingerprint (a SHA-256, never the body), the session and the completion id — and its
outcome when the turn ends: the reply and usage, or the error. A retry that finds a row replays the
outcome; one whose turn has no outcome (the process that ran it stopped) is answered from the
session if the turn's answer is there (a turn resumed after an approval), else refused with
``409 turn_interrupted`` — never run a second time. Rows are kept ``ttl`` seconds.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from clawkit.storage import Column, Index, Table, declare

TABLE = Table("serve_requests", (
    Column("cid", nullable=False), Column("key_id", nullable=False), Column("idem"),
    Column("fingerprint", nullable=False), Column("session_id", nullable=False),
    Column("created", "real", nullable=False), Column("ended", "real"), Column("outcome"),
), primary_key=("cid",), indexes=(Index("serve_requests_idem", ("key_id", "idem")),
                                   Index("serve_requests_print", ("fingerprint",))))
_COLS = "cid, key_id, idem, fingerprint, session_id, created, ended, outcome"


class RequestLog:
    def __init__(self, conn: Any, ttl: float = 3600.0, lock: Any = None):
        self.conn, self.ttl = conn, ttl
        self._lock = lock or threading.Lock()  # the connection's users share one lock (the key store's)
        declare(conn, TABLE)
        self._expire()

    def _run(self, sql: str, params: tuple = ()) -> Any:
        with self._lock:
            return self.conn.execute(sql, params)

    def start(self, cid: str, key_id: str, idem: str | None, fingerprint: str, session_id: str) -> None:
        self._run(f"INSERT INTO serve_requests ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL)",
                  (cid, key_id, idem, fingerprint, session_id, time.time()))

    def finish(self, cid: str, outcome: dict[str, Any]) -> None:
        from clawkit.secrets import scrub

        self._run("UPDATE serve_requests SET ended = ?, outcome = ? WHERE cid = ?",
                  (time.time(), json.dumps(scrub(outcome)), cid))

    def forget(self, cid: str) -> None:
        self._run("DELETE FROM serve_requests WHERE cid = ?", (cid,))

    def forget_sessions(self, session_ids: Any) -> int:
        """Delete the rows (and their outcomes: a reply's text) of deleted sessions."""
        from clawkit.forget import delete_keyed

        with self._lock:
            return delete_keyed(self.conn, "serve_requests", "session_id", session_ids)

    def find(self, key_id: str, idem: str | None, fingerprint: str, retry: bool) -> dict[str, Any] | None:
        """The latest row this request repeats (same key and Idempotency-Key, or — for a request
        that says it is a retry — the same fingerprint within the window), or None."""
        since = time.time() - self.ttl
        if idem:
            row = self._run(f"SELECT {_COLS} FROM serve_requests WHERE key_id = ? AND idem = ? AND created >= ?"
                            " ORDER BY created DESC", (key_id, idem, since)).fetchone()
        elif retry:
            row = self._run(f"SELECT {_COLS} FROM serve_requests WHERE fingerprint = ? AND key_id = ? AND created >= ?"
                            " ORDER BY created DESC", (fingerprint, key_id, since)).fetchone()
        else:
            return None
        if row is None:
            return None
        out = dict(zip(_COLS.split(", "), row))
        out["outcome"] = json.loads(out["outcome"]) if out["outcome"] else None
        return out

    def outcome(self, cid: str) -> dict[str, Any] | None:
        row = self._run("SELECT outcome FROM serve_requests WHERE cid = ?", (cid,)).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def _expire(self) -> None:
        self._run("DELETE FROM serve_requests WHERE created < ?", (time.time() - self.ttl,))
