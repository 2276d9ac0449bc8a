"""``clawkit chat``: one message per line, each turn on one long-lived event loop.

Ctrl-C while a reply streams cancels that reply (stored, marked interrupted) and
returns to the prompt; Ctrl-C at an empty prompt, Ctrl-D or ``/quit`` leaves; SIGTERM
leaves from anywhere (exit 143). Each turn runs through ``asyncio.Runner.run``, whose
SIGINT handling cancels the running task instead of killing the loop, so the next
message is answered on the same loop and the agent is closed (plugins' threads
joined) on every path.

On a terminal the chat turns on *bracketed paste* (``ESC[?2004h``): the terminal wraps
pasted text in ``ESC[200~`` … ``ESC[201~``. A paste is one message, however many lines it
has (sent when the person presses Enter), and its text is marked as pasted (message
metadata ``pasted``: the pasted pieces), so plugins never take a line of it for a command
a person typed — a ``/elevated on`` inside a paste elevates nothing.
"""

from __future__ import annotations

import asyncio
import sys

from ..attachments import AttachmentError
from ..cliopts import EXIT_OK, terminated
from ..hookspecs import hook_order, hookimpl
from .turn import CHAT_HELP, _open, _stdout_deliver, _write, session_arg
from .chatlines import ChatLines

PASTE_ON, PASTE_OFF = "\x1b[?2004h", "\x1b[?2004l"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


class Typed(str):
    """A message as read: the text, and ``pasted``, the pieces of it that were pasted."""

    pasted: list[str]

    def __new__(cls, text: str, pasted: list[str] | None = None) -> "Typed":
        obj = super().__new__(cls, text)
        obj.pasted = list(pasted or [])
        return obj


def split_paste(raw: str) -> tuple[str, list[str], bool]:
    """``raw`` (lines read so far, bracketed-paste markers in it) as (text, pasted pieces, inside a
    paste still). A marker left open means the paste goes on past the end of the line."""
    text, pieces, inside, pos = [], [], False, 0
    while pos < len(raw):
        marker = PASTE_END if inside else PASTE_START
        at = raw.find(marker, pos)
        chunk = raw[pos:] if at < 0 else raw[pos:at]
        if inside:
            pieces.append(chunk)
        text.append(chunk)
        if at < 0:
            break
        inside = not inside
        pos = at + len(marker)
    # a stray end marker, or one of another kind, is not text either
    joined = "".join(text).replace(PASTE_END, "").replace(PASTE_START, "")
    return joined, [p.replace(PASTE_END, "").replace(PASTE_START, "") for p in pieces], inside


def _read_line(interactive: bool) -> str | None:
    """The next message; None to leave. At an interactive prompt, Ctrl-C with text typed
    clears the line (as a shell does) and Ctrl-C on an empty line leaves. On a terminal, a
    paste (however many lines) is one message, a :class:`Typed` naming what was pasted."""
    if not interactive:
        line = sys.stdin.readline()
        return None if line == "" else line
    while True:
        try:
            _write("you> ")
            raw = sys.stdin.readline()
            if raw == "":
                print()
                return None
            while True:
                text, pieces, inside = split_paste(raw)
                if not inside:
                    break
                more = sys.stdin.readline()  # the paste goes on: its lines are one message
                if more == "":
                    break
                raw += more
            stripped = text.strip()
            pasted = [p.strip() for p in pieces if p.strip()]
            return Typed(stripped, pasted) if pasted else stripped
        except KeyboardInterrupt:
            if terminated():
                raise
            typed = _typed_text()
            print()
            if not typed:
                return None


def _typed_text() -> str:
    readline = sys.modules.get("readline")  # only when something already uses it: never imported here
    try:
        return readline.get_line_buffer() if readline is not None else ""
    except AttributeError:
        return ""


class PastedInput:
    """Marks the chat's next message with what was pasted into it (message metadata ``pasted``), for
    ``message_received`` plugins (directives) to treat as data. Not for a sub-agent's messages."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    @hookimpl
    @hook_order(5)
    def message_received(self, ctx, message):
        if self.pieces and getattr(ctx, "parent_run_id", None) is None:
            message.metadata["pasted"] = list(self.pieces)
        return None


class _PasteMode:
    """Bracketed paste on the terminal while the chat runs (and ECHOCTL off, so the markers
    are not echoed as ``^[[200~``); both restored on every way out."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.saved = None

    def __enter__(self) -> "_PasteMode":
        if not self.on:
            return self
        try:
            import termios

            fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(fd)
            attrs = termios.tcgetattr(fd)
            attrs[3] &= ~getattr(termios, "ECHOCTL", 0)
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
        except (ImportError, OSError, ValueError, AttributeError):
            self.saved = None
        self._tell(PASTE_ON)
        return self

    def _tell(self, sequence: str) -> None:
        """To the terminal itself (stdout may be a file: ``clawkit chat a.yaml > log``)."""
        try:
            with open("/dev/tty", "w") as tty:
                tty.write(sequence)
        except OSError:
            if sys.stdout.isatty():
                _write(sequence)

    def __exit__(self, *exc) -> None:
        if not self.on:
            return
        self._tell(PASTE_OFF)
        if self.saved is not None:
            try:
                import termios

                termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, self.saved)
            except (OSError, ValueError):
                pass


def _interrupted_note(agent, session_id: str) -> str | None:
    """Resuming a session whose last reply was cut off: say so."""
    last = next((m for m in reversed(agent.session(session_id).history) if m.role == "assistant"), None)
    if last is not None and last.metadata.get("interrupted"):
        reason = last.metadata.get("interrupted_reason", "interrupted")
        return f"[the last reply in this session was interrupted ({reason}); the model sees it as partial]"
    return None


def _attach(agent, item: str, queued: list) -> None:
    """``/attach PATH_OR_URL``: a local file is read and checked now (type, size, a model that takes
    images) and sent with the next message; a URL is fetched, through the gates, with it."""
    from ..attachments import describe, prepare

    if not item:
        _write("usage: /attach PATH_OR_URL — " + (f"{len(queued)} attachment(s) queued" if queued else "nothing queued") + "\n")
        return
    try:
        got = prepare([item], agent.config)[0]
    except AttachmentError as exc:
        print(f"clawkit: {exc}", file=sys.stderr)
        return
    queued.append(got)
    _write(f"[attached {describe(got) if not isinstance(got, str) else got}; sent with your next message]\n")


def cmd_chat(args) -> int:
    interactive = sys.stdin.isatty()
    # by name: the kernel's plain prompt, or whichever plugin registered a better "terminal"
    pasted = PastedInput()
    lines = ChatLines(_stdout_deliver, interactive=interactive)  # one dim line per tool call; /verbose: all of it
    agent = _open(args, approver="terminal" if interactive else None, extra=(pasted, lines))
    agent.channel = "chat" if interactive else "pipe"  # plugins accept some things (/elevated) only from a person
    session_id = None
    queued: list = []  # /attach: checked at once, sent with the next message
    paste_mode = _PasteMode(interactive)
    try:
        paste_mode.__enter__()
        session_id = lines.session_id = agent.session(session_arg(args)).id
        if interactive:
            print(f"clawkit chat — agent {agent.config.name}, session {session_id}. {CHAT_HELP}")
        note = _interrupted_note(agent, session_id) if args.session else None
        if note:
            print(note, file=sys.stderr)
        with asyncio.Runner() as runner:
            while True:
                line = _read_line(interactive)
                if line is None:
                    break
                text = line.strip()
                pasted.pieces = list(getattr(line, "pasted", []))
                if not text:
                    continue
                command = None if pasted.pieces else text  # a paste is a message, never a chat command
                if command in ("/quit", "/exit"):
                    break
                if command == "/session":
                    _write(session_id + "\n")
                    continue
                if command == "/new":
                    session_id = lines.session_id = agent.session(None).id
                    _write(f"new session {session_id}\n")
                    continue
                if command == "/verbose":  # typed alone; /verbose on|full|off still go to clawkit-directives
                    _write(lines.toggle() + "\n")
                    continue
                if command == "/help":
                    _write(CHAT_HELP + "\n")
                    continue
                if command is not None and (command == "/attach" or command.startswith("/attach ")):
                    _attach(agent, command[len("/attach"):].strip(), queued)
                    continue
                if interactive:
                    _write("agent> ")
                lines.started(prompt_written=interactive)
                try:
                    extra = {"attachments": list(queued)} if queued else {}
                    queued.clear()
                    runner.run(agent.turn(text, session_id=session_id, deliver=lines.deliver, **extra))
                except AttachmentError as exc:
                    print(f"clawkit: {exc}", file=sys.stderr)
                except KeyboardInterrupt:
                    if terminated():
                        raise
                    _write("\n")
                    print("[reply cancelled; what arrived is stored, marked interrupted]", file=sys.stderr)
            runner.run(agent.drain(timeout=5.0))  # a classification still running shapes the next session
    finally:
        paste_mode.__exit__()
        agent.close()
        if session_id:
            print(f"[session {session_id}]", file=sys.stderr)
    return EXIT_OK
