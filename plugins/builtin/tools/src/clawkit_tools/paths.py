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
    """The user's clawkit configuration directory (kept for callers; see :mod:`clawkit.governing`)."""
    from clawkit.governing import config_home

    return config_home()


def governing(ctx: Any) -> tuple:
    """What governs the agent's next run (:mod:`clawkit.governing`): ``ctx.governing`` when the
    kernel published it, else computed from the config."""
    found = getattr(ctx, "governing", None)
    if isinstance(found, tuple):
        return found
    from clawkit.governing import for_context

    return for_context(ctx)


def protected(ctx: Any) -> list[tuple[str, str]]:
    """``(real path, what it is)`` the tools never write, grant or not: everything that governs the
    agent's next run (its YAML and the YAML files it names, ``.agents/``, ``.clawkit/``, the session
    database, the user's clawkit config and the audit home) except the consent paths (skill folders)."""
    return [(g.path, g.what) for g in governing(ctx) if not g.consent]


CONSENT_KEY = "tools.consent"  # call id -> the file its approval names (set by the gate)


def refuse_protected(real: Path | str, raw: str, ctx: Any) -> None:
    """Raise :class:`PathRefused` when ``real`` is (inside) a governing path. A consent path (a
    skill folder) passes only when this very call was approved for this very file by the gate
    (:func:`consent_needed`): never by a grant or elevation."""
    from clawkit.governing import covering

    path = str(real)
    hit = covering(governing(ctx), path)
    if hit is None:
        return
    if not hit.consent:
        raise PathRefused(f"{raw!r} is {hit.what} ({hit.path}); it governs the agent's next run, so the tools never write it")
    call = getattr(ctx, "call", None)
    approved = ((getattr(ctx, "state", None) or {}).get(CONSENT_KEY) or {}).get(getattr(call, "id", None))
    if approved != path:
        raise PathRefused(f"{raw!r} is in {hit.what} ({hit.path}); writing it needs an approval naming the file")
    from clawkit.governing import note_consented

    note_consented(ctx, path)  # approved and about to be written


def consent_needed(ctx: Any, call: Any) -> Any:
    """The gate for ``write_file``/``edit_file``: a write into a consent path (a skill folder) needs an
    approval naming the file, remembered for this call only (the tool refuses other governing paths).
    Returns a :class:`clawkit.types.Decision` or None."""
    from clawkit.governing import covering
    from clawkit.types import Decision

    raw = (call.arguments or {}).get("path")
    if not isinstance(raw, str):
        return None
    try:
        real = resolve(raw, ctx, call.name, want="any")
    except ToolError:
        return None  # the tool reports it
    hit = covering(governing(ctx), str(real))
    if hit is None or not hit.consent:
        return None  # the tool itself refuses the others (and the ledger records the refused execution)
    shown = display(real, ctx)
    ctx.state.setdefault(CONSENT_KEY, {})[call.id] = str(real)
    verb = "overwrites" if real.exists() else "creates"
    return Decision.require_approval(
        f"{call.name} {verb} {shown}, in {hit.what}: this changes what later runs of this agent may do "
        "(skills are loaded into later runs); approve only if you want the agent to change its own skills")


def display(real: Path, ctx: Any) -> str:
    """A path as the model should see it: relative to the workspace when inside it."""
    workspace = os.path.realpath(str(ctx.workspace))
    s = str(real)
    if is_within(s, workspace):
        rel = os.path.relpath(s, workspace)
        return "." if rel == "." else rel
    return s
