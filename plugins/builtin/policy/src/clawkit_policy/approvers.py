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

Each answers with a :class:`clawkit.approvals.Answer` naming who answered (the terminal's
login name, the callback's name) and the call hash the person was shown; the ledger's
chained approval record keeps both.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import unicodedata
from typing import Any, Awaitable, Callable, TextIO

from clawkit.approvals import Answer, call_hash, terminal_identity

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


#: this many blank (or whitespace-only) lines in a row, or copies of one line, are shown as a count
COLLAPSE_RUN = 3


def _script_lines(lines: list[str]) -> list[str]:
    """A script's lines for the prompt: runs of blank lines and of one repeated line collapsed into a
    visible count, so padding cannot push what runs after it off the page that asks."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        j = i + 1
        blank = not line.strip()
        while j < len(lines) and ((not lines[j].strip()) if blank else lines[j] == line):
            j += 1
        run = j - i
        if blank and run >= COLLAPSE_RUN:
            out.append(f"    | [… {run} blank lines …]")
        elif not blank and run >= COLLAPSE_RUN:
            out.append("    | " + escape_controls(line))
            out.append(f"    | [… the line above {run - 1} more times …]")
        else:
            out.extend("    | " + escape_controls(x) for x in lines[i:j])
        i = j
    return out


def render_arguments(arguments: dict[str, Any]) -> str:
    """One argument per line; a string with several lines (a script) shown line by line, so
    nothing hides at the end of one long line and a long script can be paged; blank-line padding
    and repeated lines shown as a count (see :func:`_script_lines`)."""
    out = []
    for key, value in arguments.items():
        name = escape_controls(str(key))
        if isinstance(value, str) and "\n" in value:
            lines = value.split("\n")
            out.append(f"  {name}: ({len(lines)} lines)")
            out.extend(_script_lines(lines))
        elif isinstance(value, str):
            out.append(f"  {name}: " + escape_controls(json.dumps(value, ensure_ascii=False)))
        else:
            out.append(f"  {name}: " + escape_controls(json.dumps(value, ensure_ascii=False, default=str)))
    return "\n".join(out) if out else "  (no arguments)"


QUESTION = "  allow? [y/N] "


def describe(call: Any, reason: str, ctx: Any = None, digest: str | None = None) -> str:
    """The approval question as a human reads it: the complete call (secrets redacted), every
    string argument in full, control characters escaped, padding counted, and the call hash the
    ledger records (:func:`clawkit.approvals.call_hash`)."""
    args = render_arguments(redact(dict(call.arguments)))
    risk = ""
    try:
        tool = ctx.tools.get(call.name) if ctx is not None else None
        if tool is not None:
            risk = f" [{tool.definition.risk.value}]"
    except Exception:
        pass
    digest = digest or call_hash(call.name, call.arguments)
    return (f"\n[approval] {escape_controls(str(call.name))}{risk}\n{args}\n  call hash: {digest}\n"
            f"  because: {escape_controls(str(reason))}\n{QUESTION}")


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
        digest = call_hash(call.name, call.arguments)
        ident = terminal_identity()
        who = f"terminal user {ident['user']}"
        text = describe(call, reason, ctx, digest)
        if len(text) > MAX_SHOWN:
            out.write(f"\n[approval] {escape_controls(str(call.name))}: this call is {len(text):,} characters long, too "
                      "long to show in full; refused.\n")
            out.flush()
            return Answer(False, f"{who} (not asked: the call is too long to show)", ident, digest)
        _discard_typeahead(inp)
        answer = await _ask(inp, out, text, escape_controls(str(call.name)), limit)
        # after a timeout the reader thread still holds an opened tty: it is closed when that thread ends
        if opened is not None:
            opened.close()
        return Answer(answer, who, ident, digest)

    approver.approver_name = "terminal"
    return approver


def _discard_typeahead(stream: TextIO) -> None:
    """Drop what was typed (or pasted) on the terminal before the question is shown: only a key pressed
    after seeing the call answers it."""
    try:
        import termios

        if stream.isatty():
            termios.tcflush(stream.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError, AttributeError):
        pass


async def _ask(inp: TextIO, out: TextIO, text: str, name: str, limit: float) -> bool:
    """Show ``text`` (the call, then the question) page by page: every line is shown before the question,
    and the page that asks ends the call. Between pages only Enter goes on; anything else (a ``y`` typed
    too early included) denies."""
    lines = text.split("\n")
    total = len(lines) - 2  # the call's lines (the question and the blank line before the call aside)
    if len(lines) > PAGE_LINES + 3:
        page = 0
        while len(lines) > PAGE_LINES + 3:
            page += 1
            out.write("\n".join(lines[:PAGE_LINES]) + "\n  -- more: Enter to see the rest, anything else denies -- ")
            out.flush()
            lines = lines[PAGE_LINES:]
            if (await _readline(inp, limit)).strip():
                return False
        out.write(f"[approval] {name}, last page: the call is {total} lines long, all of it shown on the "
                  f"{page + 1} pages up to this question\n")
    out.write("\n".join(lines))
    out.flush()
    answer = await _readline(inp, limit)
    return answer.strip().lower() in ("y", "yes")


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
        if isinstance(answer, Answer):
            return answer
        return Answer(answer is True, f"callback {name}", {"kind": "callback", "name": name},
                      call_hash(call.name, call.arguments))

    name = str(getattr(fn, "approver_name", None) or getattr(fn, "__qualname__", None) or type(fn).__name__)
    approver.approver_name = f"callback {name}"
    return approver


def deny_approver(call: Any, reason: str, ctx: Any) -> bool:
    """Always deny (what a non-interactive run does)."""
    return False


deny_approver.approver_name = "deny"  # type: ignore[attr-defined]
