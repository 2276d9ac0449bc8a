"""API keys: stored hashed in the server's state database, scoped to agents and a role.

A key reads ``ck_<id>_<secret>``. Only SHA-256 of the secret is stored (the secret is
random, 32 bytes: a slow password hash would add nothing but latency); the id finds
the row, the hash is compared in constant time. The full key is shown once, by
``clawkit keys create``.

Roles:

* ``full``     — run turns, read everything in scope, answer approvals;
* ``approver`` — read, and answer approvals (no turns);
* ``read``     — read-only: sessions, transcripts, approvals, the audit ledger.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawkit.storage import Column, Table, declare, is_postgres_url
from clawkit.storage import connect as storage_connect

ROLES = ("full", "approver", "read")

TABLE = Table("serve_keys", (
    Column("id", nullable=False), Column("name", nullable=False), Column("hash", nullable=False),
    Column("role", nullable=False), Column("agents", nullable=False), Column("rate_per_minute", "integer"),
    Column("created", "real", nullable=False), Column("revoked", "real"), Column("last_used", "real"),
), primary_key=("id",))
_COLS = ", ".join(c.name for c in TABLE.columns)  # never SELECT *: a column added later must not shift the rows


@dataclass
class ApiKey:
    id: str
    name: str
    role: str
    agents: list[str] = field(default_factory=lambda: ["*"])
    rate_per_minute: int | None = None
    created: float = 0.0
    revoked: float | None = None
    last_used: float | None = None

    def can(self, action: str) -> bool:
        """``action``: ``run`` (turns), ``approve`` (answer approvals) or ``read``."""
        if action == "run":
            return self.role == "full"
        if action == "approve":
            return self.role in ("full", "approver")
        return True

    def allows_agent(self, agent: str) -> bool:
        return "*" in self.agents or agent in self.agents

    def public(self) -> dict[str, Any]:
        """What may be shown: never the hash."""
        return {"id": self.id, "name": self.name, "role": self.role, "agents": self.agents,
                "rate_per_minute": self.rate_per_minute, "created": self.created, "revoked": self.revoked,
                "last_used": self.last_used}


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def connect(db: str | Path) -> Any:
    """The serve database: a SQLite file (created) or a ``postgresql://`` URL."""
    if is_postgres_url(db):
        return storage_connect(db)
    path = Path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class KeyStore:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        declare(conn, TABLE)
        self._lock = threading.Lock()
        self._used: dict[str, float] = {}

    def create(self, name: str, *, role: str = "full", agents: list[str] | None = None,
               rate_per_minute: int | None = None) -> tuple[str, ApiKey]:
        if role not in ROLES:
            raise ValueError(f"role {role!r}: expected one of {', '.join(ROLES)}")
        if rate_per_minute is not None and rate_per_minute < 1:
            raise ValueError("rate_per_minute must be at least 1")
        key_id = secrets.token_hex(4)
        secret = secrets.token_urlsafe(32)
        key = ApiKey(id=key_id, name=name, role=role, agents=list(agents or ["*"]), rate_per_minute=rate_per_minute,
                     created=time.time())
        self.conn.execute(
            "INSERT INTO serve_keys (id, name, hash, role, agents, rate_per_minute, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key.id, name, _digest(secret), role, json.dumps(key.agents), rate_per_minute, key.created),
        )
        return f"ck_{key_id}_{secret}", key

    def _row(self, r: tuple) -> ApiKey:
        return ApiKey(id=r[0], name=r[1], role=r[3], agents=json.loads(r[4]), rate_per_minute=r[5], created=r[6],
                      revoked=r[7], last_used=r[8])

    def list(self, include_revoked: bool = True) -> list[ApiKey]:
        rows = self.conn.execute(f"SELECT {_COLS} FROM serve_keys ORDER BY created").fetchall()
        keys = [self._row(r) for r in rows]
        return keys if include_revoked else [k for k in keys if k.revoked is None]

    def active_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM serve_keys WHERE revoked IS NULL").fetchone()[0])

    def revoke(self, key_id: str) -> bool:
        cur = self.conn.execute("UPDATE serve_keys SET revoked = ? WHERE id = ? AND revoked IS NULL", (time.time(), key_id))
        return cur.rowcount > 0

    def authenticate(self, presented: str) -> ApiKey | None:
        """The active key ``presented`` is, or None. Constant-time on the secret."""
        parts = presented.split("_", 2)
        if len(parts) != 3 or parts[0] != "ck" or not parts[1] or not parts[2]:
            return None
        with self._lock:
            r = self.conn.execute(f"SELECT {_COLS} FROM serve_keys WHERE id = ?", (parts[1],)).fetchone()
        if r is None or not hmac.compare_digest(r[2], _digest(parts[2])) or r[7] is not None:
            return None
        key = self._row(r)
        now = time.time()
        if now - self._used.get(key.id, 0.0) > 60:  # last_used to the minute: no write per request
            self._used[key.id] = now
            with self._lock:
                self.conn.execute("UPDATE serve_keys SET last_used = ? WHERE id = ?", (now, key.id))
        return key


class RateLimiter:
    """A token bucket per key: ``per_minute`` requests a minute, bursts up to that many."""

    def __init__(self, default_per_minute: int):
        self.default = default_per_minute
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, key: ApiKey) -> tuple[bool, float]:
        """(allowed, seconds until the next token)."""
        rate = key.rate_per_minute or self.default
        if rate <= 0:
            return True, 0.0
        now = time.monotonic()
        tokens, last = self._buckets.get(key.id, (float(rate), now))
        tokens = min(float(rate), tokens + (now - last) * rate / 60.0)
        if tokens >= 1.0:
            self._buckets[key.id] = (tokens - 1.0, now)
            return True, 0.0
        self._buckets[key.id] = (tokens, now)
        return False, (1.0 - tokens) * 60.0 / rate
