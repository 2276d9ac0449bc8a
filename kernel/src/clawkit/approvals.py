"""Approvers by name: the kernel's plain ``terminal`` and ``deny``, and those plugins
register through ``register_approvers``. Front-ends pick one by name, so none of them
imports the plugin that provides it (the policy plugin replaces ``terminal`` with one that
times out and redacts arguments; an HTTP server registers its own)."""

from __future__ import annotations

import json
from typing import Any, Callable

Approver = Callable[..., Any]


def terminal_approver(call: Any, reason: str, ctx: Any) -> bool:
    """Ask on the controlling terminal; anything but y/yes denies; no terminal denies."""
    try:
        with open("/dev/tty", "r+") as tty:
            tty.write(f"\n[approval] {call.name}({json.dumps(call.arguments)})\n  because: {reason}\n  allow? [y/N] ")
            tty.flush()
            return tty.readline().strip().lower() in ("y", "yes")
    except OSError:
        return False


def deny_approver(call: Any, reason: str, ctx: Any) -> bool:
    """Always no (what a non-interactive run does)."""
    return False


def collect_approvers(hooks: Any) -> dict[str, Approver]:
    """The kernel's approvers overridden by the plugins' (first plugin in hook order wins)."""
    found: dict[str, Approver] = {}

    def register(name: str, approver: Approver) -> None:
        found.setdefault(name, approver)

    if hooks.has("register_approvers"):
        hooks.call_sync("register_approvers", register=register)
    return {"terminal": terminal_approver, "deny": deny_approver, **found}


def resolve_approver(hooks: Any, approver: "str | Approver | None") -> Approver | None:
    """A callable approver from a name (``"terminal"``), a callable, or None."""
    if approver is None or callable(approver):
        return approver
    approvers = collect_approvers(hooks)
    if approver not in approvers:
        from .errors import UsageError

        raise UsageError(f"unknown approver {approver!r} (registered: {', '.join(sorted(approvers))})")
    return approvers[approver]
