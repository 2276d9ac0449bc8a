"""One process per session at a time: exclusive session locks between processes, next to the database.

On Linux every session is one byte of one shared file (``locks/sessions.lock``), locked with an
open-file-description lock (``F_OFD_SETLK``): two syscalls per turn, no file created per session
and none left behind, released by the kernel when the process dies. A lock belongs to the open
file, so two stores in one process exclude each other like two processes do. Elsewhere (no OFD
locks) each session has its own file locked with ``flock``.

The lock is taken before a session is read and released when its turn ends; within one store it is
re-entrant (a count).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import struct
import threading
from pathlib import Path

#: ``struct flock`` (native layout): l_type, l_whence, l_start, l_len, l_pid
_FLOCK = struct.Struct("hhqqi4x")
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", None)
_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def _offset(session_id: str) -> int:
    """The session's byte in the shared file: 62 bits of a hash (a valid offset; collisions negligible)."""
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


class SessionLocks:
    """The session locks of one store (``folder`` is created on first use)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._held: dict[str, list] = {}  # session id -> [offset or per-session fd, count]
        self._mutex = threading.Lock()  # the store's writer releases a session after its commit
        self._fd: int | None = None  # the shared file (OFD locks)
        #: the pid holding the session a refused :meth:`acquire` asked for, when known
        self.holder: str | None = None

    def _shared(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.folder / "sessions.lock", _FLAGS, 0o600)
            except FileNotFoundError:
                self.folder.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.folder / "sessions.lock", _FLAGS, 0o600)
        return self._fd

    def acquire(self, session_id: str) -> bool:
        """Take the session, or return False when another process (or another store) holds it."""
        with self._mutex:
            return self._acquire(session_id)

    def _acquire(self, session_id: str) -> bool:
        held = self._held.get(session_id)
        if held is not None:
            held[1] += 1
            return True
        if _OFD_SETLK is not None:
            offset = _offset(session_id)
            try:
                fcntl.fcntl(self._shared(), _OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0))
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                self.holder = None  # an OFD lock has no owning process to name
                return False
            self._held[session_id] = [offset, 1]
            return True
        return self._acquire_file(session_id)

    def _acquire_file(self, session_id: str) -> bool:
        name = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".lock"
        try:
            fd = os.open(self.folder / name, _FLAGS, 0o600)
        except FileNotFoundError:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / name, _FLAGS, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                self.holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or None
            finally:
                os.close(fd)
            return False
        # the holder's pid padded in place: ext4 flushes a file truncated to zero and rewritten
        os.pwrite(fd, f"{os.getpid():<20}".encode(), 0)
        self._held[session_id] = [("fd", fd), 1]
        return True

    def release(self, session_id: str) -> None:
        """Give the session back (the last of re-entrant acquisitions releases it)."""
        with self._mutex:
            self._release(session_id)

    def _release(self, session_id: str) -> None:
        held = self._held.get(session_id)
        if held is None:
            return
        held[1] -= 1
        if held[1] > 0:
            return
        del self._held[session_id]
        if isinstance(held[0], tuple):
            try:
                fcntl.flock(held[0][1], fcntl.LOCK_UN)
            finally:
                os.close(held[0][1])
        else:
            fcntl.fcntl(self._shared(), _OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, held[0], 1, 0))

    def held(self) -> list[str]:
        return list(self._held)

    def close(self) -> None:
        """Release every lock and the shared file."""
        with self._mutex:
            for sid in list(self._held):
                self._held[sid][1] = 1
                self._release(sid)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
