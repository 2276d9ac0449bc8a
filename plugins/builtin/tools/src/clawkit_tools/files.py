"""The file tools: read_file, write_file, edit_file, list_dir, glob.

Every path goes through :func:`clawkit_tools.paths.resolve` first. Files are opened
with ``O_NOFOLLOW`` and re-checked with ``fstat`` on the open descriptor, so a
symlink or device swapped in after the check is refused too. Writes go to a
temporary file in the same directory and are renamed into place.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from clawkit.tools import ToolError, tool

from .paths import PathRefused, display, refuse_protected, resolve
from .settings import settings


def _open_regular(real: Path, raw: str) -> int:
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ToolError(f"{raw!r} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathRefused(f"{raw!r} became a symlink after it was checked; refused") from None
        raise ToolError(f"cannot open {raw!r}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PathRefused(f"{raw!r} is not a regular file; refused")
    return fd


def _read_text(real: Path, raw: str, limit: int) -> tuple[str, bool]:
    fd = _open_regular(real, raw)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if b"\x00" in data[:8192]:
        raise ToolError(f"{raw!r} looks like a binary file; read_file returns text only")
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


def read_file(ctx: Any, path: str, offset: int = 0, limit: int | None = None) -> str:
    """Read a text file from the workspace.

    Args:
        path: file path, relative to the workspace
        offset: first line to return (0-based)
        limit: how many lines to return (default: all, up to the size cap)
    """
    cfg = settings(ctx)
    real = resolve(path, ctx, "read_file", want="file")
    text, cut = _read_text(real, path, cfg.max_read_bytes)
    if offset or limit is not None:
        lines = text.splitlines(keepends=True)
        end = None if limit is None else offset + max(0, limit)
        text = "".join(lines[max(0, offset) : end])
    if cut:
        text += f"\n[truncated: {path} is larger than {cfg.max_read_bytes} bytes; use offset/limit]"
    return text


def _atomic_write(real: Path, data: bytes) -> None:
    real.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@tool(risk="guarded")
def write_file(ctx: Any, path: str, content: str) -> str:
    """Create or overwrite a text file in the workspace (parent directories are created).

    Args:
        path: file path, relative to the workspace
        content: the complete new content of the file
    """
    cfg = settings(ctx)
    data = content.encode("utf-8")
    if len(data) > cfg.max_write_bytes:
        raise ToolError(f"content is {len(data)} bytes; the limit is {cfg.max_write_bytes}")
    real = resolve(path, ctx, "write_file", want="file")
    resolve(str(real.parent), ctx, "write_file", want="any")
    refuse_protected(real, path, ctx)
    existed = real.exists()
    _atomic_write(real, data)
    return f"{'overwrote' if existed else 'created'} {display(real, ctx)} ({len(data)} bytes)"


@tool(risk="guarded")
def edit_file(ctx: Any, path: str, old: str, new: str, replace_all: bool = False) -> str:
    """Replace an exact string in a text file. ``old`` must occur exactly once unless replace_all.

    Args:
        path: file path, relative to the workspace
        old: the exact text to replace (including whitespace)
        new: the replacement text
        replace_all: replace every occurrence instead of requiring exactly one
    """
    cfg = settings(ctx)
    if old == "":
        raise ToolError("old must not be empty")
    real = resolve(path, ctx, "edit_file", want="file")
    refuse_protected(real, path, ctx)
    text, cut = _read_text(real, path, cfg.max_write_bytes)
    if cut:
        raise ToolError(f"{path!r} is larger than {cfg.max_write_bytes} bytes; too big to edit")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"the text to replace was not found in {path!r} (it must match exactly, whitespace included)")
    if count > 1 and not replace_all:
        raise ToolError(f"the text to replace occurs {count} times in {path!r}; add context to make it unique or set replace_all")
    _atomic_write(real, text.replace(old, new).encode("utf-8"))
    return f"replaced {count if replace_all else 1} occurrence(s) in {display(real, ctx)}"


def list_dir(ctx: Any, path: str = ".") -> str:
    """List a directory: one entry per line, directories end with '/', files show their size.

    Args:
        path: directory, relative to the workspace
    """
    cfg = settings(ctx)
    real = resolve(path, ctx, "list_dir", want="dir")
    try:
        entries = sorted(os.scandir(real), key=lambda e: e.name)
    except FileNotFoundError:
        raise ToolError(f"{path!r} does not exist") from None
    lines = []
    for entry in entries[: cfg.max_list_entries]:
        try:
            name = shown_name(entry.name)
            if entry.is_symlink():
                lines.append(f"{name} -> {shown_name(os.readlink(entry.path))}")
            elif entry.is_dir():
                lines.append(name + "/")
            else:
                lines.append(f"{name}  ({entry.stat().st_size} bytes)")
        except OSError:
            lines.append(shown_name(entry.name))
    if len(entries) > cfg.max_list_entries:
        lines.append(f"[{len(entries) - cfg.max_list_entries} more entries not shown]")
    return "\n".join(lines) if lines else f"{display(real, ctx)} is empty"


def shown_name(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (kept by the OS as surrogate escapes) shown as ``\\xNN``."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


MAX_GLOBSTARS = 4


def glob(ctx: Any, pattern: str, path: str = ".") -> str:
    """Find files matching a glob pattern (``**`` for any depth), one path per line.

    Args:
        pattern: glob pattern relative to path, e.g. "**/*.py"
        path: directory to search from, relative to the workspace
    """
    import time

    from wcmatch import glob as wglob

    cfg = settings(ctx)
    if os.path.isabs(pattern) or pattern.startswith("~") or ".." in Path(pattern).parts:
        raise PathRefused(f"pattern {pattern!r} must be relative and must not contain '..'; use path for the base")
    if pattern.count("**") > MAX_GLOBSTARS or len(pattern) > 1000:
        raise ToolError(f"pattern {pattern!r} is too complex (at most {MAX_GLOBSTARS} '**' and 1000 characters)")
    base = resolve(path, ctx, "glob", want="dir")
    try:
        # one linear walk, each name matched once: Path.glob with many '**' revisits the tree combinatorially
        matcher = wglob.compile(pattern, flags=wglob.GLOBSTAR | wglob.DOTGLOB)
    except Exception as exc:
        raise ToolError(f"invalid pattern {pattern!r}: {exc}") from None
    deadline = time.monotonic() + cfg.glob_timeout
    found: list[str] = []
    visited, stopped = 0, ""
    for root, dirs, files in os.walk(base, followlinks=False):
        dirs.sort()
        rel_root = os.path.relpath(root, base)
        for name in sorted(dirs) + sorted(files):
            visited += 1
            rel = name if rel_root == "." else os.path.join(rel_root, name)
            if matcher.match(rel):
                try:
                    real = resolve(os.path.join(root, name), ctx, "glob")
                except ToolError:
                    continue  # a symlink out of the allowed roots is simply not listed
                found.append(shown_name(display(real, ctx)) + ("/" if real.is_dir() else ""))
        if len(found) > cfg.max_list_entries:
            break
        if visited >= cfg.glob_max_visited or time.monotonic() > deadline:
            stopped = (f"\n[search stopped after {visited:,} entries ({cfg.glob_timeout:g} s / {cfg.glob_max_visited:,} "
                       "entries at most): narrow the pattern or the path]")
            break
    found = sorted(set(found))
    if len(found) > cfg.max_list_entries:
        return "\n".join(found[: cfg.max_list_entries]) + f"\n[more than {cfg.max_list_entries} matches; narrow the pattern]"
    return ("\n".join(found) if found else f"no files match {pattern!r}") + stopped
