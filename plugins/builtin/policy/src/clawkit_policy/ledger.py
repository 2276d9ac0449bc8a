"""The audit ledger: an append-only, MAC-chained table in the session database.

Every record carries the MAC of the one before it, and its own MAC (HMAC-SHA256
with the audit key, see :mod:`clawkit_policy.anchor`) covers every column (its
sequence number included): editing a record breaks its MAC, deleting or
reordering records breaks the chain, and without the key — kept outside the
workspace — nobody can rewrite the chain consistently. Deleting records from the
end is caught by the head row (``policy_audit_head``) and by the anchor kept
outside the database (latest length and head), which each append updates;
the anchor also notices a deleted or emptied database and a dropped table.
``verify()`` re-computes it all.

Use it from anywhere::

    from clawkit_policy.ledger import AuditLedger
    ledger = AuditLedger(store.conn)
    ledger.append("event", session_id=sid, tool="shell_exec", decision="blocked", data={...})
    assert ledger.verify().ok
"""

from __future__ import annotations

import hashlib
import hmac
import json
import operator
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from json.encoder import c_encode_basestring, c_make_encoder  # type: ignore[attr-defined]
from typing import Any

from clawkit.storage import POSTGRESQL, Column, Index, Table, declare, dialect

GENESIS = "0" * 64

#: Hashed columns, in hash order. JSON-valued ones are stored (and hashed) as canonical text.
COLUMNS = (
    "seq", "ts", "kind", "session_id", "trace_id", "task_id", "run_id", "step_id", "tool", "call_hash",
    "arguments", "requested", "granted", "decision", "reason", "approval_required", "approval_result",
    "approval_by", "started", "ended", "status", "error", "data", "prev_hash",
)
JSON_COLUMNS = frozenset({"arguments", "requested", "granted", "data"})
_FIELDS = frozenset(COLUMNS) - {"seq", "prev_hash"}
_EMPTY = dict.fromkeys(COLUMNS)  # a record's values before its fields (copied)
_JSON_ORDER = tuple(c for c in COLUMNS if c in JSON_COLUMNS)
_ROW = operator.itemgetter(*COLUMNS)  # a record's column values, in order (one C call)
_INSERT = f"INSERT INTO policy_audit ({', '.join(COLUMNS)}, hash) VALUES ({', '.join('?' for _ in COLUMNS)}, ?)"


class Canonical(str):
    """A JSON column's value already serialised by :func:`canonical` (stored as is)."""

    __slots__ = ()

_TEXT = ("session_id", "trace_id", "task_id", "run_id", "step_id", "tool", "call_hash", "arguments", "requested",
         "granted", "decision", "reason")
TABLES = (
    Table("policy_audit", (
        Column("seq", "integer", nullable=False), Column("ts", "real", nullable=False), Column("kind", nullable=False),
        *(Column(c) for c in _TEXT), Column("approval_required", "integer"), Column("approval_result"),
        Column("approval_by"), Column("started", "real"), Column("ended", "real"), Column("status"), Column("error"),
        Column("data"), Column("prev_hash", nullable=False), Column("hash", nullable=False),
    ), primary_key=("seq",), indexes=(Index("policy_audit_session", ("session_id", "seq")),
                                      Index("policy_audit_tool", ("tool", "seq")))),
    Table("policy_audit_head", (
        Column("id", "integer", nullable=False), Column("seq", "integer", nullable=False), Column("hash", nullable=False),
    ), primary_key=("id",), checks=("id = 1",)),
)
#: every appender takes this PostgreSQL advisory lock first (SQLite's BEGIN IMMEDIATE): appends are serialised
#: across workers, so sequence numbers and anchors follow the commit order
_PG_APPEND_LOCK = "SELECT pg_advisory_xact_lock(7363412)"


def _encoder(sort_keys: bool, default: Any) -> Any:
    """``json.JSONEncoder(..., ensure_ascii=False, separators=(",", ":")).encode``, the C encoder built once
    (``encode`` builds one per call: ~0.6 us of a ~1 us call). The output is the same text."""
    py = json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, default=default)
    if c_make_encoder is None or c_encode_basestring is None:  # pragma: no cover - CPython always has _json
        return py.encode
    # markers=None: no circular-reference bookkeeping (a cycle raises RecursionError instead of ValueError)
    enc = c_make_encoder(None, py.default, c_encode_basestring, None, ":", ",", sort_keys, False, True)
    join = "".join
    return lambda value: join(enc(value, 0))


_CANONICAL = _encoder(True, str)
_COMPACT = _encoder(False, None)


def canonical(value: Any) -> str:
    """The canonical JSON text of ``value``: what a JSON column stores and hashes."""
    return _CANONICAL(value)


def record_hash(values: dict[str, Any], key: bytes | None = None) -> str:
    """The MAC of one record from its stored column values (``prev_hash`` included); a plain
    SHA-256 without ``key`` (only for in-memory ledgers of tests)."""
    try:
        row = _ROW(values)
    except KeyError:
        row = [values.get(c) for c in COLUMNS]
    return _mac(row, key)


def _mac(row: Any, key: bytes | None) -> str:
    """:func:`record_hash` of a record's column values in :data:`COLUMNS` order."""
    payload = _COMPACT(row).encode("utf-8", "surrogatepass")  # a tuple is encoded as the same JSON array as a list
    if key is None:
        return hashlib.sha256(payload).hexdigest()
    inner_pad, outer_pad = _pads(key)  # HMAC-SHA256 (RFC 2104) from copies of the keyed pads: half hmac.new's cost
    inner = inner_pad.copy()
    inner.update(payload)
    outer = outer_pad.copy()
    outer.update(inner.digest())
    return outer.hexdigest()


@lru_cache(maxsize=8)
def _pads(key: bytes) -> tuple[Any, Any]:
    """SHA-256 states after the HMAC inner and outer pads of ``key`` (copied for every record)."""
    if len(key) > 64:
        key = hashlib.sha256(key).digest()
    key = key.ljust(64, b"\0")
    return hashlib.sha256(key.translate(hmac.trans_36)), hashlib.sha256(key.translate(hmac.trans_5C))


@dataclass
class Verification:
    """The result of :meth:`AuditLedger.verify`."""

    ok: bool
    count: int
    head: str
    problems: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok


class AuditLedger:
    """The MAC-chained audit table on an open connection — sqlite3, or PostgreSQL from
    :func:`clawkit.storage.connect` — (tables created idempotently).

    ``key``: the audit key (default: the user's, created on first use; see :mod:`.anchor`).
    A database file gets an anchor outside it, updated by every append.
    """

    def __init__(self, conn: sqlite3.Connection, *, create: bool = True, key: bytes | None = None):
        from . import anchor

        self.conn = conn
        self._lock = threading.Lock()
        #: write the anchor inside each append (under the write lock); the policy's writer turns this
        #: off and advances the anchor itself once the records are on disk (see :mod:`.writer`)
        self.anchor = True
        #: ``(seq, hash)`` of the last record this object appended
        self.last: tuple[int, str] | None = None
        self.db = anchor.db_file(conn)
        self.key = key if key is not None else anchor.load_key(create=create)
        self._serialise = _PG_APPEND_LOCK if dialect(conn) == POSTGRESQL else None
        if create:
            declare(conn, *TABLES)

    def append(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Add one record (``kind``: decision, approval, execution, event, grant…); returns it with its hash.

        Unknown field names are an error; JSON columns take any JSON-able value.
        """
        return self.append_many([(kind, fields)])[0]

    def append_many(self, records: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Add several records in one transaction (one commit), in order."""
        rows = [self._values(kind, fields) for kind, fields in records]
        with self._lock:
            nested = self.conn.in_transaction
            self.conn.execute("SAVEPOINT policy_audit" if nested else "BEGIN IMMEDIATE")
            try:
                if self._serialise:
                    self.conn.execute(self._serialise)
                row = self.conn.execute("SELECT seq, hash FROM policy_audit_head WHERE id = 1").fetchone()
                seq, prev = (row[0], row[1]) if row else (0, GENESIS)
                params = []
                key = self.key
                for values in rows:
                    seq += 1
                    values["seq"], values["prev_hash"] = seq, prev
                    row = _ROW(values)  # (once: the MAC's payload and the INSERT's parameters)
                    values["hash"] = prev = _mac(row, key)
                    params.append(row + (prev,))
                self.conn.executemany(_INSERT, params)
                if rows:
                    self.conn.execute(
                        "INSERT INTO policy_audit_head (id, seq, hash) VALUES (1, ?, ?) "
                        "ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
                        (seq, prev),
                    )
                    if self.anchor and self.db is not None and self.key is not None and not nested:
                        # under the database's write lock, so anchors follow the commit order
                        from .anchor import write_anchor

                        write_anchor(self.key, self.db, seq, prev)
            except BaseException:
                self.conn.execute("ROLLBACK TO policy_audit" if nested else "ROLLBACK")
                if nested:
                    self.conn.execute("RELEASE policy_audit")
                raise
            self.conn.execute("RELEASE policy_audit" if nested else "COMMIT")
            if rows:
                self.last = (seq, prev)
        return rows

    @staticmethod
    def _values(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
        if not _FIELDS.issuperset(fields):
            raise TypeError(f"unknown audit fields: {', '.join(sorted(fields.keys() - _FIELDS))}")
        values: dict[str, Any] = _EMPTY.copy()
        values.update(fields)
        for k in _JSON_ORDER:
            v = values[k]
            if v is not None and type(v) is not Canonical:
                values[k] = canonical(v)
        for k, v in fields.items():
            if v.__class__ is bool and k not in JSON_COLUMNS:  # (bool has no subclasses)
                values[k] = int(v)
        values["kind"] = kind
        values["ts"] = float(fields.get("ts") or time.time())
        return values

    def verify(self, *, sessions: bool = True) -> Verification:
        """Re-compute every MAC and link; compare with the head row and the anchor; with ``sessions``,
        report executed tool calls in the session tables that have no audit record."""
        problems: list[str] = []
        if self.key is None:
            from .anchor import key_path

            return Verification(False, 0, "", [f"the audit key {key_path()} is missing: the ledger cannot be verified "
                                               "(was it deleted, or is CLAWKIT_AUDIT_HOME set differently?)"])
        prev, expected, count, last_seq = GENESIS, 1, 0, 0
        bad_macs: list[int] = []
        hashes: dict[int, str] = {}
        anchor = self._anchor()
        cur = self.conn.execute(f"SELECT {', '.join(COLUMNS)}, hash FROM policy_audit ORDER BY seq")
        for row in cur:
            values = dict(zip(COLUMNS + ("hash",), row))
            seq = values["seq"]
            count += 1
            if seq != expected:
                problems.append(f"record {expected}{'' if seq == expected + 1 else f'..{seq - 1}'} is missing (next is {seq})")
            if values["prev_hash"] != prev:
                problems.append(f"record {seq}: the chain is broken (its prev_hash is not the hash of the record before it): "
                                "a record was deleted, inserted or reordered")
            if not hmac.compare_digest(record_hash(values, self.key), str(values["hash"])):
                bad_macs.append(seq)
            if anchor is not None and seq == anchor["seq"]:
                hashes[seq] = values["hash"]
            prev, expected, last_seq = values["hash"], seq + 1, seq
            if len(problems) > 50:
                problems.append("… (more problems not listed)")
                break
        if bad_macs and len(bad_macs) == count:
            problems.append(f"every record ({count}) fails its MAC: the chain was rewritten without the audit key")
        else:
            problems.extend(f"record {seq}: its content does not match its MAC (the record was edited)" for seq in bad_macs[:10])
            if len(bad_macs) > 10:
                problems.append(f"… and {len(bad_macs) - 10} more edited records")
        head = self.conn.execute("SELECT seq, hash FROM policy_audit_head WHERE id = 1").fetchone()
        if head is None and count:
            problems.append("the head record is missing")
        elif head is not None and (head[0] != last_seq or head[1] != prev):
            if head[0] > last_seq:
                problems.append(f"records {last_seq + 1}..{head[0]} were deleted from the end of the ledger")
            else:
                problems.append(f"the head (record {head[0]}) does not match the last record ({last_seq})")
        if anchor is not None:
            if not anchor["valid"]:
                problems.append(f"the anchor {anchor['path']} is damaged or was not written with the audit key")
            elif last_seq < anchor["seq"]:
                problems.append(f"the ledger was truncated: the anchor outside the database records {anchor['seq']} records, "
                                f"the database holds {last_seq}")
            elif hashes.get(anchor["seq"]) != anchor["head"]:
                problems.append(f"record {anchor['seq']} does not match the anchor's head: the chain was rewritten")
        if sessions and count:
            problems.extend(self.unrecorded_calls())
        return Verification(ok=not problems, count=count, head=prev, problems=problems)

    def _anchor(self) -> dict[str, Any] | None:
        if self.db is None:
            return None
        from .anchor import read_anchor

        return read_anchor(self.key, self.db)

    def unrecorded_calls(self, limit: int = 20) -> list[str]:
        """Executed tool calls in ``messages`` (since the ledger's first record) with no audit record."""
        try:
            first = self.conn.execute("SELECT MIN(ts) FROM policy_audit").fetchone()[0]
            rows = self.conn.execute(
                "SELECT session_id, data, content FROM messages WHERE role = 'tool' AND data IS NOT NULL AND created >= ?",
                (first or 0,)).fetchall()
            seen = {(sid, step) for sid, step in self.conn.execute(
                "SELECT session_id, step_id FROM policy_audit WHERE step_id IS NOT NULL")}
        except sqlite3.Error:
            return []  # no session tables in this database: nothing to compare with
        out = []
        for sid, data, content in rows:
            try:
                message = json.loads(data)
            except ValueError:
                continue
            result = message.get("tool_result") or {}
            meta = {**(message.get("metadata") or {}), **(result.get("metadata") or {})}
            if not result.get("call_id") or meta.get("interrupted") or meta.get("repeated"):
                continue
            if str(result.get("content", content) or "").startswith("Error: unknown tool "):  # (the text is the row's content)
                continue  # the kernel answers unknown tools before any gate runs
            if (sid, result["call_id"]) not in seen:
                out.append(f"session {sid}: tool call {result['call_id']} ({result.get('name')}) ran but has no audit record")
                if len(out) >= limit:
                    out.append("… (more unrecorded calls not listed)")
                    break
        return out

    def records(self, *, session: str | None = None, tool: str | None = None, decision: str | None = None,
                kind: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Records in order, filtered; JSON columns decoded. ``limit`` keeps the newest ones."""
        where, args = [], []
        for col, val in (("session_id", session), ("tool", tool), ("decision", decision), ("kind", kind)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = f"SELECT {', '.join(COLUMNS)}, hash FROM policy_audit"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        out = []
        for row in self.conn.execute(sql, args):
            rec = dict(zip(COLUMNS + ("hash",), row))
            for c in JSON_COLUMNS:
                if rec[c] is not None:
                    rec[c] = json.loads(rec[c])
            out.append(rec)
        out.reverse()
        return out
