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

from .config import EPISODE_DELAY, MEMORY_ROOTS, MemoryConfig, config_of, db_path  # noqa: F401  (re-exported)
from .embeddings import collect_providers, resolve_provider
from .index import IndexReport, MemoryIndex
from .search import Hit, Searcher
from .worker import MemoryWorker

log = logging.getLogger("clawkit.memory")

SAFETY_SYNC_SECONDS = 2.0  # with a watcher running, a stat sweep at most this often
SESSIONS_PER_STEP = 16  # sessions indexed per step of episode indexing

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
    from . import take_pending

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
        self.roots = [*MEMORY_ROOTS, *cfg.paths]
        # one thread: recalls first; episode indexing in the gaps (see MemoryWorker)
        self.executor = MemoryWorker(f"memory-{partition}")
        self.users: set[int] = set()  # ids of the open agent configs using this service
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._last_sync = float("-inf")
        self._sync_lock = threading.Lock()
        self._root_paths = [os.path.join(self.workspace, r) for r in self.roots if not any(c in r for c in "*?[")]
        self._globbed = len(self._root_paths) < len(self.roots)
        self._empty_seen: tuple | None = None  # (index generation, data_version, *partitions) last seen empty
        self._state_dbs: set[str] = set()  # session databases seen (caught up once per process)
        self._episodes_queued = False
        self._episodes_running = 0
        self._episodes_guard = threading.Lock()
        self.last_episodes: IndexReport | None = None
        self._last_recall: tuple[tuple, list[Hit]] | None = None  # (query, partitions, index version), hits

    @property
    def workspace(self) -> Path:
        return self.index.workspace

    def readable(self, extra: list[str] | None = None) -> list[str]:
        """This partition first, then the ones it may read (never written to)."""
        return list(dict.fromkeys([self.partition, *self.cfg.read_partitions, *(extra or [])]))

    # --- freshness ---------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> IndexReport:
        """Sync memory files: always without a watcher, else every few seconds as a safety net."""
        with self._sync_lock:  # a caller arriving mid-sync waits for it instead of searching a stale index
            if not force and self.watching and time.monotonic() - self._last_sync < SAFETY_SYNC_SECONDS:
                return IndexReport()
            report = self.index.sync(self.partition, self.roots)
            self._last_sync = time.monotonic()
            return report

    def sync_sessions(self, state_db: Any, *, max_sessions: int | None = None) -> IndexReport:
        """Index new finished turns of this agent's sessions now (incremental, see
        :meth:`MemoryIndex.sync_sessions`)."""
        if not self.cfg.sessions:
            return IndexReport()
        return self.index.sync_sessions(state_db, self.partition, self.agent_name, max_sessions=max_sessions)

    def index_sessions_later(self, state_db: Any, *, delay: float = EPISODE_DELAY) -> None:
        """Queue episode indexing as background work on the memory thread (after a turn ends):
        it runs ``delay`` seconds later when no recall waits, in bounded steps, so it never
        sits on a turn's path. At most one step is queued at a time."""
        self._queue_sessions(state_db, delay)

    def _queue_sessions(self, state_db: Any, delay: float | None) -> None:
        if not self.cfg.sessions:
            return
        with self._episodes_guard:
            if self._episodes_queued:
                return
            self._episodes_queued = True
            self._episodes_running += 1
        try:
            if delay is None:  # urgent: ahead of the recall submitted next
                self.executor.submit(self._index_sessions_step, state_db)
            else:
                self.executor.later(delay, self._index_sessions_step, state_db)
        except RuntimeError:  # shut down
            with self._episodes_guard:
                self._episodes_queued = False
                self._episodes_running -= 1

    def _index_sessions_step(self, state_db: Any) -> None:
        with self._episodes_guard:
            self._episodes_queued = False  # a turn ending from now on queues another step
        try:
            report = self.sync_sessions(state_db, max_sessions=SESSIONS_PER_STEP)
            self.last_episodes = report
            if report.more:
                self._queue_sessions(state_db, 0.0)
        except Exception:
            log.exception("memory: indexing past sessions failed")
        finally:
            with self._episodes_guard:
                self._episodes_running -= 1

    def note_state_db(self, state_db: Any) -> None:
        """The first message from a session database in this process catches up on its
        sessions first (one bounded step ahead of the recall; the rest in the background):
        a process that ran one turn and exited left its episode for the next one."""
        key = str(state_db)
        if key not in self._state_dbs:
            self._state_dbs.add(key)
            self._queue_sessions(state_db, None)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Run queued background work now and wait for everything queued (tests, CLI)."""
        self.executor.flush(timeout=timeout)

    def maybe_has_memory(self, extra_partitions: list[str] | None = None) -> bool:
        """Whether a recall could find anything; answers in microseconds and never blocks.

        False only when the readable partitions hold no chunk, no memory file root exists
        and no episode indexing is queued: then there is nothing to embed a query for."""
        if self._episodes_running or self._globbed or any(os.path.exists(p) for p in self._root_paths):
            return True
        index = self.index
        if not index.lock.acquire(blocking=False):  # busy writing: something is coming
            return True
        try:
            parts = self.readable(extra_partitions)
            version = (index.generation, index.conn.execute("PRAGMA data_version").fetchone()[0], *parts)
            if version == self._empty_seen:
                return False
            row = index.conn.execute(f"SELECT 1 FROM memory_chunks WHERE partition IN ({','.join('?' * len(parts))})"
                                     " LIMIT 1", parts).fetchone()
            self._empty_seen = None if row else version
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
        targets = [Path(p) for p in self._root_paths if os.path.exists(p)]  # runs every message: no pathlib
        if not targets:
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
        return hits[:k]

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
            version = (self.index.generation, self.index.conn.execute("PRAGMA data_version").fetchone()[0])
            key = (query, tuple(parts), session_id, version)
            if self._last_recall is not None and self._last_recall[0] == key:
                # nothing written since the same query: the same answer, without a search
                t["embed_ms"] = t["search_ms"] = 0.0
                t["cached"] = 1.0
                return list(self._last_recall[1])
            empty = not self.searcher._count(parts)
        if empty:
            t["embed_ms"] = t["search_ms"] = 0.0
            self._last_recall = (key, [])
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
        rc = self.cfg.recall
        # more candidates than needed: near-duplicates (the same conversation had three times) go
        hits = self.search(query, k=max(4 * rc.k, 12), extra_partitions=extra_partitions, exclude_session=session_id,
                           refresh=False)
        found = self.distinct([h for h in hits if h.similarity >= rc.min_similarity], rc.dedup_similarity)[: rc.k]
        t["search_ms"] = (time.perf_counter() - t3) * 1000
        self._last_recall = (key, found)
        return list(found)

    def distinct(self, hits: list[Hit], threshold: float) -> list[Hit]:
        """``hits`` (best first) without those whose text is a near-duplicate of a better one:
        the same words, or embeddings at least ``threshold`` similar."""
        if len(hits) <= 1:
            return hits
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
        self.executor.shutdown(timeout=timeout)
