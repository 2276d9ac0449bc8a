"""What ``clawkit chat`` shows of the agent's work: one dim line per tool call by default
(its name, a short form of the arguments, the outcome and the result's size), the whole call
and result after ``/verbose`` (typed alone; again to go back).

The lines come from the turn itself: every executed call's ``tool_result_display`` (quiet by
default: the kernel cancels it, this observer reads it in ``message_sending`` whatever its state),
and the ``tool.blocked`` / ``tool.approval`` events for calls that never ran. What the model wrote
is escaped before it reaches the terminal (control and format characters as ``\\u{XXXX}``).
"""

from __future__ import annotations

import json
import sys
import unicodedata
from typing import Any

from ..context import current_call
from ..hookspecs import hookimpl, on_events

DIM, RESET = "\x1b[2m", "\x1b[0m"
ARG_CHARS, LINE_ARGS, DETAIL_CHARS = 32, 90, 2000


def printable(text: str) -> str:
    """``text`` safe for a terminal: control, format, surrogate and private-use characters (escape
    sequences, bidi overrides, zero-width tricks) shown as ``\\u{XXXX}``; newlines kept."""
    out = []
    for ch in text:
        if ch == "\n" or (ch != "\t" and not unicodedata.category(ch).startswith("C")):
            out.append(ch)
        else:
            out.append(f"\\u{{{ord(ch):04X}}}")
    return "".join(out)


def short_args(arguments: Any) -> str:
    """``path=".", limit=20``: each value cut to a few characters, the whole to one short line."""
    if not isinstance(arguments, dict):
        return _cut(json.dumps(arguments, default=str), LINE_ARGS)
    parts = [f"{k}={_cut(json.dumps(v, ensure_ascii=False, default=str), ARG_CHARS)}" for k, v in arguments.items()]
    return _cut(", ".join(parts), LINE_ARGS)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())  # one line
    return text if len(text) <= limit else text[: limit - 1] + "…"


def size(text: str) -> str:
    n = len(text.encode("utf-8", "replace"))
    lines = text.count("\n") + 1 if text else 0
    amount = f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1048576:.1f} MB"
    return f"{lines} line{'s' if lines != 1 else ''}, {amount}"


def summary(name: str, arguments: Any, outcome: str) -> str:
    return printable(f"· {name}({short_args(arguments)}) → {outcome}")


class ChatLines:
    """The chat's observer plugin and its writer: ``deliver`` wraps the chat's stdout delivery."""

    def __init__(self, deliver: Any, *, interactive: bool) -> None:
        self._deliver = deliver
        self.interactive = interactive
        self.verbose = False
        self.session_id: str | None = None  # the chat's current session: its own turns only
        self.at_line_start = True

    # --- output ------------------------------------------------------------------------------

    def deliver(self, outbound: Any) -> None:
        if outbound.kind in ("tool_call_display", "tool_result_display"):
            self._detail(outbound)
            return
        self._deliver(outbound)
        content = outbound.content if outbound.kind == "stream_chunk" else "\n"
        if content:
            self.at_line_start = content.endswith("\n")

    def started(self, prompt_written: bool) -> None:
        """A turn begins (after ``agent> ``, when it was written)."""
        self.at_line_start = not prompt_written

    def line(self, text: str) -> None:
        """One dim line: on the terminal's stdout, or plain on stderr when the chat is piped
        (a script reading the replies gets only the replies)."""
        if not self.interactive:
            print(text, file=sys.stderr, flush=True)
            return
        lead = "" if self.at_line_start else "\n"
        try:
            sys.stdout.write(f"{lead}{DIM}{text}{RESET}\n")
            sys.stdout.flush()
        except BrokenPipeError:
            return
        self.at_line_start = True

    def toggle(self) -> str:
        self.verbose = not self.verbose
        return ("[verbose: each tool call with its arguments and result; /verbose again for one line a call]"
                if self.verbose else "[one line a tool call; /verbose shows the whole call and result]")

    def _detail(self, outbound: Any) -> None:
        call = outbound.metadata.get("call")
        name = getattr(call, "name", "?")
        if outbound.kind == "tool_call_display":
            args = json.dumps(getattr(call, "arguments", {}), ensure_ascii=False, indent=2, default=str)
            self.line(printable(f"→ {name} {args}"))
            return
        res = outbound.metadata.get("result")
        text = getattr(res, "content", outbound.content) or ""
        more = len(text) - DETAIL_CHARS
        shown = text[:DETAIL_CHARS] + (f"\n[… {more:,} more characters]" if more > 0 else "")
        state = "error" if getattr(res, "is_error", False) else "ok"
        self.line(printable(f"← {name} ({state}, {size(text)})\n{shown}"))

    # --- hooks -------------------------------------------------------------------------------

    def _mine(self, ctx: Any) -> bool:
        session = getattr(ctx, "session", None)
        return self.session_id is not None and getattr(session, "id", None) == self.session_id

    @hookimpl(trylast=True)
    def message_sending(self, ctx, outbound) -> None:
        if outbound.kind not in ("tool_call_display", "tool_result_display") or not self._mine(ctx):
            return None
        if self.verbose:
            outbound.cancelled = False  # the whole call and result, through deliver (_detail)
            return None
        # a display a plugin un-cancelled (clawkit-directives' /verbose on|full) is shown in full by
        # deliver; the one line is for a result nobody shows
        if outbound.kind == "tool_result_display" and outbound.cancelled:
            call, res = outbound.metadata.get("call"), outbound.metadata.get("result")
            text = getattr(res, "content", outbound.content) or ""
            if getattr(res, "is_error", False):
                outcome = f"error: {_cut(text.removeprefix('Error: '), 60)}"
            else:
                outcome = f"ok, {size(text)}"
            self.line(summary(getattr(call, "name", "?"), getattr(call, "arguments", {}), outcome))
        return None

    @hookimpl
    @on_events("tool.blocked", "tool.approval")
    def on_event(self, event) -> None:
        if event.type not in ("tool.blocked", "tool.approval") or self.session_id is None \
                or event.session_id not in (None, self.session_id):
            return
        data = event.data
        if event.type == "tool.approval":
            self.at_line_start = True  # the approver's question ended its line
            if data.get("approved"):
                return
        call = current_call.get()
        args = getattr(call, "arguments", {}) if call is not None and getattr(call, "id", None) == data.get("call_id") else {}
        why = data.get("reason") or ""
        outcome = ("denied" if event.type == "tool.approval" else "blocked") + (f": {_cut(str(why), 60)}" if why else "")
        self.line(summary(str(data.get("tool", "?")), args, outcome))
