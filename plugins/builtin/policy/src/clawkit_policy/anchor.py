"""The audit ledger's key and anchors: kept outside the workspace, where the agent cannot write.

* The **key** (32 random bytes) makes every record's hash an HMAC: someone who can
  write the database but not read the key cannot forge a chain that verifies. It is
  created on first use, readable only by the user (mode 0600).
* An **anchor** per database file records the ledger's latest length and head MAC.
  Each append updates it, so deleting the database, emptying it, dropping the
  table or cutting records off the end no longer looks like "no records yet".

Both live in the audit home: ``$CLAWKIT_AUDIT_HOME`` if set (tests), else
``$XDG_CONFIG_HOME/clawkit/audit`` (``~/.config/clawkit/audit``). Keep that
directory out of every workspace an agent can write; the tools refuse to write it
when it is inside one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any

KEY_BYTES = 32


class AuditKeyError(RuntimeError):
    """The audit key cannot be read or created (the ledger fails closed)."""


def audit_home() -> Path:
    env = os.environ.get("CLAWKIT_AUDIT_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "clawkit" / "audit"


def key_path() -> Path:
    return audit_home() / "key"


_keys: dict[str, bytes] = {}


def load_key(create: bool = True) -> bytes | None:
    """The audit key; created (0600, in a 0700 directory) on first use when ``create``."""
    path = key_path()
    cached = _keys.get(str(path))
    if cached is not None:
        return cached
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if not create:
            return None
        data = _create_key(path)
    except OSError as exc:
        raise AuditKeyError(f"cannot read the audit key {path}: {exc.strerror or exc}") from None
    if len(data) < 16:
        raise AuditKeyError(f"the audit key {path} is damaged ({len(data)} bytes)")
    _keys[str(path)] = data
    return data


def _create_key(path: Path) -> bytes:
    """Write a new key to a file of this process and thread, then link it in as ``path``: the key
    appears whole or not at all. (Created in place, another process or thread could read it empty
    between the create and the write — "damaged (0 bytes)" when two start at once.) When another
    one links its key first, that key is the key."""
    tmp = path.with_name(f".key-{os.getpid()}-{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:  # another process or thread linked its key first
            pass
        return path.read_bytes()
    except OSError as exc:
        raise AuditKeyError(f"cannot create the audit key {path}: {exc.strerror or exc}") from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def forget_keys() -> None:
    """Drop cached keys (tests that switch ``CLAWKIT_AUDIT_HOME``)."""
    _keys.clear()


def db_file(conn: sqlite3.Connection) -> str | None:
    """The file behind ``conn``'s main database, or None for an in-memory one; for PostgreSQL, the
    database's URL without its password (the anchor then lives on each machine that writes)."""
    url = getattr(conn, "url", None)
    if getattr(conn, "dialect", "sqlite") == "postgresql" and url:
        from clawkit.storage import redact_url

        return redact_url(url).replace(":***@", "@")
    try:
        for _, name, file in conn.execute("PRAGMA database_list"):
            if name == "main":
                return os.path.realpath(file) if file else None
    except sqlite3.Error:
        return None
    return None


def _name(db: str) -> str:
    """How an anchor names its database: a file's real path, or a PostgreSQL URL as given."""
    return db if db.startswith("postgresql://") else _realpath(db)


@lru_cache(maxsize=64)
def _realpath(db: str) -> str:
    # a database's real path is fixed while it is open; resolving it costs a syscall per path component
    return os.path.realpath(db)


def anchor_path(db: str) -> Path:
    return Path(_paths(db)[0])


def _paths(db: str) -> tuple[str, str]:
    """(anchor file, its lock file) of ``db``, in the audit home as the environment names it now."""
    env = os.environ
    return _paths_in(env.get("CLAWKIT_AUDIT_HOME"), env.get("XDG_CONFIG_HOME"), env.get("HOME"), db)


@lru_cache(maxsize=64)
def _paths_in(home: str | None, xdg: str | None, user: str | None, db: str) -> tuple[str, str]:
    digest = hashlib.sha256(_name(db).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    path = audit_home() / "anchors" / f"{digest}.json"
    return str(path), str(path.with_suffix(".lock"))


def _mac(key: bytes, db: str, seq: int, head: str) -> str:
    return hmac.new(key, f"anchor\n{db}\n{seq}\n{head}".encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def write_anchor(key: bytes, db: str, seq: int, head: str) -> None:
    """Atomically record that ``db``'s ledger has ``seq`` records ending in ``head`` (a new file, renamed in)."""
    path = anchor_path(db)
    # a name of this process and thread: writers elsewhere hold other names (rename is the atomic step)
    tmp = f"{path.parent}{os.sep}.anchor.{os.getpid()}.{threading.get_ident()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileNotFoundError:  # the first anchor of this audit home
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, flags, 0o600)
    try:
        try:
            os.write(fd, _body(key, db, seq, head))
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _body(key: bytes, db: str, seq: int, head: str) -> bytes:
    return json.dumps({"db": db, "seq": seq, "head": head, "mac": _mac(key, db, seq, head)}).encode()


def _parse(key: bytes | None, db: str, raw: bytes, path: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
        seq, head = int(data["seq"]), str(data["head"])
    except (ValueError, KeyError, TypeError):
        return {"seq": 0, "head": "", "valid": False, "path": path}
    valid = key is not None and hmac.compare_digest(str(data.get("mac", "")), _mac(key, _name(db), seq, head))
    return {"seq": seq, "head": head, "valid": valid, "path": path}


def _lock_file(db: str) -> int:
    path = _paths(db)[1]
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o600)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        return os.open(path, flags, 0o600)


def check_writable(db: str) -> None:
    """Raise (OSError) when ``db``'s anchor cannot be written: checked when a writer opens the ledger,
    so a broken audit home fails this write (the result is withheld) rather than a later sync."""
    os.close(_lock_file(db))


#: anchor files this process advances in place: path -> (fd, inode), the last few kept open
_kept: "OrderedDict[str, tuple[int, int]]" = OrderedDict()
KEEP_OPEN = 8
_kept_lock = threading.Lock()
SECTOR = 512  # an anchor is rewritten in place as one write at offset 0, padded to whole sectors


def advance_anchor(key: bytes, db: str, seq: int, head: str) -> None:
    """Move ``db``'s anchor forward to ``seq``/``head``, never back: another process writing the same
    database may already have anchored a later record (the check and the write hold a lock file).

    The file is rewritten in place (one ``pwrite`` of a sector-padded body): a new file renamed over
    the old one cost ~0.4 ms of CPU in inode and journal work, once per group commit. A reader that
    catches a write half done reads again under the lock (see :func:`read_anchor`).
    """
    import fcntl

    lock = _lock_file(db)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with _kept_lock:  # a kept descriptor is not closed (evicted) by another thread while in use
            _advance(key, db, seq, head)
    finally:
        os.close(lock)  # releases the lock


def _advance(key: bytes, db: str, seq: int, head: str) -> None:
    path = _paths(db)[0]
    fd = _anchor_fd(path)
    if fd is None:  # the first anchor of this database (or it was deleted): a whole new file
        write_anchor(key, db, seq, head)
        return
    raw = os.pread(fd, 1 << 16, 0)
    current = _parse(key, db, raw, path)
    if current["valid"] and current["seq"] >= seq:
        return
    body = _body(key, db, seq, head)
    size = max(len(raw), -(-(len(body) + 1) // SECTOR) * SECTOR)  # covers what was there before
    os.pwrite(fd, body.ljust(size), 0)


def _anchor_fd(path: str) -> int | None:
    """A descriptor of the anchor file now at ``path`` (kept open; reopened when the file was replaced)."""
    try:
        ino = os.stat(path).st_ino
    except FileNotFoundError:
        return None
    kept = _kept.get(path)
    if kept is not None:
        if kept[1] == ino:
            _kept.move_to_end(path)
            return kept[0]
        os.close(_kept.pop(path)[0])
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    _kept[path] = (fd, os.fstat(fd).st_ino)
    while len(_kept) > KEEP_OPEN:
        os.close(_kept.popitem(last=False)[1][0])
    return fd


def read_anchor(key: bytes | None, db: str) -> dict[str, Any] | None:
    """``{"seq", "head", "valid"}`` for ``db``, or None when it never had an anchor."""
    path = anchor_path(db)
    try:
        found = _parse(key, db, path.read_bytes(), str(path))
    except FileNotFoundError:
        return None
    except OSError:
        return {"seq": 0, "head": "", "valid": False, "path": str(path)}
    if found["valid"] or key is None:
        return found
    # perhaps read while an in-place write was half done: once more, under the writers' lock
    import fcntl

    try:
        lock = os.open(path.with_suffix(".lock"), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return found
    try:
        fcntl.flock(lock, fcntl.LOCK_SH)
        return _parse(key, db, path.read_bytes(), str(path))
    except FileNotFoundError:
        return None
    except OSError:
        return found
    finally:
        os.close(lock)
