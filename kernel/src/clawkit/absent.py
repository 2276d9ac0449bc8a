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
    folders are unchanged (a path that appears or vanishes moves its folder's mtime). Not
    thread-safe: one per owner, called from its own thread."""

    def __init__(self, paths: list[str] | tuple[str, ...]):
        self.paths = tuple(os.path.abspath(p) for p in paths)
        self._missing: tuple[str, ...] = ()
        self._trusted: tuple[tuple[str, tuple[int, int]], ...] | None = None  # None: never scanned
        # paths under a folder changed too recently, and symlinks (their target can change without
        # their folder): looked at on every check, with whether they existed at the last scan
        self._direct: tuple[tuple[str, bool], ...] = ()
        self._retry_at = 0  # time.time_ns() when those folders' stamps can be trusted (then scan again)

    def absent(self) -> tuple[str, ...]:
        """The paths that do not exist now."""
        if self._trusted is None:
            return self._scan()
        for folder, stamp in self._trusted:
            if _stamp(folder) != stamp:
                return self._scan()
        if self._direct:
            if time.time_ns() >= self._retry_at:
                return self._scan()
            for p, existed in self._direct:
                if os.path.exists(p) is not existed:
                    return self._scan()
        return self._missing

    def _scan(self) -> tuple[str, ...]:
        now = time.time_ns()
        missing: list[str] = []
        stamps: dict[str, tuple[int, int] | None] = {}
        direct: list[tuple[str, bool]] = []
        retry_at = now + RACY_NS
        for p in self.paths:
            exists = os.path.exists(p)
            if not exists:
                missing.append(p)
            if os.path.islink(p):  # a symlink's target can come and go without its folder changing
                direct.append((p, exists))
                continue
            folder = os.path.dirname(p) if exists else _nearest_existing(p)
            stamp = stamps[folder] = stamps[folder] if folder in stamps else _stamp(folder)
            if stamp is None or now - stamp[0] < RACY_NS:
                direct.append((p, exists))
                retry_at = min(retry_at, stamp[0] + RACY_NS) if stamp is not None else now
        self._missing = tuple(missing)
        self._trusted = tuple((f, st) for f, st in stamps.items() if st is not None and now - st[0] >= RACY_NS)
        self._direct = tuple(direct)
        self._retry_at = retry_at
        return self._missing
