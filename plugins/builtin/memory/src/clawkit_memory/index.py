"""The memory index: files and episodes → chunks → cached embeddings → FTS5 + sqlite-vec.

Incremental at two levels: a file whose size, mtime and content hash are unchanged is
not even re-chunked, and a chunk whose content hash already has a vector for the
current model (table ``memory_embeddings``, keyed by ``(model, hash)``) is never
embedded again. ``counters`` counts what was really embedded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3 as stdlib_sqlite
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from . import db as mdb
from . import trust
from .binary import BinaryPrefilter
from .chunking import Chunk, chunk_markdown, chunk_turn, finished_turns
from .config import ChunkingConfig

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
EPISODE_BATCH = 64  # sessions read per snapshot when indexing episodes
# sessions of an agent with messages above a watermark: the new messages are read by rowid range
# first (MATERIALIZED keeps SQLite from grouping over the whole messages_session index instead)
_TOUCHED = ("WITH new AS {} (SELECT id, session_id FROM messages WHERE id > ?)"
            " SELECT n.session_id, MAX(n.id) AS last FROM new n JOIN sessions s ON s.id = n.session_id"
            " WHERE s.agent = ? AND (json_extract(CASE WHEN json_valid(s.metadata) THEN s.metadata END, '$.subagent')"
            " IS NOT NULL) = ? GROUP BY n.session_id ORDER BY last LIMIT ?"
            ).format("MATERIALIZED" if stdlib_sqlite.sqlite_version_info >= (3, 35) else "")
_TAG = re.compile(r"(?<![\w#/&])#([A-Za-z][\w-]{1,40})")
_TAG_LINE = re.compile(r"^\s*[-*]?\s*tags?:\s*(.+)$", re.I | re.M)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tags_of(text: str) -> list[str]:
    """``#hashtags`` in the text and ``tags: a, b`` lines, lower-cased."""
    found = {t.lower() for t in _TAG.findall(text)}
    for line in _TAG_LINE.findall(text):
        found.update(t.strip().lower().lstrip("#") for t in re.split(r"[,\s]+", line) if t.strip())
    return sorted(found)


QUERY_BATCH = 32  # queries per embedding call at most (short ones: one forward pass)
QUERY_CACHE = 1024  # query vectors kept (1.5 MiB at 384 dimensions), and queries expected at most


@dataclass
class IndexReport:
    """What one indexing run did."""

    files: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks: int = 0
    embedded: int = 0
    cached: int = 0
    paths: list[str] = field(default_factory=list)
    more: bool = False  # a bounded run stopped with work left
    sources: int = 0  # memory files a sync saw (on disk or indexed before)


    def add(self, other: "IndexReport") -> "IndexReport":
        for k in ("files", "unchanged", "removed", "chunks", "embedded", "cached"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.paths += other.paths
        self.more = self.more or other.more
        return self


class MemoryIndex:
    """One memory database, shared by every partition in it. Thread-safe (one lock).

    ``provider`` is an embedding provider, or a zero-argument callable returning one
    (resolved on first use so that opening the index costs nothing).
    """

    def __init__(self, path: str | Path, provider: Any, *, workspace: str | Path = ".",
                 chunking: ChunkingConfig | None = None, progress: bool = False):
        self.path = Path(path)
        self.workspace = Path(workspace).resolve()
        self.chunking = chunking or ChunkingConfig()
        self.progress = progress
        self.conn = mdb.connect(self.path)
        trust.ensure(self.conn)  # episodes' provenance (see .trust): an additive table
        self.lock = threading.RLock()
        self._provider = provider
        self.counters = {"embedded": 0, "cached": 0, "files_indexed": 0, "files_unchanged": 0}
        self.generation = 0  # bumped on every write: search caches key on it
        self.binary = BinaryPrefilter()  # in-memory bit vectors for the Hamming prefilter, kept in step
        self._query_cache: dict[str, np.ndarray] = {}
        # queries submitted for recall and not embedded yet (insertion order; the main thread adds, the memory
        # thread takes): the first one embedded takes the others along in the same call (expect_query)
        self._expected: dict[str, None] = {}
        self._state_conns: dict[str, tuple[Any, tuple]] = {}  # session db -> (read-only connection, file id)
        self._episodes_lock = threading.Lock()
        self._trust_filled: set[tuple[str, str]] = set()  # (partition, session db) whose old episodes got provenance
        self._vectors_model: str | None = None  # the model memory_vec was checked to hold, this process
        self._trust_seen: dict[tuple[str, str], list] = {}  # episode_trust's lookups at index version _trust_at
        self._trust_at: tuple | None = None

    # --- embeddings --------------------------------------------------------------------

    @property
    def provider(self) -> Any:
        if callable(self._provider) and not hasattr(self._provider, "embed"):
            self._provider = self._provider()
        return self._provider

    @property
    def model(self) -> str:
        return str(self.provider.model)

    def _ensure_vectors(self) -> None:
        """Create the KNN table for this model; a model change rebuilds it from the cache."""
        if self._vectors_model == self.model:
            return
        stored = mdb.get_meta(self.conn, "model")
        if stored == self.model and mdb.has_vectors(self.conn):
            self._vectors_model = stored
            return
        dims = int(self.provider.dimensions)
        self.binary.invalidate()
        with self.transaction():
            if mdb.has_vectors(self.conn):
                self.conn.execute("DROP TABLE memory_vec")
            mdb.create_vectors(self.conn, dims)
            mdb.set_meta(self.conn, "model", self.model)
            mdb.set_meta(self.conn, "dims", str(dims))
        rows = self.conn.execute("SELECT id, partition, hash, embed FROM (SELECT id, partition, hash, "
                                 "COALESCE(heading || char(10), '') || text AS embed FROM memory_chunks)").fetchall()
        if rows:  # re-embed (or take from the cache) everything under the new model
            vecs = self.vectors_for([r[3] for r in rows], [r[2] for r in rows])
            with self.transaction():
                self._insert_vectors([(r[0], r[1]) for r in rows], vecs)
        self._vectors_model = self.model

    def vectors_for(self, texts: list[str], hashes: list[str], report: IndexReport | None = None) -> np.ndarray:
        """Vectors for ``texts`` from the cache, embedding (in batches) only the misses."""
        model = self.model
        found: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(hashes))
        for s in range(0, len(uniq), 500):
            part = uniq[s : s + 500]
            q = f"SELECT hash, vector FROM memory_embeddings WHERE model = ? AND hash IN ({','.join('?' * len(part))})"
            for h, blob in self.conn.execute(q, (model, *part)):
                found[h] = np.frombuffer(blob, dtype=np.float32)
        missing: dict[str, str] = {}
        for t, h in zip(texts, hashes):
            if h not in found:
                missing.setdefault(h, t)
        if missing:
            self._embed_missing(missing, found)
        n_cached = len(set(hashes)) - len(missing)
        self.counters["embedded"] += len(missing)
        self.counters["cached"] += n_cached
        if report is not None:
            report.embedded += len(missing)
            report.cached += n_cached
        return np.stack([found[h] for h in hashes]) if hashes else np.zeros((0, 0), dtype=np.float32)

    def _embed_missing(self, missing: dict[str, str], found: dict[str, np.ndarray]) -> None:
        items = list(missing.items())
        batch = max(1, int(getattr(self.provider, "batch_size", 32)))
        bar = None
        if self.progress and len(items) > batch:
            from tqdm import tqdm

            bar = tqdm(total=len(items), desc="embedding", unit="chunk")
        now = time.time()
        step = batch * 8  # several provider batches per cache write
        for s in range(0, len(items), step):
            part = items[s : s + step]
            vecs = np.asarray(self.provider.embed([t for _, t in part]), dtype=np.float32)
            rows = []
            for (h, _), v in zip(part, vecs):
                found[h] = v
                rows.append((self.model, h, v.tobytes(), now))
            with self.lock:
                self.conn.executemany("INSERT OR REPLACE INTO memory_embeddings VALUES (?, ?, ?, ?)", rows)
            if bar is not None:
                bar.update(len(part))
        if bar is not None:
            bar.close()

    def query_vector(self, text: str) -> np.ndarray:
        """The embedding of a search query (small in-memory cache). An index whose vectors were made
        by another model (e.g. the earlier 384-d MiniLM) is rebuilt for this one first: a query
        vector must match the stored ones."""
        if self._vectors_model != self.model:
            with self.lock:
                self._ensure_vectors()
        v = self._query_cache.get(text)
        if v is None:
            cache, expected = self._query_cache, self._expected
            # the other queries waiting for recall embedded in the same call: the model's weights are read and
            # widened once per forward pass, which a short query alone pays in full (~15 ms of CPU); a pass
            # of 32 short queries costs little more than one
            batch = [text, *(q for q in list(expected)[:QUERY_BATCH] if q != text and q not in cache)][:QUERY_BATCH]
            vectors = np.asarray(self.provider.embed(batch), dtype=np.float32)
            for q in batch:
                expected.pop(q, None)
            cache.update(zip(batch, vectors))
            while len(cache) > QUERY_CACHE:  # the oldest go (a batch's other queries are the newest: kept)
                del cache[next(iter(cache))]
            v = vectors[0]
        return v

    def expect_query(self, text: str) -> None:
        """``text`` will be asked of :meth:`query_vector` soon (a recall was queued for it): whichever
        query is embedded first takes it along in the same call. Any thread; a query embedded or
        abandoned meanwhile costs nothing more than its share of a pass."""
        expected = self._expected
        if text not in self._query_cache and text not in expected:
            if len(expected) >= QUERY_CACHE:  # recalls that never ran (a worker that stopped)
                expected.clear()
            expected[text] = None

    def unexpect_query(self, text: str) -> None:
        """The recall queued for ``text`` will not run (its turn went on without it): no pass embeds it."""
        self._expected.pop(text, None)

    # --- writing chunks ----------------------------------------------------------------

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[None]:
        """One write transaction under the index lock; bumps ``generation`` when it commits.
        A rolled-back write drops the in-memory prefilter (reloaded on the next search).
        ``immediate``: the write lock is taken at once, so what the transaction reads first is
        the latest committed state (another process's deletion included)."""
        with self.lock:
            try:
                with self.conn:
                    self.conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
                    yield
            except BaseException:
                self.binary.invalidate()
                raise
            self.generation += 1

    def _insert_vectors(self, ids_parts: list[tuple[int, str]], vecs: np.ndarray) -> None:
        self.conn.executemany(
            "INSERT INTO memory_vec (rowid, partition, embedding, coarse) VALUES (?, ?, ?, vec_quantize_binary(?))",
            [(i, p, v.tobytes(), v.tobytes()) for (i, p), v in zip(ids_parts, vecs)],
        )
        self.binary.add([i for i, _ in ids_parts], [p for _, p in ids_parts], vecs)

    def _delete_chunks(self, where: str, args: tuple) -> int:
        ids = [r[0] for r in self.conn.execute(f"SELECT id FROM memory_chunks WHERE {where}", args)]
        for s in range(0, len(ids), 500):
            part = ids[s : s + 500]
            marks = ",".join("?" * len(part))
            self.conn.execute(f"DELETE FROM memory_fts WHERE rowid IN ({marks})", part)
            if mdb.has_vectors(self.conn):
                self.conn.execute(f"DELETE FROM memory_vec WHERE rowid IN ({marks})", part)
            self.conn.execute(f"DELETE FROM memory_chunks WHERE id IN ({marks})", part)
        self.binary.remove(ids)
        return len(ids)

    def replace_chunks(self, partition: str, kind: str, path: str, chunks: list[Chunk], *, created: float | list[float],
                       session_id: str | None = None, report: IndexReport | None = None) -> None:
        """Swap the chunks of one source for ``chunks`` (embedding only what the cache lacks).

        ``created`` is one time for all chunks or one per chunk (episode turns)."""
        times = created if isinstance(created, list) else [created] * len(chunks)
        texts = [c.embed_text() for c in chunks]
        hashes = [content_hash(t) for t in texts]
        vecs = self.vectors_for(texts, hashes, report) if chunks else None
        with self.lock:
            self._ensure_vectors()
            with self.transaction():
                self._write_chunks(partition, kind, path, chunks, hashes, times, vecs, session_id)
        if report is not None:
            report.chunks += len(chunks)

    def _write_chunks(self, partition: str, kind: str, path: str, chunks: list[Chunk], hashes: list[str],
                      times: list[float], vecs: Any, session_id: str | None) -> None:
        """The rows of one source's chunks (inside a transaction, vectors already computed)."""
        self._delete_chunks("partition = ? AND path = ?", (partition, path))
        ids = []
        for c, h, t in zip(chunks, hashes, times):
            tags = "," + ",".join(tags_of(c.text)) + ","
            cur = self.conn.execute(
                "INSERT INTO memory_chunks (partition, kind, path, start_line, end_line, heading, text, hash,"
                " tags, session_id, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (partition, kind, path, c.start_line, c.end_line, c.heading, c.text, h, tags, session_id, t),
            )
            ids.append(cur.lastrowid)
            self.conn.execute("INSERT INTO memory_fts (rowid, text, heading, path) VALUES (?, ?, ?, ?)",
                              (cur.lastrowid, c.text, c.heading, path))
        if chunks:
            self._insert_vectors([(i, partition) for i in ids], vecs)

    # --- files -------------------------------------------------------------------------

    def rel(self, path: Path) -> str:
        """The path as stored and cited: relative to the workspace when inside it."""
        path = path.resolve()
        try:
            return path.relative_to(self.workspace).as_posix()
        except ValueError:
            return path.as_posix()

    def abs(self, stored: str) -> Path:
        p = Path(stored)
        return p if p.is_absolute() else self.workspace / p

    def index_file(self, path: str | Path, partition: str, *, force: bool = False) -> IndexReport:
        """(Re-)index one text file unless its content hash is unchanged."""
        report = IndexReport()
        p = self.abs(str(path)) if not Path(path).is_absolute() else Path(path)
        key = self.rel(p)
        st = p.stat()
        raw = p.read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        with self.lock:
            row = self.conn.execute("SELECT hash, forgotten FROM memory_sources WHERE partition = ? AND path = ?",
                                    (partition, key)).fetchone()
        if row is not None and row[0] == digest and not (row[1] and force):
            with self.lock:  # same content, maybe touched: remember the new stat
                self.conn.execute("UPDATE memory_sources SET mtime = ?, size = ? WHERE partition = ? AND path = ?",
                                  (st.st_mtime, st.st_size, partition, key))
            report.unchanged += 1
            self.counters["files_unchanged"] += 1
            return report
        text = raw.decode("utf-8", errors="replace")
        chunks = chunk_markdown(text, self.chunking.tokens, self.chunking.overlap)
        self.replace_chunks(partition, "file", key, chunks, created=st.st_mtime, report=report)
        with self.lock:
            self.conn.execute(
                "INSERT OR REPLACE INTO memory_sources (partition, path, kind, hash, mtime, size, indexed_at, forgotten)"
                " VALUES (?, ?, 'file', ?, ?, ?, ?, 0)", (partition, key, digest, st.st_mtime, st.st_size, time.time()))
            self.generation += 1  # a new source row (a sub-agent's first note makes its partition): readers look again
        report.files += 1
        report.paths.append(key)
        self.counters["files_indexed"] += 1
        return report

    def expand(self, targets: Iterable[str | Path]) -> list[Path]:
        """Files named by ``targets`` (files, directories searched for text files, globs)."""
        out: list[Path] = []
        for t in targets:
            p = Path(t) if Path(t).is_absolute() else self.workspace / t
            if p.is_dir():
                out += sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES
                              and not any(part.startswith(".") for part in f.relative_to(p).parts))
            elif p.is_file():
                out.append(p)
            elif any(ch in str(t) for ch in "*?["):
                out += sorted(f for f in self.workspace.glob(str(t)) if f.is_file())
        return list(dict.fromkeys(out))

    def index_paths(self, targets: Iterable[str | Path], partition: str, *, force: bool = False) -> IndexReport:
        report = IndexReport()
        for f in self.expand(targets):
            report.add(self.index_file(f, partition, force=force))
        return report

    def sync(self, partition: str, roots: Iterable[str | Path]) -> IndexReport:
        """Bring the partition up to date: new and changed files under ``roots`` and every file
        indexed before are re-indexed; deleted files are dropped. Unchanged stat → no read."""
        report = IndexReport()
        with self.lock:
            known = {p: (m, s, f) for p, m, s, f in self.conn.execute(
                "SELECT path, mtime, size, forgotten FROM memory_sources WHERE partition = ? AND kind = 'file'",
                (partition,))}
        candidates = {self.rel(f): f for f in self.expand(roots)}
        for key in known:
            candidates.setdefault(key, self.abs(key))
        report.sources = len(candidates)
        for key, f in candidates.items():
            try:
                st = f.stat()
            except FileNotFoundError:
                if key in known:
                    with self.transaction():
                        self._delete_chunks("partition = ? AND path = ?", (partition, key))
                        self.conn.execute("DELETE FROM memory_sources WHERE partition = ? AND path = ?", (partition, key))
                    report.removed += 1
                continue
            if key in known and known[key][:2] == (st.st_mtime, st.st_size):
                continue
            report.add(self.index_file(f, partition))
        return report

    # --- episodes ----------------------------------------------------------------------

    def _state_conn(self, state_db: str | Path) -> Any | None:
        """One read-only connection per session database, kept open (None while it does not
        exist; reopened when the file was replaced)."""
        key = str(Path(state_db).resolve())
        try:
            st = os.stat(key)
        except FileNotFoundError:
            return None
        held = self._state_conns.get(key)
        if held is not None and held[1] == (st.st_dev, st.st_ino):
            return held[0]
        if held is not None:
            held[0].close()
        conn = stdlib_sqlite.connect(f"file:{key}?mode=ro", uri=True, timeout=5, isolation_level=None,
                                     check_same_thread=False)
        self._state_conns[key] = (conn, (st.st_dev, st.st_ino))
        return conn

    def sync_sessions(self, state_db: str | Path | Any, partition: str, agent: str, *,
                      max_sessions: int | None = None, subagent: bool = False) -> IndexReport:
        """Index finished turns of ``agent``'s sessions from the kernel's session database.

        ``state_db`` is the file path (one read-only connection per file, kept open) or an
        open sqlite3 connection. Incremental: a watermark (the last message id seen, kept in
        ``memory_meta``) limits each run to the sessions that received messages since the
        last run, so its cost follows what is new, not the length of the history. A touched
        session is re-read whole (its finished turns replace its episode; unfinished turns
        wait for a later run); one whose last message id is unchanged is skipped.
        ``max_sessions`` bounds one run (``report.more`` says whether sessions are left).
        ``subagent``: index the sub-agent sessions of that name (a child's partition), else only
        the sessions that are not a sub-agent's — a parent never takes a child's turns as its own.
        """
        report = IndexReport()
        with self._episodes_lock:  # one indexer at a time: two would index the same session twice
            if isinstance(state_db, (str, Path)):
                conn = self._state_conn(state_db)
                ident = str(Path(state_db).resolve())
            else:
                conn, ident = state_db, "conn"
            if conn is None:
                return report
            if (partition, ident) not in self._trust_filled:
                self._fill_trust(conn, partition)
                self._trust_filled.add((partition, ident))
            meta_key = f"episodes:{partition}:{agent}:{ident}"
            flag = 1 if subagent else 0
            size = min(EPISODE_BATCH, max_sessions) if max_sessions else EPISODE_BATCH
            while True:
                batch, done = self._read_touched(conn, meta_key, agent, size, flag)
                if batch is None:
                    return report
                self._index_episodes(partition, batch, meta_key, done, report)
                if len(batch) < size:
                    return report
                if max_sessions is not None and report.files + report.unchanged >= max_sessions:
                    report.more = True
                    return report

    def _read_touched(self, conn: Any, meta_key: str, agent: str, limit: int, subagent: int = 0) -> tuple[list | None, str]:
        """Sessions of ``agent`` with messages above the watermark (at most ``limit``, by their
        last message id) with their rows, read in one snapshot, and the watermark after them."""
        with self.lock:
            stored = mdb.get_meta(self.conn, meta_key)
        mark = json.loads(stored) if stored else {}
        owns = not conn.in_transaction
        if owns:
            conn.execute("BEGIN")
        try:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages'").fetchone():
                return None, ""
            # the first session names the database: a new state.db (ids from 1 again) starts over
            first = (conn.execute("SELECT id FROM sessions ORDER BY rowid LIMIT 1").fetchone() or [None])[0]
            top = conn.execute("SELECT MAX(id) FROM messages").fetchone()[0] or 0
            since = int(mark.get("id", 0)) if mark.get("first") == first and int(mark.get("id", 0)) <= top else 0
            if since >= top:
                return None, ""
            touched = conn.execute(_TOUCHED, (since, agent, subagent, limit)).fetchall()
            # with each session's provenance as of these messages (the same snapshot): see .trust
            metas = trust.read_metadata(conn, [sid for sid, _ in touched]) if touched else {}
            batch = [(sid, last, conn.execute("SELECT id, role, content, data, created FROM messages"
                                              " WHERE session_id = ? ORDER BY id", (sid,)).fetchall(),
                      trust.sources_of(metas[sid], sid) if sid in metas else trust.UNRECORDED)
                     for sid, last in touched]
        finally:
            if owns:
                conn.execute("COMMIT")
        # a full batch may leave sessions whose last message is above its last one; else all is seen
        upto = touched[-1][1] if len(touched) >= limit else top
        return batch, json.dumps({"first": first, "id": upto})

    def _index_episodes(self, partition: str, batch: list, meta_key: str, done: str, report: IndexReport) -> None:
        """Index a batch of touched sessions: their finished turns chunked, the missing embeddings
        computed in one batch (outside the index lock: a search may run meanwhile), then every
        session's chunks and the new watermark written in one transaction."""
        keys = [f"session:{sid}" for sid, *_ in batch]
        sources = {sid: prov for sid, _, _, prov in batch}
        known: dict[str, tuple] = {}
        with self.lock:
            for s in range(0, len(keys), 500):
                part = keys[s : s + 500]
                known.update((r[0], r[1:]) for r in self.conn.execute(
                    f"SELECT path, hash, forgotten_before FROM memory_sources WHERE partition = ? AND path IN"
                    f" ({','.join('?' * len(part))})", (partition, *part)))
        plans = []
        for key, (sid, last_id, rows, _prov) in zip(keys, batch):
            old = known.get(key)
            if old is not None and old[0] == str(last_id):
                report.unchanged += 1
                continue
            floor = (old[1] if old else None) or 0.0
            chunks: list[Chunk] = []
            times: list[float] = []
            for t in finished_turns(rows):  # each turn keeps its own time, for decay and --older-than
                if t.created >= floor:
                    for c in chunk_turn(t, self.chunking.tokens, self.chunking.overlap):
                        chunks.append(c)
                        times.append(t.created)
            hashes = [content_hash(c.embed_text()) for c in chunks]
            plans.append((key, sid, last_id, floor, chunks, times, hashes))
        texts = [c.embed_text() for p in plans for c in p[4]]
        vecs = self.vectors_for(texts, [h for p in plans for h in p[6]], report) if texts else None
        with self.lock:
            if texts:
                self._ensure_vectors()
            with self.transaction(immediate=True):
                at = 0
                now = time.time()
                gone = self._forgotten([p[1] for p in plans])  # deleted since they were read: nothing written
                for key, sid, last_id, floor, chunks, times, hashes in plans:
                    if sid in gone:
                        at += len(chunks)
                        continue
                    self._write_chunks(partition, "episode", key, chunks, hashes, times,
                                       vecs[at : at + len(chunks)] if chunks else None, sid)
                    at += len(chunks)
                    self.conn.execute(
                        "INSERT OR REPLACE INTO memory_sources (partition, path, kind, hash, indexed_at, forgotten_before)"
                        " VALUES (?, ?, 'episode', ?, ?, ?)", (partition, key, str(last_id), now, floor or None))
                    trust.record(self.conn, partition, key, sources.get(sid, trust.UNRECORDED))
                    report.files += 1
                    report.chunks += len(chunks)
                    report.paths.append(key)
                mdb.set_meta(self.conn, meta_key, done)

    def _forgotten(self, session_ids: list[str]) -> set[str]:
        """Which of ``session_ids`` were deleted (``clawkit sessions delete``: their ids are kept in
        ``memory_forgotten``). Inside the write transaction that would index them."""
        found: set[str] = set()
        for s in range(0, len(session_ids), 500):
            part = session_ids[s : s + 500]
            found.update(r[0] for r in self.conn.execute(
                f"SELECT session_id FROM memory_forgotten WHERE session_id IN ({','.join('?' * len(part))})", part))
        return found

    def _fill_trust(self, conn: Any, partition: str) -> None:
        """Episodes indexed before provenance was kept get it from the session database, once
        (a session no longer there keeps no row: it stays untrusted). Under the episodes lock."""
        with self.lock:
            missing = trust.unrecorded(self.conn, partition)
        if not missing:
            return
        try:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sessions'").fetchone():
                return
            metas = trust.read_metadata(conn, [p[len(trust.SESSION):] for p in missing])
        except Exception:  # unreadable: the rows stay missing (untrusted)
            return
        with self.transaction():
            for path in missing:
                sid = path[len(trust.SESSION):]
                if sid in metas:
                    trust.record(self.conn, partition, path, trust.sources_of(metas[sid], sid))

    def episode_trust(self, hits: list) -> None:
        """Set ``untrusted_sources`` on ``session:`` episode hits ([] clean) and on notes saved from
        untrusted sessions (the caller holds no lock)."""
        for h in hits:  # notes memory_save wrote in untrusted sessions (their heading says so)
            if h.kind != "episode":
                h.untrusted_sources = trust.note_sources(h.path, h.heading) or None
        keys = [(h.partition, h.path) for h in hits if h.kind == "episode" and str(h.path).startswith(trust.SESSION)]
        if not keys:
            return
        with self.lock:  # provenance rows change only with a write: looked up once per index version
            version = (self.generation, self.conn.execute("PRAGMA data_version").fetchone()[0], self.conn.total_changes)
            if version != self._trust_at or len(self._trust_seen) > 4096:
                self._trust_seen, self._trust_at = {}, version
            missing = [k for k in keys if k not in self._trust_seen]
            if missing:
                self._trust_seen.update(trust.lookup(self.conn, missing))
            found = self._trust_seen
        for h in hits:
            got = found.get((h.partition, h.path))
            if got is not None:
                h.untrusted_sources = list(got)

    # --- forgetting and stats ----------------------------------------------------------

    def forget(self, partition: str, path: str | None = None, older_than: float | None = None) -> int:
        """Drop a source (path or glob) or everything older than ``older_than`` seconds.

        Forgotten files stay forgotten until they change; forgotten turns of a session
        stay forgotten when the session grows. Returns the number of chunks removed.
        """
        removed = 0
        with self.transaction():
            if path is not None:
                key = self.rel(self.abs(path)) if not path.startswith("session:") else path
                pattern = key if any(c in key for c in "*?[") else None
                sql = "partition = ? AND path GLOB ?" if pattern else "partition = ? AND path = ?"
                removed += self._delete_chunks(sql, (partition, pattern or key))
                self.conn.execute(f"UPDATE memory_sources SET forgotten = 1, hash = 'forgotten' WHERE {sql}",
                                  (partition, pattern or key))
                # a forgotten session comes back only with turns newer than now, when it grows
                self.conn.execute(f"UPDATE memory_sources SET forgotten_before = ? WHERE kind = 'episode' AND {sql}",
                                  (time.time(), partition, pattern or key))
            if older_than is not None:
                cutoff = time.time() - older_than
                removed += self._delete_chunks("partition = ? AND created < ?", (partition, cutoff))
                self.conn.execute("UPDATE memory_sources SET forgotten = 1, hash = 'forgotten' WHERE partition = ?"
                                  " AND kind = 'file' AND mtime < ?", (partition, cutoff))
                self.conn.execute("UPDATE memory_sources SET forgotten_before = MAX(COALESCE(forgotten_before, 0), ?)"
                                  " WHERE partition = ? AND kind = 'episode'", (cutoff, partition))
        return removed

    def stats(self) -> dict[str, Any]:
        """Counts per partition and kind, the model, the file size and this process's counters."""
        with self.lock:
            rows = self.conn.execute("SELECT partition, kind, COUNT(*), COUNT(DISTINCT path) FROM memory_chunks"
                                     " GROUP BY partition, kind ORDER BY partition, kind").fetchall()
            cache = self.conn.execute("SELECT COUNT(*) FROM memory_embeddings").fetchone()[0]
            model = mdb.get_meta(self.conn, "model")
        parts: dict[str, Any] = {}
        for part, kind, chunks, sources in rows:
            parts.setdefault(part, {})[kind] = {"chunks": chunks, "sources": sources}
        size = self.path.stat().st_size if self.path.exists() else 0
        return {"db": str(self.path), "model": model, "partitions": parts, "cached_embeddings": cache,
                "bytes": size, "counters": dict(self.counters)}

    def close(self) -> None:
        with self._episodes_lock:
            for conn, _ in self._state_conns.values():
                conn.close()
            self._state_conns.clear()
        with self.lock:
            self.conn.close()

