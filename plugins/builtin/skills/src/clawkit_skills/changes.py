"""The per-turn "did any skill folder change?" check, in one system call.

Every registry's scanned folders are watched on one process-wide inotify descriptor
(Linux; ``inotify_simple``). The kernel queues an event the moment a file in a watched
folder is created, written, renamed, deleted or touched, so a check at the start of a
turn sees every change made before it — unlike the watchfiles thread, which reports
after its ~50 ms step. Reading an empty queue is one ``ioctl``: a turn that finds no
event skips the stat of every folder and file the last scan saw.

Where inotify is unavailable (another OS, no descriptors or watches left), :func:`notifier`
returns None and the registry stats instead, as before.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any

log = logging.getLogger("clawkit.skills")
_NOTHING = bytes(4)  # FIONREAD's answer for an empty queue (an int of 0 bytes to read)


class FolderNotifier:
    """One inotify descriptor; each watch descriptor maps to the registries watching it."""

    def __init__(self) -> None:
        from inotify_simple import INotify, flags

        import fcntl
        import termios

        self.inotify = INotify(nonblocking=True)
        self._queued = (fcntl.ioctl, self.inotify.fileno(), termios.FIONREAD)  # how many bytes wait to be read
        self.mask = (flags.CREATE | flags.DELETE | flags.MODIFY | flags.CLOSE_WRITE | flags.MOVED_FROM | flags.MOVED_TO
                     | flags.ATTRIB | flags.DELETE_SELF | flags.MOVE_SELF)
        # a folder that does not exist is watched through its nearest existing parent, for the
        # one entry name that would bring it (``watch_entry``): creating, moving or deleting that
        # entry, or the parent going away, marks its registries
        self.entry_mask = flags.MASK_ADD | flags.CREATE | flags.MOVED_TO | flags.MOVED_FROM | flags.DELETE \
            | flags.DELETE_SELF | flags.MOVE_SELF | flags.ONLYDIR
        self.watchers: dict[int, "weakref.WeakSet[Any]"] = {}
        self.entries: dict[int, dict[str, "weakref.WeakSet[Any]"]] = {}  # wd -> entry name -> registries
        self.everyone: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def watch(self, path: str, registry: Any) -> bool:
        """Watch folder ``path`` for ``registry``; False when it cannot be watched."""
        try:
            wd = self.inotify.add_watch(path, self.mask)
        except OSError:
            return False
        with self.lock:
            self.watchers.setdefault(wd, weakref.WeakSet()).add(registry)
            self.everyone.add(registry)
        return True

    def watch_entry(self, folder: str, name: str, registry: Any) -> bool:
        """Watch ``folder`` for entry ``name`` appearing, going or being replaced (and ``folder``
        itself going) for ``registry``: what a stat of the folder's mtime would tell. The mask is
        added to a watch the folder may already have (never narrowing it). False when it cannot be
        watched."""
        try:
            wd = self.inotify.add_watch(folder, self.entry_mask)
        except OSError:
            return False
        with self.lock:
            self.entries.setdefault(wd, {}).setdefault(name, weakref.WeakSet()).add(registry)
            self.everyone.add(registry)
        return True

    def drain(self) -> None:
        """Read every queued event; each marks the registries watching its folder as changed."""
        ioctl, fd, fionread = self._queued
        try:  # the usual turn: nothing queued — one ioctl, no lock, no parse
            if ioctl(fd, fionread, _NOTHING) == _NOTHING:
                return
        except OSError:
            pass  # the read below reports it
        with self.lock:
            try:
                events = self.inotify.read(timeout=0)
            except OSError as exc:  # pragma: no cover - a broken descriptor: everyone rescans
                log.debug("skills inotify read failed: %r", exc)
                events = [None]
            for ev in events:
                if ev is None or ev.wd == -1:  # a queue overflow: events were lost
                    for reg in list(self.everyone):
                        reg._changed = True
                    continue
                for reg in list(self.watchers.get(ev.wd, ())):
                    reg._changed = True
                entries = self.entries.get(ev.wd)
                if entries:
                    if ev.mask & 0xC00 or ev.mask & 0x8000:  # the folder itself moved or went: everyone watching it
                        for regs in entries.values():
                            for reg in list(regs):
                                reg._changed = True
                    else:
                        for reg in list(entries.get(ev.name, ())):
                            reg._changed = True
                if ev.mask & 0x8000:  # IN_IGNORED: the watch is gone (its folder was deleted)
                    self.watchers.pop(ev.wd, None)
                    self.entries.pop(ev.wd, None)


_notifier: FolderNotifier | None = None
_unavailable = False
_init_lock = threading.Lock()


def notifier() -> FolderNotifier | None:
    """This process's notifier (a forked child gets its own), or None without inotify."""
    global _notifier, _unavailable
    n = _notifier
    if n is not None and n.pid == os.getpid():
        return n
    if _unavailable:
        return None
    with _init_lock:
        if _notifier is None or _notifier.pid != os.getpid():
            try:
                _notifier = FolderNotifier()
            except Exception as exc:  # no inotify here (or no descriptors left): stat instead
                log.debug("skills: no inotify (%r); changes are found by stat", exc)
                _unavailable = True
                return None
        return _notifier
