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


def _check_text(data: bytes, raw: str) -> None:
    if b"\x00" in data[:8192]:
        raise ToolError(f"{raw!r} looks like a binary file; read_file returns text only")


def _read_text(real: Path, raw: str, limit: int) -> tuple[str, bool]:
    fd = _open_regular(real, raw)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    _check_text(data, raw)
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


TAIL_SHARE = 0.3  # of the cap, for the end of a big file (errors and summaries are there)


def _read_head_tail(real: Path, raw: str, cap: int) -> str:
    """The first ~70 % and the last ~30 % of ``cap`` bytes of a file larger than ``cap``, cut at
    line boundaries, with a marker naming the omitted byte range and how to read it.
    Reads at most ``cap`` bytes from disk."""
    fd = _open_regular(real, raw)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(cap - int(cap * TAIL_SHARE))
        _check_text(head, raw)
        tail_len = min(int(cap * TAIL_SHARE), max(0, size - len(head)))
        fh.seek(size - tail_len)
        tail = fh.read(tail_len)
    nl = head.rfind(b"\n")
    if nl > len(head) // 2:  # cut the head after its last full line
        head = head[: nl + 1]
    nl = tail.find(b"\n")
    if 0 <= nl < len(tail) // 2:  # start the tail at a full line
        tail = tail[nl + 1 :]
    start, end = len(head), size - len(tail)
    head_lines = head.count(b"\n")
    avg = max(1.0, len(head) / max(1, head_lines))
    about = max(1, round((end - start) / avg))
    marker = (f"\n[... {end - start} bytes omitted: bytes {start}-{end} of {size} ({raw} is larger than the "
              f"{cap}-byte read cap); they start at line {head_lines}: read them with "
              f"read_file(path={raw!r}, offset={head_lines}, limit=N) — about {about} lines in all ...]\n")
    return head.decode("utf-8", errors="replace") + marker + tail.decode("utf-8", errors="replace")


def _read_lines(real: Path, raw: str, offset: int, limit: int | None, cap: int) -> tuple[str, bool]:
    """Lines ``offset`` .. ``offset + limit`` streamed from the file (anywhere in it), at most ``cap`` bytes."""
    fd = _open_regular(real, raw)
    out: list[bytes] = []
    used = 0
    cut = False
    with os.fdopen(fd, "rb") as fh:
        first = fh.read(8192)
        _check_text(first, raw)
        fh.seek(0)
        for i, line in enumerate(fh):
            if i < offset:
                continue
            if limit is not None and i >= offset + limit:
                break
            if used + len(line) > cap:
                cut = True
                break
            out.append(line)
            used += len(line)
    return b"".join(out).decode("utf-8", errors="replace"), cut


def read_file(ctx: Any, path: str, offset: int = 0, limit: int | None = None) -> str:
    """Read a text file from the workspace.

    Args:
        path: file path, relative to the workspace
        offset: first line to return (0-based); with offset/limit any part of a big file can be read
        limit: how many lines to return (default: all, up to the size cap; a bigger file shows its head and tail)
    """
    cap = read_cap(ctx, settings(ctx).max_read_bytes)
    real = resolve(path, ctx, "read_file", want="file")
    if offset or limit is not None:
        text, cut = _read_lines(real, path, max(0, offset), None if limit is None else max(0, limit), cap)
        if cut:
            text += f"\n[cut at the {cap}-byte read cap: continue with a larger offset or a smaller limit]"
        return text
    try:
        size = os.stat(real).st_size
    except FileNotFoundError:
        raise ToolError(f"{path!r} does not exist") from None
    if size > cap:
        return _read_head_tail(real, path, cap)  # the end of a big file (a log's error) is kept
    text, cut = _read_text(real, path, cap)
    if cut:  # it grew while we read
        text += f"\n[truncated: {path} grew past {cap} bytes while being read; use offset/limit]"
    return text


# bytes per token of the budget: prose averages ~4, number-dense logs ~2.6 (measured with cl100k on
# "00000001 INFO request handled in 3 ms from 10.0.0.1"); 2 keeps any text inside the budget
CHARS_PER_TOKEN_KEPT = 2


def read_cap(ctx: Any, configured: int) -> int:
    """Bytes read_file returns: ``max_read_bytes``, or less when the agent's context budget for one tool
    result is smaller — so the result arrives whole, with read_file's own head/tail marker (the file's
    byte range and the offset to read it), instead of being cut again after the fact."""
    budget = getattr(ctx, "budget", None)
    try:
        allowed = int(budget.tokens("tool_results")) * CHARS_PER_TOKEN_KEPT if budget is not None else configured
    except Exception:  # a context without the kernel's budget: the configured cap
        allowed = configured
    return min(configured, max(4096, allowed))  # a tiny window still reads a page


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


@tool(risk="guarded", trusted_output=True)
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


@tool(risk="guarded", trusted_output=True)
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
