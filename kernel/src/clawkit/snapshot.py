"""Undo a change to what governs the agent's next run: snapshot before, compare after, restore.

Where no jail keeps the governing paths (:mod:`clawkit.governing`) read-only — a command run
without the sandbox, a WebAssembly module with a writable preopen — the few paths that govern
the agent's next run (its YAML and the YAML files it names, ``.agents/``, the user's clawkit
config, skill folders…) are snapshotted — ``lstat`` of each entry, the bytes of small files —
and compared after the effect. Any change is undone (content written back, created entries
removed, deleted ones recreated) and the caller turns the call into an error that says what
was restored. Cheap: these are a few small files; large trees are bounded (:data:`MAX_ENTRIES`,
:data:`MAX_KEPT`). Used by the tools plugin (``shell_exec``) and the sandbox plugin (Wasm).

Not covered: what our own process writes meanwhile — the session database (``*.db``, its
journal files), lock files, logs (an MCP server's stderr) and the ledger's anchors — which the audit ledger's chain and
anchors protect instead (``clawkit audit verify``); and a file written with consent (a skill
file a person approved) while the snapshot was open: callers pass those in ``keep``.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from typing import Any, Iterable

MAX_ENTRIES = 2000  # entries per governing tree that are snapshotted
MAX_BYTES = 1 << 20  # files larger than this are compared by size and mtime, not restored
SKIP_DIRS = frozenset({"anchors", "locks", "outputs"})
SKIP_SUFFIXES = (".db", ".db-wal", ".db-shm", ".db-journal", ".lock", ".tmp", ".sqlite", ".sqlite3", ".log")


def _skipped(name: str) -> bool:
    return name.endswith(SKIP_SUFFIXES) or name.startswith(".anchor.")


@dataclass(frozen=True)
class Entry:
    kind: str  # file, dir, link, other
    mode: int
    size: int
    mtime: int
    data: bytes | None = None  # the content of a small file (restorable)
    target: str | None = None  # a symlink's target

    def same(self, other: "Entry") -> bool:
        if self.kind != other.kind or self.target != other.target:
            return False
        if self.kind == "file":
            if self.data is not None and other.data is not None:
                return self.data == other.data and stat.S_IMODE(self.mode) == stat.S_IMODE(other.mode)
            return (self.size, self.mtime) == (other.size, other.mtime)
        return self.kind != "other" or (self.size, self.mtime) == (other.size, other.mtime)


MAX_KEPT = 16 << 20  # bytes of content kept per snapshot; past it, files are compared by size and mtime


def _entry(path: str, budget: list[int] | None = None) -> Entry | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return Entry("link", st.st_mode, 0, 0, target=os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return Entry("dir", st.st_mode, 0, 0)
    if stat.S_ISREG(st.st_mode):
        data = None
        if st.st_size <= MAX_BYTES and (budget is None or budget[0] >= st.st_size):
            if budget is not None:
                budget[0] -= st.st_size
            try:
                with open(path, "rb") as fh:
                    data = fh.read(MAX_BYTES + 1)
            except OSError:
                data = None
        return Entry("file", st.st_mode, st.st_size, st.st_mtime_ns, data)
    return Entry("other", st.st_mode, st.st_size, st.st_mtime_ns)


def _walk(root: str, budget: list[int] | None = None) -> dict[str, Entry | None]:
    """Every entry of the tree at ``root`` (``root`` itself included; None when it is missing)."""
    out: dict[str, Entry | None] = {root: _entry(root, budget)}
    top = out[root]
    if top is None or top.kind != "dir":
        return out
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(dirs + files):
            if len(out) >= MAX_ENTRIES:
                return out
            if _skipped(name):
                continue
            path = os.path.join(base, name)
            out[path] = _entry(path, budget)
    return out


class Snapshot:
    """The state of the governing paths before a command (:meth:`take`), and :meth:`restore` after it."""

    def __init__(self, roots: Iterable[tuple[str, str]]) -> None:
        self.roots = [(r, what) for r, what in roots]
        self.before: dict[str, Entry | None] = {}
        budget = [MAX_KEPT]
        for root, _ in self.roots:
            self.before.update(_walk(root, budget))

    @classmethod
    def take(cls, governing: Iterable[Any]) -> "Snapshot":
        roots: list[tuple[str, str]] = []
        for g in governing:
            if any(g.path == r or g.path.startswith(r.rstrip("/") + "/") for r, _ in roots):
                continue  # inside a root already taken
            roots = [(r, w) for r, w in roots if not r.startswith(g.path.rstrip("/") + "/")]
            roots.append((g.path, g.what))
        return cls(roots)

    def changes(self) -> list[tuple[str, str]]:
        """``(path, change)`` — created, modified, deleted — since :meth:`take`."""
        after: dict[str, Entry | None] = {}
        budget = [MAX_KEPT]
        for root, _ in self.roots:
            after.update(_walk(root, budget))
        out: list[tuple[str, str]] = []
        for path in sorted(set(self.before) | set(after)):
            old, new = self.before.get(path), after.get(path)
            if old is None and new is None:
                continue
            if old is None:
                out.append((path, "created"))
            elif new is None:
                out.append((path, "deleted"))
            elif not old.same(new):
                out.append((path, "modified"))
        return out

    def restore(self, keep: Iterable[str] = ()) -> list[str]:
        """Undo every change except to the paths in ``keep`` (written with consent meanwhile); returns
        one line per path (what happened and whether it was restored)."""
        kept = set(keep)
        changes = [(p, c) for p, c in self.changes() if p not in kept]
        lines: list[str] = []
        # remove what was created, deepest first; then put back what was there, shallowest first
        for path, change in sorted(changes, key=lambda c: -c[0].count("/")):
            if change == "created":
                _remove(path)
        for path, change in sorted(changes, key=lambda c: c[0].count("/")):
            old = self.before.get(path)
            if old is None:
                lines.append(f"{path} ({change}; removed)")
                continue
            ok = _put_back(path, old)
            lines.append(f"{path} ({change}; {'restored' if ok else 'NOT restored: it was too large to keep a copy'})")
        return lines


def unguarded(governing: Iterable[Any], launch: Any) -> list[Any]:
    """The governing paths a launch does not already protect (the sandbox lists in
    ``launch.sandbox["governing"]`` the ones it mounted read-only or left out of the jail)."""
    covered = set(((getattr(launch, "sandbox", None) or {}).get("governing") or {}).get("protected") or ())
    return [g for g in governing if g.path not in covered]


def guard(ctx: Any) -> Snapshot:
    """A snapshot of everything that governs the agent's next run (``ctx.governing``), for an effect
    no jail confines (an MCP server's tool)."""
    from .governing import for_context

    return Snapshot.take(for_context(ctx))


def undo(ctx: Any, snapshot: Snapshot, who: str) -> str | None:
    """Restore what changed since ``snapshot`` (approved skill writes kept); the error text for the
    model, naming ``who`` did it and what was restored, or None when nothing changed."""
    from .governing import consented

    lines = snapshot.restore(keep=consented(ctx))
    if not lines:
        return None
    shown = "\n".join(f"  {line}" for line in lines)
    return (f"Error: {who} changed what governs the agent's next run, which no tool of the agent may change; "
            f"clawkit undid it:\n{shown}")


def _remove(path: str) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def _put_back(path: str, old: Entry) -> bool:
    try:
        now = _entry(path)
        if now is not None and old.same(now):
            return True
        if old.kind == "dir":
            if now is not None and now.kind != "dir":
                _remove(path)
            os.makedirs(path, exist_ok=True)
            os.chmod(path, stat.S_IMODE(old.mode))
            return True
        if old.kind == "link":
            _remove(path)
            os.symlink(old.target or "", path)
            return True
        if old.kind == "file" and old.data is not None:
            if now is not None and now.kind != "file":
                _remove(path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.clawkit-restore"
            with open(tmp, "wb") as fh:
                fh.write(old.data)
            os.chmod(tmp, stat.S_IMODE(old.mode))
            os.replace(tmp, path)
            return True
    except OSError:
        return False
    return False
