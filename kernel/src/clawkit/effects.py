"""What a tool does, in the names skill manifests use (``fs.read``, ``fs.write``, ``shell.exec``,
``net.http``): one table for every gate that asks.

A skill's manifest grants or denies *capabilities*; the gates that enforce it — the Kernel Shield
on the agent's own calls, clawkit-subagents before a child is spawned with tools — must agree on
what each tool does. Each used to keep its own copy of the tool → capability map, and the copies
drifted. Now a tool's capability is, in order:

1. the agent's override (the shield's ``capability_map``: ``{my_deploy: shell.exec}``);
2. what the tool declared when it was registered (``@tool(capability="net.http")`` →
   :attr:`clawkit.types.ToolDef.capability`);
3. the standard tools' table below (so a plugin that provides ``read_file`` without declaring it
   is still read as ``fs.read``).

A tool with none of these has no capability: manifests do not govern it (the policy's risk
levels and allowlists still do).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

#: the standard tools' capabilities (clawkit-tools'). ``read_tool_output`` has none: it re-reads the
#: stored output of a call that already passed the gates (the sub-agents' copy once called it fs.read,
#: the shield's did not)
STANDARD: dict[str, str] = {
    "read_file": "fs.read",
    "list_dir": "fs.read",
    "glob": "fs.read",
    "grep": "fs.read",
    "write_file": "fs.write",
    "edit_file": "fs.write",
    "shell_exec": "shell.exec",
    "web_fetch": "net.http",
    "web_search": "net.http",
}

#: the names manifests use for the same capability
ALIASES: dict[str, set[str]] = {
    "fs.read": {"fs.read", "filesystem.read", "file.read", "files.read", "fs", "filesystem", "files", "read"},
    "fs.write": {"fs.write", "filesystem.write", "file.write", "files.write", "fs", "filesystem", "files", "write"},
    "shell.exec": {"shell.exec", "shell", "exec", "process.exec", "process.spawn", "command", "commands", "system.exec"},
    "net.http": {"net.http", "net.fetch", "net", "network", "network.http", "http", "https", "web", "web.fetch", "internet"},
}


def canonical(name: str) -> str:
    """``Net/HTTP``, ``net_http``, ``net http`` → ``net.http``."""
    return re.sub(r"[\s_:/-]+", ".", str(name).strip().lower())


def capability_of(name: str, definition: Any = None, overrides: Mapping[str, str] | None = None) -> str | None:
    """The capability of tool ``name`` (its :class:`~clawkit.types.ToolDef` when registered)."""
    if overrides and overrides.get(name):
        return canonical(overrides[name])
    declared = getattr(definition, "capability", None)
    if declared:
        return canonical(declared)
    return STANDARD.get(name)


def covers(names: Iterable[str], capability: str) -> bool:
    """Whether manifest names ``names`` (already lower-cased) name ``capability``."""
    return bool(set(names) & ALIASES.get(capability, {capability}))
