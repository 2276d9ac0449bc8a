"""Approvers by name: the kernel's plain ``terminal`` and ``deny``, and those plugins
register through ``register_approvers``. Front-ends pick one by name, so none of them
imports the plugin that provides it (the policy plugin replaces ``terminal`` with one that
times out and redacts arguments; an HTTP server registers its own).

An approver returns a bool, or an :class:`Answer` that also says who answered and which
call hash (:func:`call_hash`) the person was shown; the kernel puts both in the
``tool.approval`` event (``by``, ``approver``, ``call_hash``), which the audit ledger records."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

Approver = Callable[..., Any]


def _canonical_encoder() -> Callable[[Any], str]:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)`` with the
    C encoder built once (``dumps`` builds one per call; the gate hashes every call). Same text."""
    py = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    try:
        from json.encoder import c_encode_basestring, c_make_encoder  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - CPython always has _json
        return py.encode
    if c_make_encoder is None or c_encode_basestring is None:  # pragma: no cover
        return py.encode
    enc = c_make_encoder(None, py.default, c_encode_basestring, None, ":", ",", True, False, True)
    return lambda value: "".join(enc(value, 0))


_CANONICAL = _canonical_encoder()


def call_hash(name: str, arguments: dict[str, Any]) -> str:
    """THE hash of a tool call, the one every approval binds to: SHA-256 of the tool name, a newline
    and the arguments as canonical JSON (sorted keys, no spaces, UTF-8, ``str()`` for other values).
    The policy's ledger, a terminal prompt and a server's approvals API all show this value."""
    canon = _CANONICAL(arguments)
    return hashlib.sha256(f"{name}\n{canon}".encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Answer:
    """An approver's answer with who gave it: ``by`` a short phrase ("terminal user alice",
    "key 1a2b3c4d (ci)", "callback review"), ``identity`` the same as fields (``kind`` first:
    ``terminal`` + ``user``, ``api_key`` + ``key_id`` + ``key_name``, ``callback`` + ``name``), and
    ``call_hash`` the hash the person was shown (None when none was shown). Truthy when approved."""

    approved: bool
    by: str
    identity: dict[str, Any] = field(default_factory=dict)
    call_hash: str | None = None

    def __bool__(self) -> bool:
        return self.approved is True


def login_name() -> str:
    """The login name of the user running this process (from the password database, not the environment)."""
    try:
        import os
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, OSError):
        import getpass

        try:
            return getpass.getuser()
        except Exception:
            return "unknown"


def terminal_identity() -> dict[str, Any]:
    import os

    ident: dict[str, Any] = {"kind": "terminal", "user": login_name()}
    try:
        ident["tty"] = os.ttyname(0)
    except OSError:
        pass
    return ident


def terminal_approver(call: Any, reason: str, ctx: Any) -> Answer | bool:
    """Ask on the controlling terminal; anything but y/yes denies; no terminal denies."""
    digest = call_hash(call.name, call.arguments)
    try:
        with open("/dev/tty", "r+") as tty:
            tty.write(f"\n[approval] {call.name}({json.dumps(call.arguments)})\n  call: {digest}\n  because: {reason}\n"
                      "  allow? [y/N] ")
            tty.flush()
            ok = tty.readline().strip().lower() in ("y", "yes")
    except OSError:
        return False
    ident = terminal_identity()
    return Answer(ok, f"terminal user {ident['user']}", ident, digest)


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
