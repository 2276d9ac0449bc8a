"""Workspace sections: ``.agents/prompts/*.md`` with YAML frontmatter, reloaded by watchfiles.

A file looks like::

    ---
    id: security-review
    tags: [domain:security]
    priority: 40
    ---
    Treat every input as hostile until validated.

``id`` defaults to the file's stem; ``heading`` and ``max_chars`` are optional.
A malformed file is reported (path and line) and skipped; the others still load.
A background thread watches the directory with ``watchfiles`` and swaps in a new
snapshot after every batch of changes, so prompt builds never touch the disk.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import watchfiles
from pydantic import ValidationError

from clawkit.absent import AbsentPaths
from clawkit.config import ConfigError, format_validation_error, parse_yaml
from clawkit.prompt import StaticContributor

from .settings import RECHECK_S, ContributorSpec

log = logging.getLogger("clawkit.contributors")


@dataclass(frozen=True)
class PromptFileError:
    """A workspace section that could not be loaded."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line or '?'}: {self.message}"


def _split_frontmatter(text: str) -> tuple[str | None, str, int]:
    """``(frontmatter or None, body, line where the body starts)``; raises ValueError when unterminated."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text, 1
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1 :]), i + 2
    raise ValueError("frontmatter opened with '---' on line 1 is never closed")


def parse_prompt_file(path: Path, text: str) -> StaticContributor:
    """Parse one workspace section; raises :class:`ConfigError` naming ``path:line``."""
    where = str(path)
    try:
        front, body, body_line = _split_frontmatter(text)
    except ValueError as exc:
        raise ConfigError(f"{where}:1: {exc}") from None
    data: dict = {}
    lines: dict = {}
    if front is not None and front.strip():
        # one leading newline so YAML line numbers are the file's (line 1 is '---')
        try:
            data, lines = parse_yaml("\n" + front, where)
        except ConfigError as exc:
            # an error found at the end of the YAML belongs to its last line, not to the closing '---'
            err = _error_from(path, exc)
            last = max(2, body_line - 2)
            raise ConfigError(f"{where}:{min(err.line or last, last)}: {err.message}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{where}:2: frontmatter must be a mapping (id, tags, priority…)")
    if "content" in data:
        raise ConfigError(f"{where}:{lines.get(('content',), 2)}: content: the section text is the file's body, not a frontmatter key")
    data = {"id": path.stem, **data, "content": body.strip()}
    try:
        spec = ContributorSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where, lines)) from None
    return StaticContributor(spec.id, spec.content, heading=spec.heading, tags=spec.tags, priority=spec.priority, max_chars=spec.max_chars)


def _error_from(path: Path, exc: Exception) -> PromptFileError:
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    line = None
    prefix = f"{path}:"
    if msg.startswith(prefix):
        head, _, rest = msg[len(prefix) :].partition(":")
        line = int(head) if head.isdigit() else None
        msg = rest.strip()
    return PromptFileError(str(path), line, msg)


class WorkspacePrompts:
    """The sections of one prompts directory, kept current by a watchfiles thread.

    ``contributors`` and ``errors`` are immutable snapshots; ``generation`` counts
    reloads (``wait_for_generation`` lets callers wait for the watcher).
    """

    def __init__(self, directory: Path, *, watch: bool = True):
        self.directory = Path(directory)
        self._dir_str = str(self.directory)
        self._absent = AbsentPaths([self._dir_str])
        self.watch = watch
        self.contributors: tuple[StaticContributor, ...] = ()
        self.errors: tuple[PromptFileError, ...] = ()
        self.generation = 0
        self._parsed: dict[Path, tuple[tuple[int, int], StaticContributor | PromptFileError]] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._existed = False
        self._recheck_at = 0.0  # time.monotonic() from which refresh() looks at the directory again
        self.refresh()

    # --- loading ------------------------------------------------------------------------

    def reload(self) -> None:
        """Re-scan the directory; unchanged files (same mtime and size) are not re-parsed."""
        found: dict[Path, tuple[tuple[int, int], StaticContributor | PromptFileError]] = {}
        try:
            paths = sorted(p for p in self.directory.glob("*.md") if p.is_file())
        except OSError:
            paths = []
        for path in paths:
            try:
                st = path.stat()
            except OSError:
                continue  # deleted between listing and stat
            key = (st.st_mtime_ns, st.st_size)
            old = self._parsed.get(path)
            if old is not None and old[0] == key:
                found[path] = old
                continue
            try:
                item: StaticContributor | PromptFileError = parse_prompt_file(path, path.read_text(encoding="utf-8"))
            except (ConfigError, OSError, UnicodeDecodeError, ValueError) as exc:
                item = _error_from(path, exc)
                log.warning("workspace prompt skipped: %s", item)
            found[path] = (key, item)
        contributors: list[StaticContributor] = []
        errors: list[PromptFileError] = []
        first_of: dict[str, Path] = {}
        for path, (_, item) in found.items():
            if isinstance(item, PromptFileError):
                errors.append(item)
            elif item.id in first_of:
                err = PromptFileError(str(path), 1, f"id {item.id!r} is already used by {first_of[item.id].name}")
                log.warning("workspace prompt skipped: %s", err)
                errors.append(err)
            else:
                first_of[item.id] = path
                contributors.append(item)
        with self._cond:
            self._parsed = found
            self.contributors, self.errors = tuple(contributors), tuple(errors)
            self.generation += 1
            self._cond.notify_all()

    def refresh(self) -> None:
        """Cheap check at prompt build: only notices the directory appearing or vanishing (at most one
        look per :data:`RECHECK_S`: concurrent turns share it)."""
        now = time.monotonic()
        if now < self._recheck_at:
            return
        self._recheck_at = now + RECHECK_S
        # absent: one stat of its parent while that is unchanged; present: is it still there
        exists = False if not self._existed and self._absent.absent() else os.path.isdir(self._dir_str)
        if exists and not self._existed:
            self._existed = True
            self.reload()
            if self.watch:
                self._start()
        elif not exists and self._existed:
            self._existed = False
            self.reload()

    # --- watching -----------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"clawkit-prompts:{self.directory.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for _changes in watchfiles.watch(
                self.directory, stop_event=self._stop, debounce=400, step=30, raise_interrupt=False,
                watch_filter=lambda change, path: path.endswith(".md"),
            ):
                self.reload()
        except Exception as exc:  # the directory vanished, inotify limits…: fall back to refresh()
            log.warning("stopped watching %s: %s", self.directory, exc)
        finally:
            self._existed = self._existed and not self._stop.is_set() and self.directory.is_dir()

    def wait_for_generation(self, generation: int, timeout: float = 5.0) -> bool:
        """Block until ``self.generation >= generation`` (tests, tools); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self.generation >= generation, timeout)

    def close(self) -> None:
        """Stop the watcher thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None


_registry: dict[tuple[Path, bool], WorkspacePrompts] = {}
_registry_lock = threading.Lock()
# (prompts_dir, workspace, watch) as configured -> (working directory a relative path was
# resolved against, or None, and the registry entry)
_by_config: dict[tuple, tuple[str | None, WorkspacePrompts]] = {}


def prompts_for_cached(key: tuple, *, refresh: bool = True) -> WorkspacePrompts | None:
    """The entry :func:`prompts_for` returned for config ``key`` (refreshed unless ``refresh`` is
    False), or None."""
    hit = _by_config.get(key)
    if hit is None or (hit[0] is not None and hit[0] != os.getcwd()):
        return None
    wp = hit[1]
    if refresh:
        wp.refresh()
    return wp


def prompts_for(directory: Path, watch: bool = True, *, cache_key: tuple | None = None) -> WorkspacePrompts:
    """The shared :class:`WorkspacePrompts` of ``directory`` (one watcher per directory per process).

    ``cache_key`` (``(prompts_dir, workspace, watch)`` as configured) remembers the entry for
    :func:`prompts_for_cached`.
    """
    key = (Path(os.path.abspath(directory)), watch)
    with _registry_lock:
        wp = _registry.get(key)
        created = wp is None
        if created:
            wp = _registry[key] = WorkspacePrompts(key[0], watch=watch)
        if cache_key is not None:
            if len(_by_config) > 256:
                _by_config.clear()
            relative = not (os.path.isabs(cache_key[0]) or os.path.isabs(cache_key[1]))
            _by_config[cache_key] = (os.getcwd() if relative else None, wp)
    if not created:
        wp.refresh()
    return wp


def close_all() -> None:
    """Stop every watcher (tests, shutdown)."""
    with _registry_lock:
        items = list(_registry.values())
        _registry.clear()
        _by_config.clear()
    for wp in items:
        wp.close()


atexit.register(close_all)
