"""Episodes keep their provenance: recalled memory is as trusted as the session it came from.

An episode (``session:<id>``, the finished turns of a past session) is written from what that
session's context held. When the session held untrusted content (``clawkit.provenance``: a web
page, a file outside the trusted paths, MCP output, a sub-agent's answer — or the shield's
``tainted`` alarm), its turns may carry an injection; recalled into a later session as trusted
"Relevant memory" it would come back as trusted instruction text, laundered through memory.

So when an episode is indexed, the session's provenance record — read in the same snapshot as its
messages — is stored here, one row per episode source: ``untrusted`` (0/1) and the sources (the
first few, briefly). The flag is sticky: a session once recorded as untrusted stays so (its older
turns were indexed while it held that content). Recall and the memory tools then show such an
episode only inside the untrusted-data block and mark the reading session (kind ``memory``).

Episodes indexed before this table existed have no row: they count as untrusted ("provenance not
recorded") until the next episode sync fills their rows from the session database (a one-time
look-up of ``sessions.metadata`` per session database and process). A session no longer in the
database stays untrusted. The table is additive (``CREATE TABLE IF NOT EXISTS``; no column of
another table changes), so it needs no schema-version step.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Iterable

TABLE = "memory_episode_trust"
SCHEMA = (f"CREATE TABLE IF NOT EXISTS {TABLE} (partition TEXT NOT NULL, path TEXT NOT NULL, untrusted INTEGER NOT NULL,"
          " sources TEXT, recorded REAL, PRIMARY KEY (partition, path))")
SESSION = "session:"
UNRECORDED = [{"source": "memory", "detail": "provenance not recorded (indexed before episodes kept it)", "kind": "unknown"}]
MAX_SOURCES = 5
#: in the heading of a note ``memory_save`` wrote in a session holding untrusted content (see :func:`note_sources`)
UNTRUSTED_NOTE = "(untrusted: saved by session"
_NOTE_SESSION = re.compile(re.escape(UNTRUSTED_NOTE) + r" ([\w.-]+)")


def ensure(conn: Any) -> None:
    conn.execute(SCHEMA)


def sources_of(metadata: Any, session_id: str) -> list[dict[str, str]]:
    """The untrusted sources in a session's metadata (its JSON text); [] when it is clean. A record
    that cannot be read counts as untrusted (a gate must assume the worst)."""
    try:
        meta = json.loads(metadata or "{}") if isinstance(metadata, (str, bytes)) else (metadata or {})
    except (ValueError, TypeError):
        meta = None
    if not isinstance(meta, dict):
        return [{"source": "unknown", "detail": f"session {session_id}: record unreadable", "kind": "unknown"}]
    record = meta.get("untrusted")
    sources = record.get("sources") if isinstance(record, dict) else None
    if isinstance(sources, list) and sources:
        return [{k: str(v)[:200] for k, v in s.items() if k in ("source", "detail", "kind")}
                for s in sources[:MAX_SOURCES] if isinstance(s, dict)] or [
            {"source": "unknown", "detail": f"session {session_id}", "kind": "unknown"}]
    if record is not None and not isinstance(record, dict):
        return [{"source": "unknown", "detail": f"session {session_id}: record malformed", "kind": "unknown"}]
    if isinstance(record, dict) and record.get("count") or meta.get("tainted"):
        return [{"source": "unknown", "detail": f"session {session_id}", "kind": "tainted"}]
    return []


def record(conn: Any, partition: str, path: str, sources: list[dict[str, str]]) -> None:
    """Store an episode's provenance (inside the caller's transaction). Sticky: untrusted stays untrusted."""
    conn.execute(
        f"INSERT INTO {TABLE} (partition, path, untrusted, sources, recorded) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (partition, path) DO UPDATE SET"
        " sources = CASE WHEN excluded.untrusted THEN excluded.sources ELSE sources END,"
        " untrusted = MAX(untrusted, excluded.untrusted), recorded = excluded.recorded",
        (partition, path, 1 if sources else 0, json.dumps(sources[:MAX_SOURCES]) if sources else None, time.time()))


def lookup(conn: Any, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[dict[str, str]]]:
    """(partition, path) of ``session:`` episodes -> their untrusted sources ([] when clean;
    :data:`UNRECORDED` when no row says)."""
    keys = list(dict.fromkeys(keys))
    out: dict[tuple[str, str], list[dict[str, str]]] = {k: UNRECORDED for k in keys}
    for s in range(0, len(keys), 400):
        part = keys[s : s + 400]
        where = " OR ".join("(partition = ? AND path = ?)" for _ in part)
        for p, path, untrusted, sources in conn.execute(
                f"SELECT partition, path, untrusted, sources FROM {TABLE} WHERE {where}", [x for k in part for x in k]):
            if not untrusted:
                out[(p, path)] = []
                continue
            try:
                found = json.loads(sources or "[]")
            except ValueError:
                found = []
            out[(p, path)] = [s for s in found if isinstance(s, dict)] or UNRECORDED
    return out


def unrecorded(conn: Any, partition: str) -> list[str]:
    """Episode sources of ``partition`` (``session:<id>``) with no provenance row."""
    return [r[0] for r in conn.execute(
        f"SELECT s.path FROM memory_sources s LEFT JOIN {TABLE} t ON t.partition = s.partition AND t.path = s.path"
        " WHERE s.partition = ? AND s.kind = 'episode' AND s.path LIKE 'session:%' AND t.path IS NULL", (partition,))]


def read_metadata(state_conn: Any, session_ids: list[str]) -> dict[str, Any]:
    """sessions.metadata of ``session_ids`` from the kernel's session database (missing ones absent)."""
    out: dict[str, Any] = {}
    for s in range(0, len(session_ids), 400):
        part = session_ids[s : s + 400]
        out.update(state_conn.execute(f"SELECT id, metadata FROM sessions WHERE id IN ({','.join('?' * len(part))})",
                                      part).fetchall())
    return out


def note_heading(title: str, session_id: str) -> str:
    return f"{title} {UNTRUSTED_NOTE} {session_id}, which held untrusted content)"


def quote_note(text: str) -> str:
    """An untrusted note's text, with line-leading ``#`` and fences escaped: it cannot open a section
    (or a code block) of its own that would escape the marked heading."""
    return re.sub(r"^(\s*)(#|```|~~~)", r"\1\\\2", text, flags=re.M)


def note_sources(path: str, heading: str | None) -> list[dict[str, str]]:
    """A memory-file hit under a note saved from an untrusted session: its sources; else []."""
    m = _NOTE_SESSION.search(heading or "")
    if m is None:
        return []
    return [{"source": "memory_save", "detail": f"{path}: note saved by session {m.group(1)}", "kind": "memory"}]


def describe(sources: list[dict[str, str]], limit: int = 2) -> str:
    """A short phrase: "web http://…, file notes.txt"."""
    parts = []
    for s in sources[:limit]:
        what = str(s.get("detail") or s.get("source") or "?")
        if s.get("kind") == "memory":  # recalled from memory in turn: name the episode, not the whole chain
            found = re.search(r"(?:session|merged):[\w:.-]+", what)
            what = found.group(0) if found else what[:80]
        parts.append(f"{s.get('kind') or 'content'} {what}")
    return ", ".join(parts) + (f" and {len(sources) - limit} more" if len(sources) > limit else "")
