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
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it first
            data = path.read_bytes()
        except OSError as exc:
            raise AuditKeyError(f"cannot create the audit key {path}: {exc.strerror or exc}") from None
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(KEY_BYTES))
            data = path.read_bytes()
    except OSError as exc:
        raise AuditKeyError(f"cannot read the audit key {path}: {exc.strerror or exc}") from None
    if len(data) < 16:
        raise AuditKeyError(f"the audit key {path} is damaged ({len(data)} bytes)")
    _keys[str(path)] = data
    return data


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
    return _anchor_path(str(audit_home()), _name(db))


@lru_cache(maxsize=64)
def _anchor_path(home: str, name: str) -> Path:
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return Path(home) / "anchors" / f"{digest}.json"


def _mac(key: bytes, db: str, seq: int, head: str) -> str:
    return hmac.new(key, f"anchor\n{db}\n{seq}\n{head}".encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


#: anchor file -> ((inode, mtime_ns, size) of the file as this process last wrote it, its seq): lets
#: :func:`advance_anchor` skip re-reading (and re-checking the MAC of) a file nobody else has replaced since
_written: dict[str, tuple[tuple[int, int, int], int]] = {}


def write_anchor(key: bytes, db: str, seq: int, head: str) -> None:
    """Atomically record that ``db``'s ledger has ``seq`` records ending in ``head``."""
    path = anchor_path(db)
    body = json.dumps({"db": db, "seq": seq, "head": head, "mac": _mac(key, db, seq, head)}).encode()
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
            os.write(fd, body)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        _written.pop(str(path), None)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _written[str(path)] = ((st.st_ino, st.st_mtime_ns, st.st_size), seq)


def _lock_file(db: str) -> int:
    path = anchor_path(db).with_suffix(".lock")
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o600)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        return os.open(path, flags, 0o600)


def check_writable(db: str) -> None:
    """Raise (OSError) when ``db``'s anchor cannot be written: checked when a writer opens the ledger,
    so a broken audit home fails this write (the result is withheld) rather than a later sync."""
    os.close(_lock_file(db))


def advance_anchor(key: bytes, db: str, seq: int, head: str) -> None:
    """Move ``db``'s anchor forward to ``seq``/``head``, never back: another process writing the same
    database may already have anchored a later record (the check and the write hold a lock file)."""
    import fcntl

    fd = _lock_file(db)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _current_seq(key, db) >= seq:
            return
        write_anchor(key, db, seq, head)
    finally:
        os.close(fd)  # releases the lock


def _current_seq(key: bytes, db: str) -> int:
    """The seq of ``db``'s valid anchor (-1 when it has none or it is damaged); hold the lock file."""
    path = str(anchor_path(db))
    mine = _written.get(path)
    if mine is not None:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and (st.st_ino, st.st_mtime_ns, st.st_size) == mine[0]:
            return mine[1]  # the file this process wrote last: nobody has replaced it since
    current = read_anchor(key, db)
    return current["seq"] if current is not None and current["valid"] else -1


def read_anchor(key: bytes | None, db: str) -> dict[str, Any] | None:
    """``{"seq", "head", "valid"}`` for ``db``, or None when it never had an anchor."""
    path = anchor_path(db)
    try:
        data = json.loads(path.read_text())
        seq, head = int(data["seq"]), str(data["head"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return {"seq": 0, "head": "", "valid": False, "path": str(path)}
    valid = key is not None and hmac.compare_digest(str(data.get("mac", "")), _mac(key, _name(db), seq, head))
    return {"seq": seq, "head": head, "valid": valid, "path": str(path)}
