"""Deleting conversations: ``clawkit sessions delete|prune``, ``Agent.delete_session``, serve's
``DELETE /api/sessions/{id}`` (docs/forget.md).

A session is deleted with the sessions of the sub-agent runs it spawned (``runs.parent_run_id``,
recursively). The kernel deletes its own rows (:meth:`clawkit.sessions.SessionStore.delete`, one
transaction), the sessions' JSONL transcripts and the attachment blobs no remaining message
references; every plugin deletes what it keeps about them through the ``forget_sessions`` hook.
Plugins run first: when one fails, the kernel's rows are kept (so the same command can be run
again once the cause is fixed) and the failure is reported — a deletion is a promise, and a
partial one is said out loud, never passed off as done.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .errors import UsageError

_SHA = re.compile(r'"sha256"\s*:\s*"([0-9a-f]{64})"')
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class UnknownSessions(UsageError):
    """Some of the session ids to delete are not in the store (nothing was deleted)."""

    def __init__(self, ids: list[str], where: Any):
        self.ids = ids
        super().__init__(f"no session {', '.join(repr(i) for i in ids)} in {where}; nothing deleted")


class BusySessions(UsageError):
    """A turn is running on some of the sessions to delete (nothing was deleted)."""

    def __init__(self, ids: list[str]):
        self.ids = ids
        super().__init__(f"session {', '.join(repr(i) for i in ids)} is busy (a turn is running); nothing deleted"
                         " — try again when the turn ends")


class ForgetFailed(RuntimeError):
    """A plugin could not delete its part; ``report`` says which (the kernel's rows were kept)."""

    def __init__(self, report: "ForgetReport"):
        self.report = report
        super().__init__(describe(report))


@dataclass
class ForgetReport:
    """What a deletion removed (``counts``: kind -> rows or files) and which plugins failed."""

    sessions: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (plugin, error)
    kept: bool = False  # the kernel's rows were kept because a plugin failed

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, counts: dict[str, Any] | None, prefix: str = "") -> None:
        for k, v in (counts or {}).items():
            if isinstance(v, int) and v:
                key = f"{prefix}{k}"
                self.counts[key] = self.counts.get(key, 0) + v

    def as_json(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "deleted": self.counts, "ok": self.ok,
                "failures": [{"plugin": p, "error": e} for p, e in self.failures], "kernel_rows_kept": self.kept}


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (or a number of seconds) as seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text or "")
    if not m:
        raise UsageError(f"--older-than {text!r}: expected a duration such as 30d, 12h, 90m (s, m, h, d, w)")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def with_children(store: Any, session_ids: Iterable[str]) -> list[str]:
    """``session_ids`` and the sessions of every sub-agent run below them, parents first."""
    out: list[str] = list(dict.fromkeys(session_ids))
    seen = set(out)
    frontier = list(out)
    while frontier:
        marks = ",".join("?" * len(frontier))
        rows = store.conn.execute(
            f"SELECT DISTINCT c.session_id FROM runs c JOIN runs p ON c.parent_run_id = p.id WHERE p.session_id IN ({marks})",
            tuple(frontier)).fetchall()
        frontier = [r[0] for r in rows if r[0] and r[0] not in seen]
        seen.update(frontier)
        out.extend(frontier)
    return out


def unshared_attachments(store: Any, session_ids: list[str]) -> list[str]:
    """SHA-256s of the attachments the sessions' messages show and no other session's message does:
    the bytes that go with them (files here, ``clawkit_attachments`` rows for the turn queue). Read
    before the sessions' rows are deleted."""
    marks = ",".join("?" * len(session_ids))
    rows = store.conn.execute(f"SELECT data FROM messages WHERE session_id IN ({marks}) AND data LIKE '%sha256%'",
                              tuple(session_ids)).fetchall()
    out = []
    for sha in sorted({sha for (data,) in rows for sha in _SHA.findall(data or "")}):
        if not store.conn.execute(f"SELECT 1 FROM messages WHERE data LIKE ? AND session_id NOT IN ({marks}) LIMIT 1",
                                  (f"%{sha}%", *session_ids)).fetchone():
            out.append(sha)
    return out


def _transcript_dirs(store: Any, config: Any) -> list[Path]:
    dirs: list[Path] = []
    if getattr(store, "transcript", None) is not None:
        dirs.append(Path(store.transcript.directory))
    if config is not None:
        sessions = getattr(config, "sessions", None)
        where = getattr(sessions, "transcript_dir", None) or Path(".clawkit") / "transcripts"
        dirs.append(Path(config.workspace) / where)
    if isinstance(getattr(store, "path", None), Path) and str(store.path) != ":memory:":
        dirs.append(store.path.parent / "transcripts")
    return list(dict.fromkeys(d.resolve() for d in dirs))


def _blob_root(store: Any, config: Any) -> Path | None:
    path = getattr(store, "path", None)
    if isinstance(path, Path):
        return None if str(path) == ":memory:" else path.parent / "attachments"
    return Path(config.workspace) / ".clawkit" / "attachments" if config is not None else None


def _hook_impls(hooks: Any) -> list[tuple[str, Any, tuple]]:
    return list(hooks.impls("forget_sessions")) if hooks is not None else []


def forget(store: Any, session_ids: Iterable[str], *, hooks: Any = None, config: Any = None,
           children: bool = True, held: Iterable[str] = ()) -> ForgetReport:
    """Delete ``session_ids`` (and their sub-agent sessions) everywhere; see the module docstring.

    ``hooks`` is a :class:`clawkit.hooks.HookRunner` (None: plugins are not asked — only the
    kernel's part is done). ``held``: sessions the caller itself is running a turn on (refused as
    busy: a store's lock is re-entrant, so its own turns do not show as held). Raises
    :class:`UnknownSessions` or :class:`BusySessions` before anything is deleted."""
    wanted = list(dict.fromkeys(session_ids))
    store.flush()
    unknown = [s for s in wanted if not store.exists(s)]
    if unknown:
        raise UnknownSessions(unknown, store.path)
    ids = with_children(store, wanted) if children else wanted
    held = set(held) | held_by(store)
    taken: list[str] = []
    secure = False
    try:
        busy = [s for s in ids if s in held]
        for s in ids:
            if s in busy:
                continue
            if store.try_lock(s):
                taken.append(s)
            else:
                busy.append(s)
        if busy:
            raise BusySessions(busy)
        report = ForgetReport(sessions=ids)
        secure = _secure(store, True)  # plugins' deletions through store.conn too
        for plugin, fn, argnames in _hook_impls(hooks):
            try:
                res = fn(**{k: {"store": store, "session_ids": list(ids), "config": config}[k] for k in argnames})
                if inspect.isawaitable(res):
                    res = _settle(res)
                if isinstance(res, dict):
                    report.add(res, f"{plugin}.")
            except Exception as exc:
                hooks.report("forget_sessions", plugin, exc)
                report.failures.append((plugin, f"{type(exc).__name__}: {exc}"))
        if report.failures:
            report.kept = True
            return report
        shas = unshared_attachments(store, ids)  # (a blob another session also shows stays)
        report.add(store.delete(ids))
        from .transcript import Transcript

        for d in _transcript_dirs(store, config):
            for s in ids:
                p = Transcript(d).path(s)
                if p.exists():
                    p.unlink()
                    report.add({"transcripts": 1})
        root = _blob_root(store, config)
        for sha in shas if root is not None else ():
            p = root / sha[:2] / sha
            if p.exists():
                p.unlink()
                report.add({"attachments": 1})
        purge_wal(store)
        return report
    finally:
        if secure:
            _secure(store, False)
        for s in taken:
            store.unlock(s)


def _secure(store: Any, on: bool) -> bool:
    """SQLite ``secure_delete`` on this store's connection (freed pages overwritten, not left holding
    the deleted text); turned off again after the deletion so turns pay nothing for it."""
    if getattr(store, "dialect", "sqlite") != "sqlite":
        return False
    store.conn.execute(f"PRAGMA secure_delete = {'ON' if on else 'OFF'}")
    return True


def held_by(store: Any) -> set[str]:
    """The sessions this store itself holds (a turn of this process runs on them)."""
    locks = getattr(store, "_session_locks", None)
    out = set(getattr(store, "_locks", {}) or {})
    if locks is not None:
        out.update(locks.held())
    return out


def _settle(awaitable: Any) -> Any:
    """An async implementation's result, awaited to the end — on a thread of its own when this
    thread runs an event loop (serve calls from one): never skipped, so never silently undone."""
    import asyncio

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, wait()).result()


def older_than(store: Any, seconds: float, now: float) -> list[str]:
    """Top-level sessions (not a sub-agent's: those go with their parent) last updated before now - seconds."""
    store.flush()
    rows = store.conn.execute(
        "SELECT s.id FROM sessions s WHERE s.updated < ? AND NOT EXISTS (SELECT 1 FROM runs c JOIN runs p"
        " ON c.parent_run_id = p.id WHERE c.session_id = s.id AND p.session_id <> s.id) ORDER BY s.updated",
        (now - seconds,)).fetchall()
    return [r[0] for r in rows]


def describe(report: ForgetReport) -> str:
    """The report as lines for a terminal."""
    lines = [f"deleted {len(report.sessions)} session(s): {', '.join(report.sessions)}" if not report.kept
             else f"NOT deleted: {', '.join(report.sessions)} (kept in the session store so the command can be re-run)"]
    for k in sorted(report.counts):
        lines.append(f"  {k}: {report.counts[k]}")
    for plugin, err in report.failures:
        lines.append(f"error: plugin {plugin} could not delete what it keeps about these sessions: {err}")
    return "\n".join(lines)


def dumps(report: ForgetReport) -> str:
    return json.dumps(report.as_json())


def delete_rows(store: Any, session_ids: Iterable[str]) -> dict[str, int]:
    """Delete every kernel row of ``session_ids`` in one transaction (portable SQL: SQLite and the
    PostgreSQL connection alike); the number of rows per table."""
    ids = list(dict.fromkeys(session_ids))
    counts: dict[str, int] = {}
    if not ids:
        return counts
    store.flush()
    marks = ",".join("?" * len(ids))
    runs = f"SELECT id FROM runs WHERE session_id IN ({marks})"
    statements = (
        ("steps", f"DELETE FROM steps WHERE run_id IN ({runs})", ids),
        ("events", f"DELETE FROM events WHERE session_id IN ({marks}) OR run_id IN ({runs})", ids + ids),
        ("usage", f"DELETE FROM usage WHERE session_id IN ({marks})", ids),
        ("messages", f"DELETE FROM messages WHERE session_id IN ({marks})", ids),
        ("runs", f"DELETE FROM runs WHERE session_id IN ({marks})", ids),
        ("sessions", f"DELETE FROM sessions WHERE id IN ({marks})", ids),
    )
    conn = store.conn
    was = conn.execute("PRAGMA secure_delete").fetchone()[0] if getattr(store, "dialect", "sqlite") == "sqlite" else None
    if was == 0:
        _secure(store, True)  # deleted text is overwritten with zeros, not left in free pages
    try:
        with conn:
            conn.execute("BEGIN")
            for kind, sql, args in statements:
                cur = conn.execute(sql, tuple(args))
                counts[kind] = max(int(getattr(cur, "rowcount", 0) or 0), 0)
            counts["provenance_rewritten"] = scrub_provenance(conn, ids)
    finally:
        if was == 0:
            _secure(store, False)
    return counts


FORGOTTEN_DETAIL = "content of a deleted conversation that held untrusted content"


def scrub_sources(sources: Any, session_ids: Iterable[str]) -> tuple[Any, bool]:
    """Provenance sources (``[{"source", "detail", "kind"}]``) with every detail that names one of
    ``session_ids`` replaced by :data:`FORGOTTEN_DETAIL` — the taint stays, what it quoted of the
    deleted conversation (its id, its file names, its sub-agents) goes. ``(sources, changed)``."""
    ids = [i for i in session_ids if i]
    if not isinstance(sources, list) or not ids:
        return sources, False
    out, changed = [], False
    for s in sources:
        if isinstance(s, dict) and any(i in str(s.get("detail", "")) for i in ids):
            s = {**s, "detail": FORGOTTEN_DETAIL}
            changed = True
        if s not in out:
            out.append(s)
    return out, changed or len(out) != len(sources)


def scrub_provenance(conn: Any, session_ids: list[str]) -> int:
    """Other sessions that recalled one of ``session_ids`` keep being untrusted, but their record of
    it no longer names it (``scrub_sources``); the number of sessions rewritten. Inside the
    caller's transaction."""
    rows: dict[str, str] = {}
    for sid in session_ids:
        for ident, meta in conn.execute("SELECT id, metadata FROM sessions WHERE metadata LIKE ?", (f"%{sid}%",)):
            if ident not in session_ids:
                rows[ident] = meta
    changed = 0
    for ident, meta in rows.items():
        try:
            data = json.loads(meta or "{}")
        except ValueError:
            continue
        record = data.get("untrusted") if isinstance(data, dict) else None
        if not isinstance(record, dict):
            continue
        record["sources"], hit = scrub_sources(record.get("sources"), session_ids)
        if hit:
            conn.execute("UPDATE sessions SET metadata = ? WHERE id = ?", (json.dumps(data, separators=(",", ":")), ident))
            changed += 1
    return changed


def purge_wal(store: Any) -> None:
    """SQLite: the write-ahead log still holds the pages as they were before the deletion — copy
    the log into the database and truncate it (a reader in another process may keep part of it
    until it finishes; the next checkpoint then drops it)."""
    if getattr(store, "dialect", "sqlite") == "sqlite" and str(getattr(store, "path", ":memory:")) != ":memory:":
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def delete_keyed(conn: Any, table: str, column: str, ids: Iterable[str]) -> int:
    """``DELETE FROM table WHERE column IN ids`` on either backend, 0 when the table was never
    created (the plugin never ran in this database) — the helper plugins' ``forget_sessions`` use."""
    from .storage import table_names

    ids = list(ids)
    if not ids or table not in table_names(conn):
        return 0
    cur = conn.execute(f"DELETE FROM {table} WHERE {column} IN ({','.join('?' * len(ids))})", tuple(ids))
    return max(int(getattr(cur, "rowcount", 0) or 0), 0)
