"""Noticing that files which do not exist have appeared, with one ``stat`` per parent folder.

Plugins look every turn for optional files (``README.md``, ``MEMORY.md``, a ``skills/``
folder…). Most of them are missing, and a ``stat`` per missing path per turn adds up.
A path can only appear by creating an entry in its nearest existing ancestor folder,
which moves that folder's mtime (and a folder replaced by another changes its inode).
So :class:`AbsentPaths` remembers those ancestors' stamps and, while none moved, answers
"still absent" without looking at the paths themselves.

Timestamps are coarse (a kernel tick): a stamp within ``RACY_NS`` of when it was taken is
not trusted, and every check looks at the paths again until things settle, as the skills
registry does for its own files.
"""

from __future__ import annotations

import os
import time

RACY_NS = 2_000_000_000  # a folder changed this recently may change again behind an equal mtime


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ino)


def _nearest_existing(path: str) -> str:
    parent = os.path.dirname(path) or "."
    while not os.path.isdir(parent):
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    return parent


class AbsentPaths:
    """``absent()``: the paths (strings) that do not exist, found cheaply while their parent
    folders are unchanged. Not thread-safe: one per owner, called from its own thread."""

    def __init__(self, paths: list[str] | tuple[str, ...]):
        self.paths = tuple(os.path.abspath(p) for p in paths)
        self._missing: tuple[str, ...] = ()
        self._parents: tuple[tuple[str, tuple[int, int] | None], ...] | None = None

    def absent(self) -> tuple[str, ...]:
        """The paths that do not exist now (a path that exists is not in the answer)."""
        parents = self._parents
        if parents is not None:
            for folder, stamp in parents:
                if _stamp(folder) != stamp:
                    break
            else:
                return self._missing
        return self._scan()

    def _scan(self) -> tuple[str, ...]:
        missing = tuple(p for p in self.paths if not os.path.exists(p))
        now = time.time_ns()
        parents: dict[str, tuple[int, int] | None] = {}
        # a dangling symlink can come alive without its folder changing: never trusted
        racy = any(os.path.lexists(p) for p in missing)
        for p in missing:
            folder = _nearest_existing(p)
            if folder not in parents:
                stamp = parents[folder] = _stamp(folder)
                racy = racy or stamp is None or now - stamp[0] < RACY_NS
        self._missing = missing
        # existing paths are the caller's to watch (their own stat, inotify): only absence is cached
        self._parents = None if racy else tuple(parents.items())
        return missing
