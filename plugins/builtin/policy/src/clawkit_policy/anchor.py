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
import tempfile
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
    return db if db.startswith("postgresql://") else os.path.realpath(db)


def anchor_path(db: str) -> Path:
    digest = hashlib.sha256(_name(db).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return audit_home() / "anchors" / f"{digest}.json"


def _mac(key: bytes, db: str, seq: int, head: str) -> str:
    return hmac.new(key, f"anchor\n{db}\n{seq}\n{head}".encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def write_anchor(key: bytes, db: str, seq: int, head: str) -> None:
    """Atomically record that ``db``'s ledger has ``seq`` records ending in ``head``."""
    path = anchor_path(db)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    body = json.dumps({"db": db, "seq": seq, "head": head, "mac": _mac(key, db, seq, head)})
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".anchor.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(body)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _lock_file(db: str) -> int:
    path = anchor_path(db)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)


def check_writable(db: str) -> None:
    """Raise (OSError) when ``db``'s anchor cannot be written: checked when a writer opens the ledger,
    so a broken audit home fails the first write (the result is withheld) rather than a later sync."""
    os.close(_lock_file(db))


def advance_anchor(key: bytes, db: str, seq: int, head: str) -> None:
    """Move ``db``'s anchor forward to ``seq``/``head``, never back: another process writing the same
    database may already have anchored a later record (the check and the write hold a lock file)."""
    import fcntl

    fd = _lock_file(db)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        current = read_anchor(key, db)
        if current is not None and current["valid"] and current["seq"] >= seq:
            return
        write_anchor(key, db, seq, head)
    finally:
        os.close(fd)  # releases the lock


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
