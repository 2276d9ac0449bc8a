"""Workspace confinement: every path a file tool touches is resolved, then checked.

Resolution follows what the operating system would do (``~`` expansion, relative
to the workspace, ``..`` and every symlink resolved with ``realpath``) and the
check is made on the result. Spellings that could mean something else to another
layer — percent-encoding, Unicode compatibility forms (fullwidth ``．．／``),
backslashes — are decoded too, and a path is refused when *any* reading of it
leaves the allowed roots. Control and invisible format characters (NUL,
zero-width, bidi overrides) are refused outright, and so is anything under
``/dev``, ``/proc`` and ``/sys`` or that is not a regular file or directory
(devices, FIFOs, sockets), whatever the grants say.

Allowed roots are the workspace plus the path patterns granted to this tool for
this turn in ``ctx.state["granted"][tool]["paths"]`` (written by a policy
plugin). A pattern without wildcards covers that path and everything below it;
one with wildcards is matched with :func:`fnmatch.fnmatchcase` (``*`` crosses
``/``).
"""

from __future__ import annotations

import fnmatch
import os
import stat
import unicodedata
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import unquote

from clawkit.tools import ToolError

#: Never reachable through the file tools, grant or not.
FORBIDDEN_ROOTS = ("/dev", "/proc", "/sys")
_WILDCARDS = frozenset("*?[")


class PathRefused(ToolError):
    """A path outside the allowed roots, or one that is not an ordinary file or directory."""


def granted(ctx: Any, tool: str, kind: str) -> list[str]:
    """Resource patterns a policy plugin granted ``tool`` for this turn (``kind``: paths, hosts, commands)."""
    state = getattr(ctx, "state", None) or {}
    entry = (state.get("granted") or {}).get(tool) or {}
    return [str(p) for p in entry.get(kind, ())]


def pattern_covers(pattern: str, path: str) -> bool:
    """Does a granted path pattern cover ``path`` (both absolute, normalised)?"""
    if _WILDCARDS.isdisjoint(pattern):
        base = pattern.rstrip("/") or "/"
        return path == base or path.startswith(base if base.endswith("/") else base + "/")
    return fnmatch.fnmatchcase(path, pattern)


def is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _forbidden(real: str) -> bool:
    return any(is_within(real, r) for r in FORBIDDEN_ROOTS)


def _check_characters(raw: str) -> None:
    if not raw:
        raise PathRefused("empty path")
    for ch in raw:
        if unicodedata.category(ch) in ("Cc", "Cf"):
            raise PathRefused(f"path {raw!r} contains control or invisible characters (U+{ord(ch):04X}); refused")


def _realpath(raw: str, workspace: str) -> str:
    p = os.path.expanduser(raw)
    if not os.path.isabs(p):
        p = os.path.join(workspace, p)
    return os.path.realpath(p)


def _readings(raw: str) -> list[str]:
    """Other ways a layer might read ``raw``: percent-decoded, NFKC-normalised, backslashes as separators."""
    out: list[str] = []
    decoded = raw
    for _ in range(3):  # double encoding (%252e) decodes twice
        nxt = unquote(decoded)
        if nxt == decoded:
            break
        decoded = nxt
        out.append(decoded)
    for s in [raw, *out]:
        nfkc = unicodedata.normalize("NFKC", s)
        if nfkc != s:
            out.append(nfkc)
    out.extend(s.replace("\\", "/") for s in [raw, *out] if "\\" in s)
    return out


def allowed(real: str, workspace_real: str, patterns: Iterable[str]) -> bool:
    if _forbidden(real):
        return False
    return is_within(real, workspace_real) or any(pattern_covers(p, real) for p in patterns)


def resolve(raw: str, ctx: Any, tool: str, *, want: str = "any") -> Path:
    """Resolve ``raw`` for ``tool`` and return the real path, or raise :class:`PathRefused`.

    ``want``: ``file`` (must be a regular file if it exists), ``dir``, or ``any``.
    """
    if not isinstance(raw, str):
        raise PathRefused("path must be a string")
    _check_characters(raw)
    workspace = os.path.realpath(str(ctx.workspace))
    patterns = granted(ctx, tool, "paths")
    real = _realpath(raw, workspace)
    if _forbidden(real):
        raise PathRefused(f"{raw!r} resolves to {real}, a device or kernel file system; refused")
    if not allowed(real, workspace, patterns):
        hint = f" (it resolves to {real})" if real != os.path.normpath(raw) else ""
        raise PathRefused(
            f"{raw!r} is outside the workspace {workspace}{hint}; access needs a capability grant"
        )
    for other in _readings(raw):
        other_real = _realpath(other, workspace)
        if not allowed(other_real, workspace, patterns):
            raise PathRefused(f"{raw!r} can be read as {other!r}, which leaves the workspace; refused")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return Path(real)
    except OSError as exc:
        raise PathRefused(f"{raw!r}: {exc.strerror}") from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise PathRefused(f"{raw!r} is a device, FIFO or socket, not a regular file; refused")
    if want == "file" and stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{raw!r} is a directory, not a file")
    if want == "dir" and not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{raw!r} is not a directory")
    return Path(real)


STATE_DIR = ".clawkit"


def audit_home() -> str:
    """Where the policy keeps the audit key and anchors (the documented location; see docs/security.md)."""
    env = os.environ.get("CLAWKIT_AUDIT_HOME")
    if env:
        return os.path.realpath(os.path.expanduser(env))
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.realpath(os.path.join(base, "clawkit"))


def protected(ctx: Any) -> list[tuple[str, str]]:
    """``(real path, what it is)`` the tools never write: the agent's state directory and session
    database, its own YAML file, and the user's clawkit config (audit key and anchors)."""
    agent = getattr(ctx, "agent", None)
    workspace = os.path.realpath(str(ctx.workspace))
    out = [(os.path.join(workspace, STATE_DIR), "the agent's state directory")]
    db = getattr(agent, "state_db", None)
    if db:
        real = os.path.realpath(str(db))
        parent = os.path.dirname(real)
        if os.path.basename(parent) == STATE_DIR:
            out.append((parent, "the agent's state directory"))
        else:
            out.extend((real + suffix, "the agent's session database") for suffix in ("", "-wal", "-shm", "-journal"))
    source = getattr(agent, "source_file", None)
    if source:
        out.append((os.path.realpath(str(source)), "the agent's own configuration"))
    out.append((audit_home(), "the user's clawkit configuration (audit key)"))
    return out


def refuse_protected(real: Path | str, raw: str, ctx: Any) -> None:
    """Raise :class:`PathRefused` when ``real`` is (inside) a path of :func:`protected`."""
    path = str(real)
    for root, what in protected(ctx):
        if is_within(path, root):
            raise PathRefused(f"{raw!r} is {what} ({root}); the tools never write it")


def display(real: Path, ctx: Any) -> str:
    """A path as the model should see it: relative to the workspace when inside it."""
    workspace = os.path.realpath(str(ctx.workspace))
    s = str(real)
    if is_within(s, workspace):
        rel = os.path.relpath(s, workspace)
        return "." if rel == "." else rel
    return s
