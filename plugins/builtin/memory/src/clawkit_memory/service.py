"""One agent's memory: its partition of the shared index, freshness (watchfiles + stat
checks), episodes, and the searches its tools and prompt contributor run.

Services live for the process, one per (memory db, partition); an index is shared by
every partition stored in the same file.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from clawkit.absent import AbsentPaths

from .errors import EmbeddingError
from .config import EPISODE_DELAY, MEMORY_ROOTS, MemoryConfig, config_of, db_path, is_below, notes_dir  # noqa: F401  (re-exported)
from .embeddings import collect_providers, resolve_provider
from .index import IndexReport, MemoryIndex
from .search import Hit, Searcher
from .worker import MemoryWorker

log = logging.getLogger("clawkit.memory")

SAFETY_SYNC_SECONDS = 2.0  # with a watcher running, a stat sweep at most this often
SESSIONS_PER_STEP = 64  # sessions indexed per step of episode indexing (one transaction, one embedding batch)
#: seconds a ``PRAGMA data_version`` read stands for the index's other-connection state (recall's checks on the
#: event loop: the empty-memory test, the repeated-question cache): a server's messages arrive milliseconds apart
DATA_VERSION_REUSE = 0.025
#: seconds a look that found every memory file root absent stands for the next messages (start_watching, the
#: recall's checks): a burst of messages shares one look, and a root that appears is seen by the messages
#: arriving from 5 ms after it on
ABSENT_REUSE = 0.005
MAX_DEFER = 5.0  # seconds a finished turn waits at most for a quiet moment before it is indexed anyway
URGENT_SESSIONS = 16  # sessions a process's first turn indexes ahead of its recall (the rest: background)
EXIT_FLUSH_SECONDS = 2.0  # closing indexes the turns still waiting for at most this long

_indexes: dict[Path, MemoryIndex] = {}
_services: dict[tuple[Path, str], "AgentMemory"] = {}
_by_agent: dict[int, tuple[Any, "AgentMemory"]] = {}
_lock = threading.Lock()


def memory_for(agent: Any, hooks: Any = None, *, progress: bool = False) -> "AgentMemory":
    """The process-wide memory service for ``agent`` (an AgentConfig); a config object seen
    before is answered from a cache (this runs on every message)."""
    known = _by_agent.get(id(agent))
    if known is not None and known[0] is agent and not progress:
        return known[1]
    cfg = config_of(agent)
    workspace = Path(agent.workspace).resolve()
    path = db_path(workspace, cfg)
    partition = cfg.partition or agent.name
    with _lock:
        svc = _services.get((path, partition))
        if svc is None:
            index = _indexes.get(path)
            if index is None:
                def provider() -> Any:
                    return resolve_provider(cfg.embedding, collect_providers(hooks) if hooks is not None else {})

                index = _indexes[path] = MemoryIndex(path, provider, workspace=workspace, chunking=cfg.chunking)
            svc = _services[(path, partition)] = AgentMemory(index, cfg, partition, agent.name)
        if len(_by_agent) >= 256:
            _by_agent.clear()
        _by_agent[id(agent)] = (agent, svc)  # the config is held, so its id is not reused
        svc.users.add(id(agent))
    if progress:
        svc.index.progress = True
    from .activity import take_pending

    for state_db in take_pending(agent):  # turns finished while memory was idle
        svc.index_sessions_later(state_db)
    return svc


def release(agent: Any) -> None:
    """``agent`` (a config) is closing: services no other open agent uses are stopped —
    their watcher and worker threads joined — and indexes left without a service closed."""
    with _lock:
        _by_agent.pop(id(agent), None)
        done = []
        for key, svc in list(_services.items()):
            svc.users.discard(id(agent))
            if not svc.users:
                done.append(svc)
                del _services[key]
        for svc in done:
            for k, (_, s) in list(_by_agent.items()):
                if s is svc:
                    del _by_agent[k]
        in_use = {id(svc.index) for svc in _services.values()}
        closing = [(p, ix) for p, ix in _indexes.items() if id(ix) not in in_use and any(s.index is ix for s in done)]
        for path, _ in closing:
            del _indexes[path]
    for svc in done:
        svc.close()
    for _, index in closing:
        index.close()


def close_all() -> None:
    """Stop every watcher and worker (joined) and close every index (tests, interpreter exit)."""
    with _lock:
        services, indexes = list(_services.values()), list(_indexes.values())
        _services.clear()
        _indexes.clear()
        _by_agent.clear()
    for svc in services:
        svc.close()
    for index in indexes:
        index.close()


# A worker still inside onnxruntime when the interpreter tears down aborts the process
# (SIGABRT, "terminate called without an active exception"): join it first.
atexit.register(close_all)


class AgentMemory:
    """The memory of one partition (normally one agent)."""

    def __init__(self, index: MemoryIndex, cfg: MemoryConfig, partition: str, agent_name: str):
        self.index = index
        self.cfg = cfg
        self.partition = partition
        self.agent_name = agent_name
        self.searcher = Searcher(index, cfg.search)
        # a sub-agent indexes only its own notes (and its own paths): the workspace's memory files are
        # the parent's, read through the parent's partition
        self.roots = [notes_dir(partition), *cfg.paths] if cfg.child_of else [*MEMORY_ROOTS, *cfg.paths]
        self._below: tuple[str, ...] = ()  # partitions of this agent's sub-agents: read as untrusted data
        # one thread: recalls first; episode indexing in the gaps (see MemoryWorker)
        self.executor = MemoryWorker(f"memory-{partition}")
        self.users: set[int] = set()  # ids of the open agent configs using this service
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._last_sync = float("-inf")
        self._sync_lock = threading.Lock()
        self._root_paths = [os.path.join(self.workspace, r) for r in self.roots if not any(c in r for c in "*?[")]
        self._globbed = len(self._root_paths) < len(self.roots)
        self._absent_roots = AbsentPaths(self._root_paths)  # checked every message: one stat while the workspace is unchanged
        self._seen: tuple | None = None  # (index version and partitions, whether they held a chunk) last looked at
        # the last ``PRAGMA data_version`` read and when (time.monotonic()): the merge due-check after a
        # turn reuses a recent one (merge._state) instead of asking the database again
        self.data_version_read: tuple[int, float] = (-1, float("-inf"))
        self._state_dbs: set[str] = set()  # session databases seen (caught up once per process)
        self._episodes_queued = False
        self._episodes_running = 0
        # of those, the steps a recall submitted now would wait for: urgent ones queued (they run before it)
        # and the one running; a background step still waiting runs after any recall queued meanwhile
        self._episodes_ahead = 0
        self._episodes_guard = threading.Lock()
        self._pending_since: float | None = None  # when the oldest turn not yet indexed ended
        self._flushing = False  # closing: pending turns are indexed now, not in a quiet moment
        self._flush_deadline = 0.0
        self.last_episodes: IndexReport | None = None
        # (query, partitions) -> (index version, candidates, their vectors, their sessions, answer)
        self._recalls: dict[tuple, tuple] = {}
        self._own = tuple(self.readable())  # the readable partitions of a session that adds none
        self._no_files = False  # the last file sync saw no memory file (on disk or indexed)
        self._absent_at = float("-inf")  # when start_watching last found no memory file root on disk
        self._absent_sync = AbsentPaths(self._root_paths)  # the same check for refresh, on the memory thread
        self._no_files_at: tuple | None = None  # the index's _written() at the sync that saw no file
        self._below_at: tuple | None = None  # the index version find_below last looked at

    @property
    def workspace(self) -> Path:
        return self.index.workspace

    def readable(self, extra: list[str] | None = None) -> list[str]:
        """This partition first, then the ones it may read (never written to), then its
        sub-agents' partitions (their hits are untrusted: :meth:`untrusted`)."""
        return list(dict.fromkeys([self.partition, *self.cfg.read_partitions, *(extra or []), *self._below]))

    def untrusted(self, partition: str) -> bool:
        """A hit from this partition is another agent's note: data, never instructions."""
        return is_below(partition, self.partition)

    def find_below(self) -> None:
        """Look up the partitions of this agent's sub-agents (``<mine>>child`` and deeper); asked of the
        database again only once it has changed (a sub-agent's partition appears with a write)."""
        with self.index.lock:
            version = self._written()
            if version == self._below_at:
                return
            rows = self.index.conn.execute("SELECT DISTINCT partition FROM memory_sources WHERE partition > ? AND "
                                           "partition < ?", (self.partition + ">", self.partition + "?")).fetchall()
            self._below_at = version
        below = tuple(sorted(p for (p,) in rows if is_below(p, self.partition)))
        if below != self._below:
            self._below = below
            self._own = tuple(self.readable())

    # --- freshness ---------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> IndexReport:
        """Sync memory files: always without a watcher, else every few seconds as a safety net."""
        with self._sync_lock:  # a caller arriving mid-sync waits for it instead of searching a stale index
            self.find_below()
            if not force and self.watching and time.monotonic() - self._last_sync < SAFETY_SYNC_SECONDS:
                return IndexReport()
            if not force and self._still_no_files():
                return IndexReport()
            report = self.index.sync(self.partition, self.roots)
            self._last_sync = time.monotonic()
            self._no_files = report.sources == 0
            with self.index.lock:
                self._no_files_at = self._written()
            return report

    def _still_no_files(self) -> bool:
        """Whether a file sync would surely find nothing, without one: the last sync saw no memory file
        (on disk or indexed), no root is a glob, every root is still absent (one ``stat`` per parent
        folder while unchanged: a file created there moves its folder's mtime) and no other connection
        has written to the index since (it could have indexed a file elsewhere). Recall asks this on
        every message; the full sync read the sources table and walked the roots each time."""
        if not self._no_files or self._globbed or self.watching:
            return False
        if len(self._absent_sync.absent()) != len(self._root_paths):
            return False
        with self.index.lock:
            return self._written() == self._no_files_at

    def _written(self) -> tuple:
        """What moves with any write to the index: this process's transactions, any statement of this
        connection (``total_changes``) and other connections' commits. The caller holds the index lock."""
        return (*self._version(), self.index.conn.total_changes)

    def sync_sessions(self, state_db: Any, *, max_sessions: int | None = None) -> IndexReport:
        """Index new finished turns of this agent's sessions now (incremental, see
        :meth:`MemoryIndex.sync_sessions`)."""
        if not self.cfg.sessions:
            return IndexReport()
        return self.index.sync_sessions(state_db, self.partition, self.agent_name, max_sessions=max_sessions,
                                        subagent=bool(self.cfg.child_of))

    def index_sessions_later(self, state_db: Any, *, delay: float | None = None) -> None:
        """Queue episode indexing as background work on the memory thread (after a turn ends).
        It waits for a quiet moment — no turn of this process in flight and none for ``delay``
        seconds — or until the oldest unindexed turn has waited ``MAX_DEFER`` seconds, then
        indexes every pending session in bounded batches (one transaction and one embedding
        batch each), so a busy process is not taxed turn by turn. At most one step is queued."""
        with self._episodes_guard:
            if self._pending_since is None:
                self._pending_since = time.monotonic()
            if self._episodes_queued:  # (most turns: a step is already queued, which _queue_sessions would say)
                return
        self._queue_sessions(state_db, EPISODE_DELAY if delay is None else delay)

    def _queue_sessions(self, state_db: Any, delay: float | None) -> None:
        if not self.cfg.sessions:
            return
        with self._episodes_guard:
            if self._episodes_queued:
                return
            self._episodes_queued = True
            self._episodes_running += 1
            if delay is None:
                self._episodes_ahead += 1
        try:
            if delay is None:  # urgent: ahead of the recall submitted next
                self.executor.submit(self._index_sessions_step, state_db, True)
            else:
                self.executor.later(delay, self._index_sessions_step, state_db, False)
        except RuntimeError:  # shut down
            with self._episodes_guard:
                self._episodes_queued = False
                self._episodes_running -= 1
                if delay is None:
                    self._episodes_ahead -= 1

    def _index_sessions_step(self, state_db: Any, now: bool = False) -> None:
        with self._episodes_guard:
            self._episodes_queued = False  # a turn ending from now on queues another step
            if not now:  # (an urgent step was counted when queued)
                self._episodes_ahead += 1
            if self._pending_since is None and not now:  # (a step that just finished had reset it)
                self._pending_since = time.monotonic()
            since = self._pending_since
        try:
            if not now and not self._flushing:
                from .activity import quiet_for

                wait = EPISODE_DELAY - quiet_for()
                if wait > 0 and time.monotonic() - since < MAX_DEFER:
                    self._queue_sessions(state_db, max(wait, 0.02))  # a reply is being made: later
                    return
            report = self.sync_sessions(state_db, max_sessions=URGENT_SESSIONS if now else SESSIONS_PER_STEP)
            self.last_episodes = report
            if report.more and not (self._flushing and time.monotonic() > self._flush_deadline):
                self._queue_sessions(state_db, None if self._flushing else 0.0)
            else:
                with self._episodes_guard:
                    if self._pending_since == since:  # else a turn ended meanwhile: it waits for quiet too
                        self._pending_since = None
        except EmbeddingError as e:  # a configuration problem (a missing or damaged model): one line, no traceback
            log.error("memory: indexing past sessions failed: %s", e)
        except Exception:
            log.exception("memory: indexing past sessions failed")
        finally:
            with self._episodes_guard:
                self._episodes_running -= 1
                self._episodes_ahead -= 1

    def note_state_db(self, state_db: Any) -> None:
        """The first message from a session database in this process catches up on its
        sessions first (one bounded step ahead of the recall; the rest in the background):
        a process that ran one turn and exited left its episode for the next one."""
        key = str(state_db)
        if key not in self._state_dbs:
            self._state_dbs.add(key)
            with self._episodes_guard:  # the rest of a backlog waits for quiet moments too
                if self._pending_since is None:
                    self._pending_since = time.monotonic()
            self._queue_sessions(state_db, None)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Run queued background work now and wait for everything queued (tests, CLI)."""
        self._run_queued(timeout)

    def maybe_has_memory(self, extra_partitions: list[str] | None = None) -> bool:
        """Whether a recall could find anything; answers in microseconds and never blocks.

        False only when the readable partitions hold no chunk, no memory file root exists
        and no episode indexing step would run before a recall queued now (an urgent catch-up, or a
        step already running): then there is nothing to embed a query for. A background step still
        waiting for a quiet moment does not count: the worker runs recalls first, so such a recall
        would find the index as it is (and the turns in flight keep the moment from being quiet)."""
        if self._episodes_ahead or self._globbed:
            return True
        # a root on disk: one stat per parent folder while they are unchanged (see AbsentPaths) — none when
        # start_watching found every root absent for this very message (as _files_fresh)
        if time.monotonic() - self._absent_at >= ABSENT_REUSE and len(self._absent_roots.absent()) < len(self._root_paths):
            return True
        index = self.index
        if not index.lock.acquire(blocking=False):  # busy writing: something is coming
            return True
        try:
            parts = self.readable(extra_partitions) if extra_partitions else self._own
            version = (*self._written(), *parts)
            if self._seen is not None and self._seen[0] == version:  # the index unchanged since the last look
                return self._seen[1]
            row = index.conn.execute(f"SELECT 1 FROM memory_chunks WHERE partition IN ({','.join('?' * len(parts))})"
                                     " LIMIT 1", parts).fetchone()
            self._seen = (version, row is not None)
            return row is not None
        finally:
            index.lock.release()

    @property
    def watching(self) -> bool:
        return self._watcher is not None and self._watcher.is_alive()

    def start_watching(self) -> None:
        """Re-index memory files as they change, in a daemon thread (watchfiles)."""
        if not self.cfg.watch or self.watching:
            return
        if time.monotonic() - self._absent_at < ABSENT_REUSE:
            return  # every root was absent a moment ago (a burst of messages shares one look)
        if len(self._absent_roots.absent()) == len(self._root_paths):
            targets = []
        else:
            targets = [Path(p) for p in self._root_paths if os.path.exists(p)]
        if not targets:
            self._absent_at = time.monotonic()  # the recall's freshness check of this message need not stat again
            return
        self._watch_stop.clear()
        self._watcher = threading.Thread(target=self._watch, args=(targets,), daemon=True,
                                         name=f"memory-watch-{self.partition}")
        self._watcher.start()

    def _watch(self, targets: list[Path]) -> None:
        import watchfiles

        try:
            for changes in watchfiles.watch(*targets, stop_event=self._watch_stop, step=50, debounce=200,
                                            raise_interrupt=False):
                if any(Path(p).suffix.lower() in (".md", ".markdown", ".txt") for _, p in changes):
                    try:
                        self.index.sync(self.partition, self.roots)
                    except Exception:  # a bad file must not kill the watcher
                        log.exception("memory: re-index after a change failed")
        except Exception:
            log.exception("memory: the file watcher stopped")

    # --- searching ---------------------------------------------------------------------

    def search(self, query: str, k: int = 5, filters: dict[str, Any] | None = None, *, mode: str = "hybrid",
               extra_partitions: list[str] | None = None, exclude_session: str | None = None,
               refresh: bool = True) -> list[Hit]:
        if refresh:
            self.refresh()
        hits = self.searcher.search(query, partitions=self.readable(extra_partitions), k=k + (5 if exclude_session else 0),
                                    filters=filters, mode=mode)  # type: ignore[arg-type]
        if exclude_session:
            hits = [h for h in hits if h.session_id != exclude_session]
        hits = hits[:k]
        self.index.episode_trust(hits)  # recalled memory keeps its provenance (see .trust)
        return hits

    def recall(self, query: str, *, session_id: str | None = None, extra_partitions: list[str] | None = None,
               timings: dict[str, float] | None = None, ready: Any = None) -> list[Hit]:
        """What the prompt contributor injects: the best distinct hits above the similarity threshold.

        Nothing is embedded when the readable partitions are empty. ``timings`` receives
        ``refresh_ms``, ``load_ms`` (the embedding model's one-time load), ``embed_ms`` (the
        query embedding, 0 when cached) and ``search_ms``. ``ready`` (a
        ``concurrent.futures.Future``) is resolved once the model is loaded, when only the
        search remains: the contributor's time budget counts from there."""
        t = timings if timings is not None else {}
        try:
            return self._recall(query, session_id, extra_partitions, t, ready)
        finally:
            if ready is not None and not ready.done():
                ready.set_result(time.perf_counter())

    def _recall(self, query: str, session_id: str | None, extra_partitions: list[str] | None,
                t: dict[str, float], ready: Any) -> list[Hit]:
        t0 = time.perf_counter()
        self.refresh()
        t1 = time.perf_counter()
        t["refresh_ms"] = (t1 - t0) * 1000
        parts = self.readable(extra_partitions)
        with self.index.lock:
            entry = self._recalls.get((query, tuple(parts)))
            version = self._version()
            if entry is not None and entry[0] == version:
                # nothing written since the same query: the same answer, without a search
                t["embed_ms"] = t["search_ms"] = 0.0
                t["cached"] = 1.0
                return self._pick(entry, session_id)
            empty = not self.searcher._count(parts)
        if empty:
            t["embed_ms"] = t["search_ms"] = 0.0
            self._remember(query, parts, version, [], {})
            return []
        load = getattr(self.index.provider, "load", None)
        if load is not None:
            load()
        t2 = time.perf_counter()
        t["load_ms"] = (t2 - t1) * 1000
        if ready is not None and not ready.done():
            ready.set_result(t2)
        self.index.query_vector(query)  # the model's work, timed on its own; search() takes it from the cache
        t3 = time.perf_counter()
        t["embed_ms"] = (t3 - t2) * 1000
        # more candidates than needed: near-duplicates (the same conversation had three times) go; and
        # five more, so that the current session's own turns can be left out of a cached answer too
        hits = self.search(query, k=self._wanted() + 5, extra_partitions=extra_partitions, refresh=False)
        # distinct() only ever compares hits at or above the similarity floor (_remember, _pick): their vectors
        floor = self._min_similarity()
        ids = [h.id for h in hits if h.similarity >= floor]
        with self.index.lock:
            vecs = self.searcher.vectors(ids) if len(ids) > 1 else {}
        entry = self._remember(query, parts, version, hits, vecs)
        found = self._pick(entry, session_id)
        t["search_ms"] = (time.perf_counter() - t3) * 1000
        return found

    def _wanted(self) -> int:
        return max(4 * self.cfg.recall.k, 12)

    def _version(self) -> tuple:
        """What changes whenever the index does: this process's writes (at once) and any other connection's
        commits (``PRAGMA data_version``, read again when the last read is :data:`DATA_VERSION_REUSE` old:
        another process's write is seen by the messages from then on). The caller holds the index lock."""
        read = self.data_version_read
        if time.monotonic() - read[1] < DATA_VERSION_REUSE:  # a busy server's messages: one read per moment
            return (self.index.generation, read[0])
        version = self.index.conn.execute("PRAGMA data_version").fetchone()[0]
        self.data_version_read = (version, time.monotonic())
        return (self.index.generation, version)

    def _remember(self, query: str, parts: list[str], version: tuple, hits: list[Hit], vecs: dict) -> tuple:
        """Keep a search's candidates for the same query until the index changes. The answer does
        not depend on the session (its own turns are filtered out of the candidates), so a new
        session asking what an earlier one asked is answered without a search."""
        rc = self.cfg.recall
        floor = self._min_similarity()
        general = self.distinct([h for h in hits[: self._wanted()] if h.similarity >= floor],
                                rc.dedup_similarity, vecs)[: rc.k]
        entry = (version, hits, vecs, {h.session_id for h in hits if h.session_id}, general)
        if len(self._recalls) >= 256:
            self._recalls.clear()
        self._recalls[(query, tuple(parts))] = entry
        return entry

    def _pick(self, entry: tuple, session_id: str | None) -> list[Hit]:
        """The recall's answer from a search's candidates, without ``session_id``'s own turns."""
        _, hits, vecs, sessions, general = entry
        if session_id not in sessions:
            return list(general)
        rc = self.cfg.recall
        mine = [h for h in hits if h.session_id != session_id][: self._wanted()]
        floor = self._min_similarity()
        return self.distinct([h for h in mine if h.similarity >= floor], rc.dedup_similarity, vecs)[: rc.k]

    def _min_similarity(self) -> float:
        """``recall.min_similarity``, else the provider's own (cosines differ by model: a static
        table's related texts score ~0.2-0.5 where MiniLM's score 0.4-0.7), else 0.35."""
        configured = self.cfg.recall.min_similarity
        return configured if configured is not None else float(getattr(self.index.provider, "min_similarity", 0.35))

    def cached_recall(self, query: str, session_id: str | None, extra_partitions: list[str] | None) -> list[Hit] | None:
        """The recall's answer when it is known without a search — the same query was answered
        since the index last changed and memory files cannot have changed unseen — else None.
        Never blocks (runs on the event loop): a busy index means None."""
        parts = self._own if not extra_partitions else tuple(self.readable(extra_partitions))
        entry = self._recalls.get((query, parts))
        if entry is None or not self._files_fresh():
            return None
        index = self.index
        if not index.lock.acquire(blocking=False):
            return None
        try:
            if self._version() != entry[0]:
                return None
        finally:
            index.lock.release()
        return self._pick(entry, session_id)

    def _files_fresh(self) -> bool:
        """Whether :meth:`refresh` would find nothing to do: the watcher runs and the safety sweep
        is not due, or there are no memory files at all (none on disk, none indexed)."""
        if self.watching:
            return time.monotonic() - self._last_sync < SAFETY_SYNC_SECONDS
        if not self._no_files or self._globbed:
            return False
        return time.monotonic() - self._absent_at < ABSENT_REUSE or len(self._absent_roots.absent()) == len(self._root_paths)

    def distinct(self, hits: list[Hit], threshold: float, vecs: dict | None = None) -> list[Hit]:
        """``hits`` (best first) without those whose text is a near-duplicate of a better one:
        the same words, or embeddings at least ``threshold`` similar."""
        if len(hits) <= 1:
            return hits
        if vecs is None:
            with self.index.lock:
                vecs = self.searcher.vectors([h.id for h in hits])
        kept: list[Hit] = []
        seen_text: set[str] = set()
        for h in hits:
            words = " ".join(h.text.lower().split())
            v = vecs.get(h.id)
            if words in seen_text or (v is not None and any(
                    k.id in vecs and float(v @ vecs[k.id]) >= threshold for k in kept)):
                continue
            seen_text.add(words)
            kept.append(h)
        return kept

    def close(self, timeout: float = 10.0) -> None:
        """Stop the file watcher and the worker and join both (a running job finishes:
        an embedding in progress is bounded work; queued background jobs are dropped and
        caught up by the next process). Idempotent."""
        self._watch_stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=2)
            if self._watcher.is_alive():
                log.warning("memory: the file watcher of %s did not stop within 2 s", self.partition)
        self.flush_episodes(EXIT_FLUSH_SECONDS)
        self.executor.shutdown(timeout=timeout)

    def flush_episodes(self, budget: float) -> bool:
        """Index the finished turns still waiting for a quiet moment, now, for at most ``budget``
        seconds (closing). Only when the embedding model is already loaded: an exit never loads
        it — what is left is caught up by the next process (the watermark keeps the place).
        True when nothing is left waiting."""
        if not self._episodes_running:
            return True
        index = self.index
        provider = index._provider
        if not hasattr(provider, "embed") or not getattr(provider, "loaded", False):
            return False
        try:
            self._run_queued(budget)
        except Exception:  # over budget (a step still runs: shutdown joins it) or shut down
            return False
        return not self._episodes_running

    def _run_queued(self, timeout: float) -> None:
        """Run every queued job now — episode steps without waiting for a quiet moment — and wait
        for them (``TimeoutError`` after ``timeout`` seconds)."""
        self._flush_deadline = time.monotonic() + timeout
        self._flushing = True
        try:
            self.executor.flush(timeout=timeout)
        finally:
            self._flushing = False
