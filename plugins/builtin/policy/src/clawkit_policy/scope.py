"""What a call touches (paths, hosts, commands) and whether its scope covers it.

Resources are found by argument name, so third-party tools that follow the
conventions (``path``, ``cwd``, ``url``, ``command``…) are governed too. Default
scopes: paths inside the workspace; hosts that are public (literal private,
loopback and link-local addresses and local names are not); any command, but
only ``safe``… ``unsafe`` approval rules apply to it. Everything else needs a
:class:`~clawkit_policy.config.Grant`.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import shlex
import socket
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from clawkit.approvals import call_hash as _call_hash

from .config import Grant

PATH_ARGS = frozenset({"path", "paths", "file", "filename", "filepath", "file_path", "directory", "dir", "cwd",
                       "root", "source", "src", "dest", "destination", "target"})
URL_ARGS = frozenset({"url", "uri", "href", "endpoint"})
COMMAND_ARGS = frozenset({"command", "cmd", "argv", "script"})
FORBIDDEN_ROOTS = ("/dev", "/proc", "/sys")
LOCAL_NAMES = ("localhost", "*.localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "*.local",
               "*.internal", "*.home.arpa", "*.lan", "metadata", "metadata.google.internal")
SHELL_OPERATORS = (";", "&", "|", "`", "$(", ">", "<", "\n", "\r")
_WILDCARDS = frozenset("*?[")


def call_hash(name: str, arguments: dict[str, Any]) -> str:
    """SHA-256 of the tool name and its canonical arguments: what an approval binds to. The one
    definition is the kernel's (:func:`clawkit.approvals.call_hash`), so the hash a terminal prompt
    or a server's approvals API shows a person is the one in the ledger."""
    if not arguments and type(arguments) is dict:  # a call without arguments: its hash depends on the name only
        found = _NO_ARGUMENTS.get(name)
        if found is None:
            if len(_NO_ARGUMENTS) > 256:
                _NO_ARGUMENTS.clear()
            found = _NO_ARGUMENTS[name] = _call_hash(name, arguments)
        return found
    return _call_hash(name, arguments)


_NO_ARGUMENTS: dict[str, str] = {}


def is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def pattern_covers(pattern: str, path: str) -> bool:
    """A pattern without wildcards covers that path and everything below it; else fnmatch."""
    if _WILDCARDS.isdisjoint(pattern):
        return is_within(path, pattern.rstrip("/") or "/")
    return fnmatch.fnmatchcase(path, pattern)


def real_path(raw: str, workspace: str) -> str:
    p = os.path.expanduser(raw)
    if not os.path.isabs(p):
        p = os.path.join(workspace, p)
    return os.path.realpath(p)


def grant_path(pattern: str, workspace: str) -> str:
    """A grant's path pattern made absolute, its wildcard-free prefix resolved like a real path."""
    p = os.path.normpath(os.path.join(workspace, os.path.expanduser(pattern)))
    if _WILDCARDS.isdisjoint(p):
        return os.path.realpath(p)
    parts = p.split("/")
    i = next(i for i, part in enumerate(parts) if not _WILDCARDS.isdisjoint(part))
    return os.path.join(os.path.realpath("/".join(parts[:i]) or "/"), *parts[i:])


def command_line(value: Any) -> str:
    if isinstance(value, list):
        return shlex.join(str(v) for v in value)
    return str(value)


def host_is_public(host: str) -> bool:
    """False for literal non-public addresses (any inet_aton spelling) and local names."""
    host = host.rstrip(".").lower()
    if any(fnmatch.fnmatchcase(host, p) for p in LOCAL_NAMES):
        return False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:  # 127.1, 0x7f000001, 2130706433 …
            ip = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return True  # a name: resolved and checked again by the tool itself
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def host_matches(host: str, port: int | None, patterns: Iterable[str]) -> bool:
    for pat in patterns:
        pat = pat.strip().lower()
        if "/" in pat:
            try:
                if ipaddress.ip_address(host) in ipaddress.ip_network(pat, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if fnmatch.fnmatchcase(host, pat) or (port is not None and fnmatch.fnmatchcase(f"{host}:{port}", pat)):
            return True
    return False


@dataclass
class Requested:
    """The resources one call asks for."""

    paths: list[str] = field(default_factory=list)
    hosts: list[tuple[str, int | None]] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"paths": self.paths, "hosts": [h if p is None else f"{h}:{p}" for h, p in self.hosts],
                "commands": self.commands}


def requested(arguments: dict[str, Any], workspace: str, resolve: Callable[[str], str] | None = None) -> Requested:
    """The resources ``arguments`` name; paths resolved with ``resolve`` (default: :func:`real_path` against
    ``workspace``, which is read only then)."""
    req = Requested()
    for key, value in arguments.items():
        k = key.lower()
        values = value if isinstance(value, list) and k != "argv" and k not in COMMAND_ARGS else [value]
        if k in PATH_ARGS:
            for v in values:
                if isinstance(v, str) and v:
                    req.paths.append(resolve(v) if resolve is not None else real_path(v, workspace))
        elif k in URL_ARGS:
            for v in values:
                if not isinstance(v, str):
                    continue
                try:
                    parts = urlsplit(v.strip())
                    host, port = parts.hostname, parts.port
                except ValueError:
                    req.problems.append(f"invalid URL {v!r}")
                    continue
                if host:
                    req.hosts.append((host.rstrip(".").lower(), port))
        elif k in COMMAND_ARGS:
            req.commands.append(command_line(value))
    return req


def outside_paths(line: str, ws: str, allowed: Iterable[str] = ()) -> list[str]:
    """Arguments of a command line (or values of ``--opt=VALUE`` options) that name a path outside
    the workspace ``ws`` and the ``allowed`` grant patterns: absolute paths, ``~…``, anything with
    ``..``, and relative paths whose symlinks lead out."""
    try:
        words = shlex.split(line)
    except ValueError:
        return [line]  # unbalanced quotes: not something to pre-approve
    out = []
    for word in words[1:]:
        value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        if word.startswith("-") and "=" not in word:
            # -C/path, -o/path: an option glued to a path
            value = word[2:] if len(word) > 2 and word[1] != "-" and ("/" in word[2:] or word[2:3] in ("~", ".")) else ""
        if not value or not ("/" in value or value.startswith(("~", ".")) or value == ".."):
            continue
        real = real_path(value, ws)
        if is_within(real, ws) or any(pattern_covers(p, real) for p in allowed):
            continue
        out.append(real)
    return out


@dataclass
class Evaluation:
    """How a call's requests meet the default scope and the grants."""

    missing: list[str] = field(default_factory=list)  # human-readable, beyond every scope
    forbidden: list[str] = field(default_factory=list)
    step_grant: dict[str, list[str]] = field(default_factory=lambda: {"paths": [], "hosts": [], "commands": []})
    used_grants: list[int] = field(default_factory=list)
    preapproved: bool = False


def applicable(grants: Iterable[Grant], tool: str, workspace: str) -> list[tuple[int, Grant, list[str]]]:
    """The grants naming ``tool``: (index, grant, its path patterns made absolute)."""
    return [(i, g, [grant_path(p, workspace) for p in g.paths]) for i, g in enumerate(grants)
            if any(fnmatch.fnmatchcase(tool, p) for p in g.tools)]


def evaluate(req: Requested, grants: list[tuple[int, Grant, list[str]]], ws: str) -> Evaluation:
    """``ws`` is the workspace's real path (read only for a request naming a path or a command)."""
    ev = Evaluation()
    for path in req.paths:
        if any(is_within(path, r) for r in FORBIDDEN_ROOTS):
            ev.forbidden.append(f"{path} (device and kernel file systems are never granted)")
            continue
        if is_within(path, ws):
            continue
        hit = [i for i, _, paths in grants if any(pattern_covers(p, path) for p in paths)]
        if hit:
            ev.used_grants.extend(hit)
        else:
            ev.missing.append(f"path {path} (outside the workspace)")
            ev.step_grant["paths"].append(path)
    for host, port in req.hosts:
        hit = [i for i, g, _ in grants if host_matches(host, port, g.hosts)]
        if hit:
            ev.used_grants.extend(hit)
        elif not host_is_public(host):
            ev.missing.append(f"host {host} (not a public address)")
            ev.step_grant["hosts"].append(host if port is None else f"{host}:{port}")
    if req.commands:
        matched: list[int] = []
        for line in req.commands:
            if any(op in line for op in SHELL_OPERATORS):
                break  # "git status; rm -rf ~" must not ride on a "git status*" grant
            hit = [i for i, g, _ in grants if any(fnmatch.fnmatchcase(line, p) for p in g.commands)]
            if not hit:
                break
            allowed = [p for i, _, paths in grants if i in hit for p in paths]
            if outside_paths(line, ws, allowed):
                break  # "git diff --no-index /etc/hostname …" must not ride on a "git diff*" grant
            matched.extend(hit)
        else:
            ev.preapproved = True
            ev.used_grants.extend(matched)
    ev.used_grants = sorted(set(ev.used_grants))
    return ev
