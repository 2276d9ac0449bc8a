"""Approvers: who answers when a gate asks for approval.

The kernel asks ``request_approval`` hooks first, then the Agent's ``approver``
callback, and denies when there is none (a non-interactive run). These are
ready-made approvers for ``Agent(config, approver=...)`` /
``open_agent(path, approver=...)``:

* :func:`terminal_approver` — asks on the controlling terminal (``clawkit chat``);
  denies when there is no terminal; gives up after the policy's
  ``approval_timeout``.
* :func:`callback_approver` — wraps your function (sync or async) with a timeout.
* :func:`deny_approver` — always no.

An approver that times out raises :class:`ApprovalTimeout`; the kernel turns it
into a denial and the model is told, e.g. ``not approved (…); approval was denied
by approver (failed: no answer within 120 s)``.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import unicodedata
from typing import Any, Awaitable, Callable, TextIO

from .redact import redact

DEFAULT_TIMEOUT = 120.0


class ApprovalTimeout(Exception):
    """Nobody answered the approval request in time."""


def _timeout(ctx: Any, override: float | None) -> float:
    if override is not None:
        return override
    try:
        cfg = ctx.plugin_config("policy")
        return float(getattr(cfg, "approval_timeout", DEFAULT_TIMEOUT))
    except Exception:
        return DEFAULT_TIMEOUT


#: a call whose description is longer than this is not shown: it is refused (nobody reads 100 pages)
MAX_SHOWN = 100_000
#: lines per page on the terminal
PAGE_LINES = 40
_SPACE_RUN = re.compile(r"[ \t]{16,}")


def escape_controls(text: str) -> str:
    """``text`` safe to print on a terminal: control, format (bidi, zero-width), separator and
    surrogate characters shown as ``\\u{XXXX}``; long runs of blanks shown as a count, so padding
    cannot push part of a command out of sight."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if (cat in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn") and ch != "\n") or "\x80" <= ch <= "\x9f":
            out.append(f"\\u{{{ord(ch):04X}}}")
        else:
            out.append(ch)
    return _SPACE_RUN.sub(lambda m: f" [… {len(m.group())} blanks …] ", "".join(out))


def render_arguments(arguments: dict[str, Any]) -> str:
    """One argument per line; a string with several lines (a script) shown line by line, so
    nothing hides at the end of one long line and a long script can be paged."""
    out = []
    for key, value in arguments.items():
        name = escape_controls(str(key))
        if isinstance(value, str) and "\n" in value:
            lines = value.split("\n")
            out.append(f"  {name}: ({len(lines)} lines)")
            out.extend("    | " + escape_controls(line) for line in lines)
        elif isinstance(value, str):
            out.append(f"  {name}: " + escape_controls(json.dumps(value, ensure_ascii=False)))
        else:
            out.append(f"  {name}: " + escape_controls(json.dumps(value, ensure_ascii=False, default=str)))
    return "\n".join(out) if out else "  (no arguments)"


def describe(call: Any, reason: str, ctx: Any = None) -> str:
    """The approval question as a human reads it: the complete call (secrets redacted), every
    string argument in full, control characters escaped."""
    args = render_arguments(redact(dict(call.arguments)))
    risk = ""
    try:
        tool = ctx.tools.get(call.name) if ctx is not None else None
        if tool is not None:
            risk = f" [{tool.definition.risk.value}]"
    except Exception:
        pass
    return f"\n[approval] {escape_controls(str(call.name))}{risk}\n{args}\n  because: {escape_controls(str(reason))}\n  allow? [y/N] "


async def _readline(stream: TextIO, timeout: float) -> str:
    """Read one line in a daemon thread (so an unanswered prompt never blocks interpreter exit)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[str] = loop.create_future()

    def settle(fn: Callable[[], Any]) -> None:
        try:
            loop.call_soon_threadsafe(fn)
        except RuntimeError:  # the loop closed after a timeout: nobody is waiting any more
            pass

    def read() -> None:
        try:
            line = stream.readline()
        except Exception as exc:  # closed terminal
            settle(lambda err=exc: fut.done() or fut.set_exception(err))  # exc is unbound after except
            return
        settle(lambda: fut.done() or fut.set_result(line))

    threading.Thread(target=read, name="clawkit-approval", daemon=True).start()
    try:
        return await asyncio.wait_for(fut, timeout)
    except asyncio.TimeoutError:
        raise ApprovalTimeout(f"no answer within {timeout:g} s") from None


def make_terminal_approver(stdin: TextIO | None = None, stdout: TextIO | None = None, timeout: float | None = None):
    """A terminal approver on the given streams (default: ``/dev/tty``, else stdin/stderr if a terminal)."""

    async def approver(call: Any, reason: str, ctx: Any) -> bool:
        limit = _timeout(ctx, timeout)
        inp, out, opened = stdin, stdout, None
        if inp is None:
            try:
                opened = open("/dev/tty", "r+", encoding="utf-8")
                inp = out = opened
            except OSError:
                if not (sys.stdin and sys.stdin.isatty()):
                    return False  # nobody can answer
                inp, out = sys.stdin, sys.stderr
        out = out or sys.stderr
        text = describe(call, reason, ctx)
        if len(text) > MAX_SHOWN:
            out.write(f"\n[approval] {escape_controls(str(call.name))}: this call is {len(text):,} characters long, too "
                      "long to show in full; refused.\n")
            out.flush()
            return False
        lines = text.split("\n")
        # page a long call: every line is shown before the question is asked
        while len(lines) > PAGE_LINES + 3:
            out.write("\n".join(lines[:PAGE_LINES]) + "\n  -- more: Enter to see the rest, n to deny -- ")
            out.flush()
            lines = lines[PAGE_LINES:]
            if (await _readline(inp, limit)).strip().lower() in ("n", "no", "q"):
                return False
        out.write("\n".join(lines))
        out.flush()
        # after a timeout the reader thread still holds an opened tty: it is closed when that thread ends
        answer = await _readline(inp, limit)
        if opened is not None:
            opened.close()
        return answer.strip().lower() in ("y", "yes")

    return approver


terminal_approver = make_terminal_approver()
terminal_approver.__doc__ = "Ask on the controlling terminal; deny without one; time out after ``approval_timeout``."


def callback_approver(fn: Callable[[Any, str, Any], "bool | Awaitable[bool]"], timeout: float | None = None):
    """Wrap ``fn(call, reason, ctx) -> bool`` (sync or async) as an approver with a timeout.

    A sync ``fn`` runs in a thread so a slow answer cannot stall the agent's loop.
    """

    async def approver(call: Any, reason: str, ctx: Any) -> bool:
        limit = _timeout(ctx, timeout)
        if asyncio.iscoroutinefunction(fn):
            pending = fn(call, reason, ctx)
        else:
            pending = asyncio.to_thread(fn, call, reason, ctx)
        try:
            answer = await asyncio.wait_for(pending, limit)
        except asyncio.TimeoutError:
            raise ApprovalTimeout(f"no answer within {limit:g} s") from None
        if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future):
            answer = await asyncio.wait_for(answer, limit)
        return answer is True

    return approver


def deny_approver(call: Any, reason: str, ctx: Any) -> bool:
    """Always deny (what a non-interactive run does)."""
    return False
