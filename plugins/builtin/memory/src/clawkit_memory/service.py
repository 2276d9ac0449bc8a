"""One agent's memory: its partition of the shared index, freshness (watchfiles + stat
checks), episodes, and the searches its tools and prompt contributor run.

Services live for the process, one per (memory db, partition); an index is shared by
every partition stored in the same file.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .config import MemoryConfig
from .embeddings import collect_providers, resolve_provider
from .index import IndexReport, MemoryIndex
from .search import Hit, Searcher

log = logging.getLogger("clawkit.memory")

MEMORY_ROOTS = ("MEMORY.md", "memory")
SAFETY_SYNC_SECONDS = 2.0  # with a watcher running, a stat sweep at most this often

_indexes: dict[Path, MemoryIndex] = {}
_services: dict[tuple[Path, str], "AgentMemory"] = {}
_lock = threading.Lock()


def config_of(agent: Any) -> MemoryConfig:
    """The agent's ``plugins.memory`` section as a :class:`MemoryConfig` (defaults when absent)."""
    section = agent.plugin("memory") if hasattr(agent, "plugin") else None
    if section is None:
        return MemoryConfig()
    if isinstance(section, MemoryConfig):
        return section
    data = section.model_dump() if hasattr(section, "model_dump") else dict(section)
    data.pop("enabled", None)
    return MemoryConfig.model_validate(data)


def db_path(workspace: Path, cfg: MemoryConfig) -> Path:
    if cfg.db:
        p = Path(cfg.db)
        return (p if p.is_absolute() else workspace / p).resolve()
    return (workspace / ".clawkit" / "memory.db").resolve()


def memory_for(agent: Any, hooks: Any = None, *, progress: bool = False) -> "AgentMemory":
    """The process-wide memory service for ``agent`` (an AgentConfig)."""
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
    if progress:
        svc.index.progress = True
    return svc


def close_all() -> None:
    """Stop every watcher and close every index (tests, shutdown)."""
    with _lock:
        for svc in _services.values():
            svc.close()
        for index in _indexes.values():
            index.close()
        _services.clear()
        _indexes.clear()


class AgentMemory:
    """The memory of one partition (normally one agent)."""

    def __init__(self, index: MemoryIndex, cfg: MemoryConfig, partition: str, agent_name: str):
        self.index = index
        self.cfg = cfg
        self.partition = partition
        self.agent_name = agent_name
        self.searcher = Searcher(index, cfg.search)
        self.roots = [*MEMORY_ROOTS, *cfg.paths]
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"memory-{partition}")
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._last_sync = float("-inf")
        self._sync_lock = threading.Lock()

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

    def sync_sessions(self, state_db: Any) -> IndexReport:
        if not self.cfg.sessions:
            return IndexReport()
        return self.index.sync_sessions(state_db, self.partition, self.agent_name)

    @property
    def watching(self) -> bool:
        return self._watcher is not None and self._watcher.is_alive()

    def start_watching(self) -> None:
        """Re-index memory files as they change, in a daemon thread (watchfiles)."""
        if not self.cfg.watch or self.watching:
            return
        targets = [self.workspace / r for r in self.roots if (self.workspace / r).exists()]
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
               extra_partitions: list[str] | None = None, exclude_session: str | None = None) -> list[Hit]:
        self.refresh()
        hits = self.searcher.search(query, partitions=self.readable(extra_partitions), k=k + (5 if exclude_session else 0),
                                    filters=filters, mode=mode)  # type: ignore[arg-type]
        if exclude_session:
            hits = [h for h in hits if h.session_id != exclude_session]
        return hits[:k]

    def recall(self, query: str, *, session_id: str | None = None, state_db: Any = None,
               extra_partitions: list[str] | None = None) -> list[Hit]:
        """What the prompt contributor injects: the best hits above the similarity threshold."""
        if state_db is not None:
            try:
                self.sync_sessions(state_db)
            except Exception:
                log.exception("memory: indexing past sessions failed")
        rc = self.cfg.recall
        hits = self.search(query, k=rc.k, extra_partitions=extra_partitions, exclude_session=session_id)
        return [h for h in hits if h.similarity >= rc.min_similarity]

    def close(self) -> None:
        self._watch_stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=2)
        self.executor.shutdown(wait=False, cancel_futures=True)
