"""Layer 1: skill-manifest capabilities matched against a concrete tool call.

A skill's ``.claws`` manifest lists permission items (see ``CLAWS_FORMAT.md``)::

    permissions:
      - capability: fs.read
        paths: ["docs/**", "~/notes/*.md"]
      - capability: net.http
        allow: ["api.github.com", "*.example.org"]
        deny: ["internal.example.org"]
      - capability: shell.exec
        allow: ["git status", "git log *"]
      - deny: [fs.write, shell.exec]

The skills plugin puts the items of the active skills in
``ctx.state["capability_requests"]``. When that list is present, a call must be
*granted* by some item for its capability and resources (real paths after
``~``, ``..`` and symlinks are resolved; canonical host names; each segment of a
shell command), and no deny item or deny list may match it: **deny wins**.
A capability no item mentions at all is "ungranted" (the shield's mode decides
whether that blocks or asks for approval); a denied or out-of-scope call is refused.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import socket
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Iterable
from urllib.parse import urlsplit

from clawkit.effects import ALIASES, canonical
from wcmatch import glob as wglob

GLOB_FLAGS = wglob.GLOBSTAR | wglob.DOTGLOB | wglob.BRACE

# tool → capability (clawkit.effects.capability_of) and the names manifests use for each (ALIASES): one
# table in the kernel, shared with every gate that enforces manifests; more in the config's capability_map

PATH_ARGS = ("path", "file", "file_path", "filepath", "filename", "directory", "dir", "root", "target", "source",
             "src", "dest", "destination", "dst", "cwd", "workdir", "working_dir")
URL_ARGS = ("url", "uri", "href", "link")
COMMAND_ARGS = ("command", "cmd", "argv", "args", "script")
_MAGIC = re.compile(r"[*?\[{]")
_SHELL_SPLIT = re.compile(r"\s*(?:&&|\|\||[;|&\n])\s*")


class ManifestError(ValueError):
    """A permission item that cannot be understood (the shield fails closed on it)."""


def capability_matches(declared: str, capability: str, tool: str) -> bool:
    """Does a manifest's capability name cover ``capability`` (of ``tool``)?"""
    d = canonical(declared)
    if d in ("*", "all") or d == capability or d == canonical(tool):
        return True
    if d in ALIASES.get(capability, ()):
        return True
    return any(c in "*?[" for c in d) and fnmatchcase(capability, d)


@dataclass
class Permission:
    """One manifest item, normalised: a grant (``capability: X``) or a deny (``deny: X``)."""

    kind: str  # "grant" | "deny"
    capability: str
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    skill: str | None = None
    pii_scan: bool = False  # values under this grant are scanned for personal data (pii.py)

    @property
    def scoped(self) -> bool:
        return bool(self.allow or self.paths)


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ManifestError(f"{where}: expected a string or a list of strings, got {value!r}")


def parse_permissions(items: Iterable[Any]) -> list[Permission]:
    """Normalise permission items (dicts, pydantic models or bare capability strings)."""
    out: list[Permission] = []
    for i, item in enumerate(items):
        where = f"capability_requests[{i}]"
        if isinstance(item, str):
            out.append(Permission("grant", item))
            continue
        if hasattr(item, "model_dump"):
            item = item.model_dump(exclude_none=True)
        elif not isinstance(item, dict) and hasattr(item, "__dict__"):
            item = {k: v for k, v in vars(item).items() if v is not None}
        if not isinstance(item, dict):
            raise ManifestError(f"{where}: a permission item must be a mapping, got {type(item).__name__}")
        skill = item.get("skill")
        if item.get("capability") is not None:
            if not isinstance(item["capability"], str):
                raise ManifestError(f"{where}.capability: expected a string")
            out.append(Permission("grant", item["capability"], _strings(item.get("allow"), f"{where}.allow"),
                                  _strings(item.get("deny"), f"{where}.deny"), _strings(item.get("paths"), f"{where}.paths"), skill,
                                  bool(item.get("pii_scan"))))
        elif item.get("deny") is not None:
            allow, paths = _strings(item.get("allow"), f"{where}.allow"), _strings(item.get("paths"), f"{where}.paths")
            for cap in _strings(item["deny"], f"{where}.deny"):
                out.append(Permission("deny", cap, allow, [], paths, skill))
        else:
            raise ManifestError(f"{where}: needs `capability: NAME` or `deny: NAME`, got keys {sorted(item)}")
    return out


def pii_scanning(tool: str, capability: str | None, permissions: list[Permission]) -> list[str]:
    """The skills whose grant for this call's capability asks its values to be scanned for personal data."""
    if not capability:
        return []
    return sorted({p.skill or "?" for p in permissions
                   if p.kind == "grant" and p.pii_scan and capability_matches(p.capability, capability, tool)})


# --- resources ---------------------------------------------------------------------------


def real_path(value: str, workspace: str) -> str:
    """Where ``value`` really points: ``~`` expanded, relative to the workspace, ``..`` and symlinks resolved."""
    p = os.path.expanduser(str(value))
    if not os.path.isabs(p):
        p = os.path.join(workspace, p)
    return os.path.realpath(p)


def canonical_host(host: str) -> str:
    """Lower-case, IDNA, no trailing dot; numeric IPv4 forms (``0x7f.1``, ``2130706433``) made dotted."""
    h = host.strip().strip("[]").rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(h))
    except ValueError:
        pass
    if re.fullmatch(r"[0-9a-fx.]+", h) and not re.fullmatch(r"[a-f.]+", h):
        try:
            return socket.inet_ntoa(socket.inet_aton(h))
        except OSError:
            pass
    try:
        return h.encode("idna").decode("ascii")
    except UnicodeError:
        return h


@dataclass
class Resources:
    """What a call touches: resolved paths, hosts (with their URLs), command segments."""

    paths: list[str] = field(default_factory=list)
    hosts: list[tuple[str, str]] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    command_text: str = ""


def command_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return shlex.join(str(v) for v in value)
    return str(value)


_SUBST = re.compile(r"[$<>]\(([^()]*)\)|`([^`]*)`")


def command_segments(text: str) -> list[str]:
    """Each simple command in a shell line: split at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines,
    with the commands inside ``$(…)``, ``<(…)`` and backticks as segments of their own."""
    inner: list[str] = []
    while True:
        found = _SUBST.search(text)
        if found is None:
            break
        inner.append(found.group(1) if found.group(1) is not None else found.group(2))
        text = text[: found.start()] + "SUBST" + text[found.end() :]
    return [seg for part in [text, *inner] for seg in _SHELL_SPLIT.split(part.strip()) if seg]


def extract_resources(arguments: dict[str, Any], workspace: str) -> Resources:
    """The paths, hosts and commands named by a call's arguments (by argument name)."""
    res = Resources()
    for key, value in arguments.items():
        k = key.lower()
        if value is None or value == "":
            continue
        if k in PATH_ARGS and isinstance(value, str):
            res.paths.append(real_path(value, workspace))
        elif k in ("pattern", "glob") and isinstance(value, str):
            base = arguments.get("path") or arguments.get("root") or arguments.get("directory") or "."
            prefix = _MAGIC.split(value, 1)[0]
            prefix = prefix.rsplit("/", 1)[0] if _MAGIC.search(value) else prefix
            res.paths.append(real_path(os.path.join(str(base), prefix) if prefix else str(base), workspace))
        elif k in URL_ARGS and isinstance(value, str):
            host = urlsplit(value.strip()).hostname or ""
            res.hosts.append((canonical_host(host), value.strip()))
        elif k in COMMAND_ARGS and isinstance(value, (str, list, tuple)):
            text = command_text(value)
            res.command_text = text
            res.commands.extend(command_segments(text))
    return res


# --- matching ----------------------------------------------------------------------------


def path_matches(path: str, pattern: str, workspace: str) -> bool:
    """Glob match of a resolved path; a pattern without wildcards covers that directory and below."""
    pat = os.path.expanduser(pattern)
    if not os.path.isabs(pat):
        pat = os.path.join(workspace, pat)
    if not _MAGIC.search(pat):
        root = os.path.realpath(pat)
        return path == root or path.startswith(root.rstrip("/") + "/")
    head, _, _ = pat.partition("*")
    if "/" in head:  # resolve the literal directory part, so symlinked roots compare equal
        d = head.rsplit("/", 1)[0]
        if d and not _MAGIC.search(d):
            pat = os.path.realpath(d) + pat[len(d):]
    if pat.endswith("/**") and (path == pat[:-3] or path == os.path.realpath(pat[:-3])):
        return True
    return wglob.globmatch(path, pat, flags=GLOB_FLAGS)


def host_matches(host: str, url: str, pattern: str) -> bool:
    """``example.com`` exact; ``*.example.com`` subdomains; ``.example.com`` both; a URL pattern; a CIDR."""
    p = pattern.strip().lower()
    if "://" in p:
        return fnmatchcase(url.lower(), p) or fnmatchcase(url.lower(), p.rstrip("/") + "/*")
    if "/" in p:
        try:
            return ipaddress.ip_address(host) in ipaddress.ip_network(p, strict=False)
        except ValueError:
            return False
    if p.startswith("."):
        return host == p[1:] or host.endswith(p)
    return fnmatchcase(host, canonical_host(p) if not _MAGIC.search(p) else p)


def command_matches(segment: str, pattern: str) -> bool:
    return fnmatchcase(segment.strip(), pattern.strip())


def _hits(kind: str, res: Resources, patterns: list[str], workspace: str, *, every: bool) -> bool:
    """Whether the patterns cover the resources: any one (for deny lists) or every one (for allow lists)."""
    if kind == "paths":
        items = [lambda p, x=x: path_matches(x, p, workspace) for x in res.paths]
    elif kind == "hosts":
        items = [lambda p, h=h, u=u: host_matches(h, u, p) for h, u in res.hosts]
    else:
        items = [lambda p, s=s: command_matches(s, p) for s in res.commands]
    if not items:
        return not every
    found = [any(fn(p) for p in patterns) for fn in items]
    return all(found) if every else any(found)


def _kind(capability: str) -> str:
    return {"fs.read": "paths", "fs.write": "paths", "net.http": "hosts", "shell.exec": "commands"}.get(capability, "paths")


@dataclass(frozen=True)
class Refusal:
    """Why the manifests do not allow a call: ``denied`` (deny item, deny list, out of scope) or ``ungranted``."""

    kind: str
    reason: str


def check(tool: str, capability: str, res: Resources, permissions: list[Permission], workspace: str) -> Refusal | None:
    """None when the manifests allow the call; otherwise why not."""
    mine = [p for p in permissions if capability_matches(p.capability, capability, tool)]
    kind = _kind(capability)
    for p in mine:
        if p.kind != "deny":
            continue
        if not p.scoped:
            return Refusal("denied", f"the active skill manifest denies {capability}" + (f" (skill {p.skill})" if p.skill else ""))
        if _hits(kind, res, p.allow, workspace, every=False) or (p.paths and _hits("paths", res, p.paths, workspace, every=False)):
            return Refusal("denied", f"the active skill manifest denies {capability} for this resource")
    grants = [p for p in mine if p.kind == "grant"]
    for p in grants:
        if p.deny and (_hits(kind, res, p.deny, workspace, every=False) or (kind != "paths" and res.paths and _hits("paths", res, p.deny, workspace, every=False))):
            return Refusal("denied", f"the active skill manifest's deny list for {capability} matches this call")
    if not grants:
        granted = sorted({canonical(p.capability) for p in permissions if p.kind == "grant"}) or ["nothing"]
        return Refusal("ungranted", f"the active skill manifests do not grant {capability} (granted: {', '.join(granted)})")
    for p in grants:
        if not p.scoped:
            return None
        ok = True
        if p.allow:
            ok = _hits(kind, res, p.allow, workspace, every=True)
        if ok and p.paths:
            ok = _hits("paths", res, p.paths, workspace, every=True)
        if ok:
            return None
    return Refusal("denied", f"the active skill manifests grant {capability} only for other resources than this call's")
