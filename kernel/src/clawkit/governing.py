"""What governs an agent's next run: the files no tool or granted command of the agent may change.

An agent must not be able to rewrite what confines it. The set is:

* the agent's YAML file and every YAML file it names (its sub-agents' files, and theirs);
* the workspace's ``.agents/`` (prompt sections, project agent files) and ``.clawkit/`` (state);
* the session database's folder when it lives elsewhere;
* the user's clawkit configuration (``$XDG_CONFIG_HOME/clawkit``) and the audit home
  (``$CLAWKIT_AUDIT_HOME``);
* whatever plugins add through the ``governing_paths`` hook — the skills plugin adds its
  skill folders as *consent* paths: a file tool may write there only after an approval
  that names the file, never by a grant or elevation.

The kernel computes the set once per agent (:meth:`clawkit.loop.Agent.governing`) and hands
it to plugins as ``ctx.governing``; the tools plugin refuses writes into it and checks it
around unjailed commands, the sandbox mounts it read-only. Paths that do not exist yet are
in the set too (``.agents/`` created by a command counts as a change).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

YAML_SUFFIXES = (".yaml", ".yml")
MAX_FILES = 64  # YAML files followed (a tree of sub-agents); more are not read
MAX_DEPTH = 8


@dataclass(frozen=True)
class GoverningPath:
    """One path that governs later runs. ``path`` is absolute and resolved (it may not exist);
    ``what`` says what it is, for error messages; ``consent``: a write needs an approval naming
    the file each time (skill folders), instead of being refused outright."""

    path: str
    what: str
    consent: bool = False

    def covers(self, real: str) -> bool:
        return real == self.path or real.startswith(self.path.rstrip("/") + "/")


def config_home() -> str:
    """The user's clawkit configuration directory (``$XDG_CONFIG_HOME/clawkit``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.realpath(os.path.join(base, "clawkit"))


def audit_home() -> str:
    """The audit ledger's key and anchors (docs/security.md): ``$CLAWKIT_AUDIT_HOME``, else in :func:`config_home`."""
    env = os.environ.get("CLAWKIT_AUDIT_HOME")
    if env:
        return os.path.realpath(os.path.expanduser(env))
    return os.path.join(config_home(), "audit")


def _yaml_names(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        if value.lower().endswith(YAML_SUFFIXES) and "\n" not in value and len(value) < 4096:
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _yaml_names(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _yaml_names(v)


def named_yaml_files(data: Any, base: Path, seen: set[str] | None = None, depth: int = 0) -> list[str]:
    """YAML files named in ``data`` (a parsed agent file), resolved from ``base``, and those they name."""
    from .safeyaml import safe_load

    seen = set() if seen is None else seen
    found: list[str] = []
    for name in _yaml_names(data):
        real = os.path.realpath(os.path.join(str(base), os.path.expanduser(name)))
        if real in seen or len(seen) >= MAX_FILES:
            continue
        seen.add(real)
        found.append(real)
        if depth + 1 >= MAX_DEPTH or not os.path.isfile(real):
            continue
        try:
            with open(real, encoding="utf-8") as fh:
                child = safe_load(fh.read(), real)
        except Exception:  # unreadable or not YAML: still governed, just not followed
            continue
        found.extend(named_yaml_files(child, Path(real).parent, seen, depth + 1))
    return found


def base_paths(config: Any, workspace: Any = None) -> list[GoverningPath]:
    """The kernel's part of the set for an :class:`clawkit.config.AgentConfig` (``workspace``: the
    effective workspace when it differs from the config's)."""
    workspace = os.path.realpath(str(workspace or getattr(config, "workspace", ".") or "."))
    out = [GoverningPath(os.path.join(workspace, ".clawkit"), "the agent's state directory (.clawkit/)"),
           GoverningPath(os.path.join(workspace, ".agents"), "the workspace's agent configuration (.agents/)")]
    db = getattr(config, "state_db", None)
    if db and "://" not in str(db):
        real = os.path.realpath(os.path.join(workspace, str(db)))
        if os.path.basename(os.path.dirname(real)) == ".clawkit":
            out.append(GoverningPath(os.path.dirname(real), "the agent's state directory"))
        else:
            out.extend(GoverningPath(real + sfx, "the agent's session database") for sfx in ("", "-wal", "-shm", "-journal"))
    source = getattr(config, "source_file", None)
    if source is not None:
        src = os.path.realpath(str(source))
        out.append(GoverningPath(src, "the agent's own configuration"))
        try:
            data = config.model_dump(mode="python", exclude={"model", "instructions"})
        except Exception:  # a config that cannot dump itself: its own file is still governed
            data = {}
        for real in named_yaml_files(data, Path(src).parent, {src}):
            out.append(GoverningPath(real, "a sub-agent's configuration (a YAML file the agent names)"))
    out.append(GoverningPath(config_home(), "the user's clawkit configuration"))
    home = audit_home()
    if not any(p.covers(home) for p in out):
        out.append(GoverningPath(home, "the audit home (ledger key and anchors)"))
    return out


def collect(hooks: Any, config: Any) -> tuple[GoverningPath, ...]:
    """:func:`base_paths` plus what plugins add through ``governing_paths`` (a failing plugin is reported, skipped)."""
    out = list(base_paths(config))
    if hooks is not None and hooks.has("governing_paths"):
        for plugin, fn, argnames in hooks.impls("governing_paths"):
            try:
                items = fn(**{k: {"agent": config}[k] for k in argnames}) or []
                for item in items:
                    if isinstance(item, GoverningPath):
                        out.append(item)
                    else:
                        path, what, *rest = item
                        out.append(GoverningPath(os.path.realpath(str(path)), str(what), bool(rest and rest[0])))
            except Exception as exc:  # noqa: BLE001 - isolated: the kernel's own set still holds
                hooks.report("governing_paths", plugin, exc)
    seen: dict[str, GoverningPath] = {}
    for p in out:
        if p.path not in seen or (seen[p.path].consent and not p.consent):
            seen[p.path] = p  # refused outright beats "with consent"
    return tuple(seen.values())


def covering(paths: Iterable[GoverningPath], real: str) -> GoverningPath | None:
    """The governing path that covers ``real`` (refused-outright ones first), or None."""
    hits = [p for p in paths if p.covers(real)]
    hits.sort(key=lambda p: p.consent)
    return hits[0] if hits else None


def for_context(ctx: Any) -> tuple[GoverningPath, ...]:
    """The set for a turn context (or anything with ``agent``/``runtime``): the running agent's,
    else computed from the config alone."""
    runtime = getattr(ctx, "runtime", None)
    found = getattr(runtime, "governing", None)
    if isinstance(found, tuple):
        return found
    return tuple(base_paths(getattr(ctx, "agent", None), getattr(ctx, "workspace", None)))


#: ``ctx.state`` key: files written this turn with a person's approval (a skill file)
CONSENTED = "governing.written_with_consent"


def note_consented(ctx: Any, path: str) -> None:
    """Record that ``path`` (in a consent path) is written after an approval naming it: a snapshot open
    meanwhile (:mod:`clawkit.snapshot`) leaves that change alone."""
    ctx.state.setdefault(CONSENTED, []).append(path)


def consented(ctx: Any) -> list[str]:
    """Files written this turn with a person's approval (:func:`note_consented`)."""
    return list((getattr(ctx, "state", None) or {}).get(CONSENTED) or ())
