"""Discovery, caching and hot reload of skills.

Sources, highest precedence first: the workspace's ``skills/``, extra ``paths``
from the config, the user's ``~/.clawkit/skills``, then skills shipped by plugins
(entry-point group ``clawkit.skills`` and the repository's top-level ``skills/``).
A skill is a ``*.claws`` file or a ``SKILL.md`` in a directory, anywhere under a
source directory. A name found in several sources is taken from the highest one.

:class:`SkillRegistry` keeps, per file, the last good compiled skill: a file that
stops compiling keeps that version active and the error is reported (log + a
queued event the plugin emits on the next turn). ``sync()`` rescans the source
directories; ``refresh()`` (run at every turn start) rescans only when something changed
since: on Linux it reads the inotify queue every scanned folder is watched on (one system
call, see :mod:`.changes`), elsewhere it stats the directories and files the last scan saw
(a file added, removed, renamed or edited changes its directory's or its own mtime); :meth:`SkillRegistry.start_watching`
subscribes the registry to the process's one watchfiles thread, which calls ``sync()``
as soon as a file changes.
"""

from __future__ import annotations

import atexit
import logging
import os
import stat as stat_mod
import threading
import time
import weakref
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from clawkit.absent import AbsentPaths

from . import changes
from .compiler import CompiledSkill, SkillCompileError, compile_file, content_hash, missing_requirements
from .claws import ClawsError

log = logging.getLogger("clawkit.skills")
ENTRY_POINT_GROUP = "clawkit.skills"
# A directory or file modified this recently (ns) before a scan may change again within the
# filesystem's timestamp granularity without its mtime moving: the next refresh rescans.
RACY_NS = 2_000_000_000


def is_skill_file(path: str | Path) -> bool:
    p = Path(path)
    return (p.suffix.lower() == ".claws" or p.name.upper() == "SKILL.MD") and not p.name.startswith(".")


def shipped_dirs() -> list[tuple[str, Path]]:
    """Skill directories shipped by plugins: entry points, then this repository's ``skills/``."""
    out: list[tuple[str, Path]] = []
    try:
        eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # pragma: no cover - broken metadata must not break the agent
        eps = []
    for ep in eps:
        try:
            obj = ep.load()
            obj = obj() if callable(obj) else obj
            paths = obj if isinstance(obj, (list, tuple)) else [obj]
            for p in paths:
                if hasattr(p, "__file__"):  # a module/package: its skills/ folder
                    p = Path(p.__file__).parent / "skills"
                out.append((f"plugin:{ep.name}", Path(p)))
        except Exception as exc:
            log.warning("skills entry point %s failed: %r", ep.name, exc)
    # the shipped example skills: inside the wheel, or the repository's skills/ (editable installs)
    packaged = Path(__file__).resolve().parent / "shipped"
    if packaged.is_dir():
        out.append(("plugin:clawkit", packaged))
        return out
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "skills").is_dir() and (parent / "plugins").is_dir():
            out.append(("plugin:clawkit", parent / "skills"))
            break
    return out


@dataclass
class FileState:
    path: Path
    source: str
    rank: int
    stamp: tuple[int, int] = (0, 0)  # (mtime_ns, size)
    digest: str = ""
    skill: CompiledSkill | None = None  # last good compiled version
    errors: list[ClawsError] = field(default_factory=list)  # of the current content


@dataclass
class SkillEntry:
    """A discovered skill: compiled form, where it came from, and whether it can run."""

    skill: CompiledSkill
    source: str
    path: Path
    stale: bool = False  # the file currently fails to compile; this is the last good version
    shadowed: list[str] = field(default_factory=list)


class SkillRegistry:
    """The skills visible from a set of source directories, kept current on disk changes."""

    def __init__(self, sources: Iterable[tuple[str, str | Path]], *, disabled: Iterable[str] = (), config: dict[str, Any] | None = None):
        self.sources: list[tuple[str, Path]] = [(label, Path(p).expanduser()) for label, p in sources]
        self.disabled = set(disabled)
        self.config = config or {}
        self.files: dict[Path, FileState] = {}
        self.skills: dict[str, SkillEntry] = {}
        self.version = 0  # bumped whenever the active set changes
        self.events: list[tuple[str, dict[str, Any]]] = []  # drained by the plugin into ctx.emit
        self.counters: dict[str, float] = {"compiled": 0, "compile_errors": 0, "reloads": 0, "compile_ms": 0.0}
        self.last_change: float = 0.0
        self._cache: dict[tuple[str, str], CompiledSkill] = {}
        self._lock = threading.RLock()
        self._events_lock = threading.Lock()
        self._gate_cache: dict[tuple[str, str, str], list[str]] = {}
        # what the last scan saw: directory -> mtime_ns (None: absent / not a directory),
        # discovered files that could not be stat'ed, and whether the snapshot is racy
        self._dirs: dict[str, int | None] | None = None
        self._missing_dirs: tuple[Any, list[str], AbsentPaths] | None = None
        self._unstatable: list[Path] = []
        self._racy = True
        self._watch_key: tuple | None = None
        # the inotify check (see .changes): the notifier every scanned folder is watched on
        # (None: stat instead), set when a watched folder saw an event since the last scan;
        # symlinked skill files, whose targets' edits no folder event reports, are stat'ed
        self._notifier: Any = None
        self._changed = True
        self._linked: list[Path] = []
        self._unwatched = False
        self._scan_notifier: Any = None  # the notifier of the scan under way
        self._absent_watched = False  # every source folder the last scan did not find is watched through a parent
        self._available: tuple[tuple, list[CompiledSkill]] | None = None  # (version, skills, PATH) -> available()

    # discovery -----------------------------------------------------------------------------

    def _discover(self) -> list[tuple[str, int, Path]]:
        """Every skill file under the sources (and, in ``self._dirs``, each visited directory's
        mtime, taken before it is listed so a later change always shows as a newer mtime)."""
        found: list[tuple[str, int, Path]] = []
        dirs: dict[str, int | None] = {}
        notify = changes.notifier()
        watch = self._watcher(notify) if notify is not None else None
        self._unwatched = False
        self._scan_notifier, self._absent_watched = notify, notify is not None
        self._linked = []
        for rank, (label, root) in enumerate(self.sources):
            self._walk(str(root), label, rank, found, dirs, watch)
        self._dirs = dirs
        self._notifier = None if notify is None or self._unwatched else notify
        return found

    def _watcher(self, notify: Any) -> Any:
        def watch(path: str) -> bool:
            return notify.watch(path, self)

        return watch

    def _walk(self, top: str, label: str, rank: int, found: list[tuple[str, int, Path]], dirs: dict[str, int | None],
              watch: Any = None) -> None:
        """``os.walk(top)`` order: a directory's files (sorted), then its sub-directories (sorted;
        hidden, ``__*`` and ``node_modules`` skipped; symlinked directories not followed).
        With ``watch``, each directory is watched before it is listed: a change made after
        its listing always leaves an event."""
        watched = watch(top) if watch is not None else False
        try:
            st = os.stat(top)
        except OSError:
            dirs.setdefault(top, None)
            if watch is not None:
                self._watch_absent(top, False)
            return
        if not stat_mod.S_ISDIR(st.st_mode):
            dirs.setdefault(top, None)
            if watch is not None:
                self._watch_absent(top, True)
            return
        if watch is not None and not watched:
            self._unwatched = True  # an existing folder without a watch: stat every turn
        dirs[top] = st.st_mtime_ns
        try:
            with os.scandir(top) as it:
                entries = list(it)
        except OSError:
            return
        subdirs: list[str] = []
        files: list[str] = []
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not e.name.startswith((".", "__")) and e.name != "node_modules" and not e.is_symlink():
                    subdirs.append(e.name)
            elif is_skill_file(e.name):
                files.append(e.name)
                if e.is_symlink():
                    self._linked.append(Path(top) / e.name)
        for fn in sorted(files):
            found.append((label, rank, Path(top) / fn))
        for d in sorted(subdirs):
            self._walk(os.path.join(top, d), label, rank, found, dirs, watch)

    def _watch_absent(self, path: str, present: bool) -> None:
        """With inotify, a source folder that is not there (or is not a folder: ``present``) is
        watched through its nearest existing parent for the entry that would bring it, and the
        per-turn check stats nothing for it. The watch is made before that entry is looked at
        again: one made in between is seen now (the next check rescans)."""
        notify = self._scan_notifier
        if notify is None:
            return
        child, parent = path, os.path.dirname(path)
        while parent != child:
            if notify.watch_entry(parent, os.path.basename(child), self):
                if os.path.isdir(path) if present else os.path.lexists(child):
                    self._changed = True  # appeared meanwhile
                return
            if os.path.isdir(parent):  # there, but no watch could be made: stat it every turn
                break
            child, parent = parent, os.path.dirname(parent)
        self._absent_watched = False

    def refresh(self) -> bool:
        """The per-turn check: :meth:`sync` only if something moved since the last scan.

        With inotify, a queued event on a scanned folder (see :meth:`_refresh_notified`).
        Otherwise by stat: a skill file added, removed or renamed changes its directory's
        mtime; an edit changes the file's own (mtime, size). Right after a change (timestamps within ``RACY_NS`` of
        the scan) the check is not trusted: every refresh rescans until things settle.
        True when the active set changed.
        """
        with self._lock:
            if self._dirs is None or self._racy:
                return self.sync()
            notify = self._notifier
            if notify is not None and notify is changes.notifier():
                return self._refresh_notified(notify)
            stat = os.stat
            for d, mtime in self._dirs.items():
                try:
                    st = stat(d)
                except OSError:
                    if mtime is not None:
                        return self.sync()
                    continue
                if mtime is None:
                    if stat_mod.S_ISDIR(st.st_mode):
                        return self.sync()
                elif st.st_mtime_ns != mtime:
                    return self.sync()
            for path, state in self.files.items():
                try:
                    st = stat(path)
                except OSError:
                    return self.sync()
                if (st.st_mtime_ns, st.st_size) != state.stamp:
                    return self.sync()
            for path in self._unstatable:
                if os.path.exists(path):
                    return self.sync()
            return False

    def _refresh_notified(self, notify: Any) -> bool:
        """:meth:`refresh` with every scanned folder watched: read the event queue; stat only
        what no watch covers (folders that did not exist, symlinked files, unreadable ones)."""
        notify.drain()
        if self._changed:
            return self.sync()
        if not self._absent_watched:  # (else every absent source folder is watched through a parent)
            missing = self._missing_dirs
            if missing is None or missing[0] is not self._dirs:  # the folders the last scan did not find
                gone = [d for d, mtime in self._dirs.items() if mtime is None]  # type: ignore[union-attr]
                missing = self._missing_dirs = (self._dirs, gone, AbsentPaths(gone))
            if missing[1]:
                absent = missing[2].absent()  # one stat per parent folder while those are unchanged
                if len(absent) != len(missing[1]) and any(os.path.isdir(d) for d in missing[1]):
                    return self.sync()
        for path in self._linked:
            state = self.files.get(path)
            try:
                st = os.stat(path)
            except OSError:
                return self.sync()
            if state is None or (st.st_mtime_ns, st.st_size) != state.stamp:
                return self.sync()
        for path in self._unstatable:
            if os.path.exists(path):
                return self.sync()
        return False

    def sync(self) -> bool:
        """Rescan the sources; recompile changed files. True when the active set changed."""
        with self._lock:
            notify = changes.notifier()
            if notify is not None:
                notify.drain()  # events so far are for the state this scan reads
            self._changed = False
            changed = False
            seen: set[Path] = set()
            unstatable: list[Path] = []
            scan_start = time.time_ns()
            for label, rank, path in self._discover():
                seen.add(path)
                try:
                    st = path.stat()
                except OSError:
                    unstatable.append(path)
                    continue
                stamp = (st.st_mtime_ns, st.st_size)
                state = self.files.get(path)
                if state is None:
                    state = self.files[path] = FileState(path, label, rank)
                elif state.stamp == stamp and state.rank == rank:
                    continue
                state.source, state.rank, state.stamp = label, rank, stamp
                changed |= self._load(state, new=state.digest == "")
            for path in [p for p in self.files if p not in seen]:
                state = self.files.pop(path)
                changed = True
                self._event("skills.removed", path=str(path), name=state.skill.name if state.skill else None)
            if changed:
                self._rebuild()
            recent = scan_start - RACY_NS
            self._unstatable = unstatable
            self._racy = any(m is not None and m >= recent for m in (self._dirs or {}).values()) or any(
                s.stamp[0] >= recent for s in self.files.values())
            return changed

    def _load(self, state: FileState, new: bool) -> bool:
        try:
            data = state.path.read_bytes()
        except OSError as exc:
            state.errors = [ClawsError(str(state.path), 1, "", f"cannot read: {exc.strerror or exc}")]
            return False
        digest = content_hash(data)
        if digest == state.digest and not state.errors:
            return False
        state.digest = digest
        key = (str(state.path), digest)
        t0 = time.perf_counter()
        try:
            skill = self._cache.get(key)
            if skill is None:
                skill = compile_file(state.path, data)
                self._cache[key] = skill
                self.counters["compiled"] += 1
                self.counters["compile_ms"] += (time.perf_counter() - t0) * 1e3
        except SkillCompileError as exc:
            state.errors = list(exc.errors)
            self.counters["compile_errors"] += 1
            first = exc.errors[0]
            kept = state.skill.name if state.skill else None
            log.warning("skill %s failed to compile%s: %s", state.path, f" (keeping the last good version of {kept})" if kept else "", exc)
            self._event("skills.error", file=first.file, line=first.line, block=first.block, message=first.message,
                        errors=[e.format() for e in exc.errors], kept=kept)
            return kept is not None  # the entry turns stale
        state.errors = []
        state.skill = replace(skill, source=state.source)
        if not new:
            self.counters["reloads"] += 1
        log.info("skill %s %s from %s", skill.name, "loaded" if new else "reloaded", state.path)
        self._event("skills.added" if new else "skills.reloaded", name=skill.name, path=str(state.path), source=state.source)
        return True

    def _rebuild(self) -> None:
        best: dict[str, SkillEntry] = {}
        for state in sorted(self.files.values(), key=lambda s: (s.rank, str(s.path))):
            sk = state.skill
            if sk is None or sk.name in self.disabled:
                continue
            if sk.name in best:
                best[sk.name].shadowed.append(f"{state.source}:{state.path}")
                continue
            best[sk.name] = SkillEntry(sk, state.source, state.path, stale=bool(state.errors))
        self.skills = best
        self.version += 1
        self.last_change = time.perf_counter()

    def _event(self, type: str, **data: Any) -> None:
        with self._events_lock:
            self.events.append((type, data))
            del self.events[:-200]  # never grow without bound in a long-running process

    def drain_events(self) -> list[tuple[str, dict[str, Any]]]:
        with self._events_lock:
            out, self.events = self.events, []
        return out

    # queries -------------------------------------------------------------------------------

    def get(self, name: str) -> CompiledSkill | None:
        entry = self.skills.get(name)
        return entry.skill if entry else None

    def unavailable_reason(self, name: str) -> list[str]:
        entry = self.skills.get(name)
        if entry is None:
            return ["no such skill"]
        sk = entry.skill
        if not sk.requires:
            return []
        key = (sk.name, sk.content_hash, os.environ.get("PATH", ""))
        if key not in self._gate_cache:
            self._gate_cache[key] = missing_requirements(sk, self.config)
        return self._gate_cache[key]

    def available(self) -> list[CompiledSkill]:
        """Skills whose requirements are met, sorted by name (a new list each call)."""
        return list(self.available_view())

    def available_view(self) -> list[CompiledSkill]:
        """:meth:`available` without the copy: the same list object while the answer is the same
        (never change it)."""
        key = (self.version, id(self.skills), os.environ.get("PATH", ""))
        cached = self._available
        if cached is None or cached[0] != key:
            cached = self._available = (key, [e.skill for n, e in sorted(self.skills.items()) if not self.unavailable_reason(n)])
        return cached[1]

    def errors(self) -> list[ClawsError]:
        return [e for s in sorted(self.files.values(), key=lambda s: str(s.path)) for e in s.errors]

    # watching ---------------------------------------------------------------------------

    def watched_dirs(self) -> tuple[Path, ...]:
        return tuple(p for _, p in self.sources if p.is_dir())

    def start_watching(self, step_ms: int = 50) -> None:
        """Have the shared watcher thread keep this registry current (idempotent; call again
        when source directories may have appeared, it re-watches only if the set changed)."""
        dirs, thread, last = self._dirs, WATCHER.thread, self._watch_key
        if last is not None and dirs is not None and last[0] is dirs and last[2] is thread and last[3] == step_ms \
                and thread is not None and thread.is_alive():
            return  # no scan since the last call (the usual turn), and the thread still runs
        present = None if dirs is None else tuple(str(p) for _, p in self.sources if dirs.get(str(p)) is not None)
        if present is not None and last is not None and last[1:] == (present, thread, step_ms) \
                and thread is not None and thread.is_alive():
            self._watch_key = (dirs, present, thread, step_ms)
            return  # nothing appeared or vanished since the last call, and the thread still runs
        WATCHER.add(self, step_ms)
        self._watch_key = (dirs, present, WATCHER.thread, step_ms)

    def stop_watching(self) -> None:
        self._watch_key = None
        WATCHER.discard(self)

    @property
    def watching(self) -> bool:
        return WATCHER.watches(self)


class SharedWatcher:
    """One watchfiles thread for every live registry in the process.

    Registries are held weakly; the thread watches the union of their existing source
    directories and re-syncs each registry whose directories saw a change. A process
    running many agents (a gateway, a test session) uses one OS watch, not one per agent.
    """

    def __init__(self) -> None:
        self.registries: "weakref.WeakSet[SkillRegistry]" = weakref.WeakSet()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.stop: threading.Event | None = None
        self.dirs: tuple[Path, ...] = ()
        self.step_ms = 50

    def add(self, reg: "SkillRegistry", step_ms: int = 50) -> None:
        with self.lock:
            self.registries.add(reg)
            self.step_ms = min(self.step_ms, step_ms)
            self._ensure()

    def discard(self, reg: "SkillRegistry") -> None:
        with self.lock:
            self.registries.discard(reg)
            self._ensure()

    def watches(self, reg: "SkillRegistry") -> bool:
        alive = self.thread is not None and self.thread.is_alive()
        return alive and reg in self.registries and any(d in self.dirs for d in reg.watched_dirs())

    def _ensure(self) -> None:
        dirs = tuple(sorted({d for r in list(self.registries) for d in r.watched_dirs()}))
        if self.thread is not None and self.thread.is_alive() and dirs == self.dirs:
            return
        if self.stop is not None:
            self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=2.0)
        self.thread, self.stop, self.dirs = None, None, dirs
        if not dirs:
            return
        stop = self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(dirs, stop, self.step_ms), name="clawkit-skills-watch", daemon=True)
        self.thread.start()

    def _run(self, dirs: tuple[Path, ...], stop: threading.Event, step_ms: int) -> None:
        from watchfiles import watch

        def only_skills(change: Any, path: str) -> bool:
            return is_skill_file(path) or os.path.isdir(path) or not os.path.exists(path)

        try:
            for changes in watch(*dirs, watch_filter=only_skills, stop_event=stop, step=step_ms,
                                 debounce=1000, rust_timeout=500, yield_on_timeout=False, raise_interrupt=False):
                paths = [Path(p) for _, p in changes]
                for reg in list(self.registries):
                    roots = reg.watched_dirs()
                    if any(root == p or root in p.parents for p in paths for root in roots):
                        try:
                            reg.sync()
                        except Exception as exc:  # a reload problem must never kill the watcher
                            log.warning("skills reload failed: %r", exc)
        except Exception as exc:
            log.warning("skills watcher stopped: %r", exc)


    def close(self) -> None:
        """Stop and join the thread (interpreter exit: no thread may be inside watchfiles'
        native code while the runtime is torn down)."""
        with self.lock:
            self.registries = weakref.WeakSet()
            self._ensure()


WATCHER = SharedWatcher()
atexit.register(WATCHER.close)
