"""``clawkit chat``: one message per line, each turn on one long-lived event loop.

Ctrl-C while a reply streams cancels that reply (stored, marked interrupted) and
returns to the prompt; Ctrl-C at an empty prompt, Ctrl-D or ``/quit`` leaves; SIGTERM
leaves from anywhere (exit 143). Each turn runs through ``asyncio.Runner.run``, whose
SIGINT handling cancels the running task instead of killing the loop, so the next
message is answered on the same loop and the agent is closed (plugins' threads
joined) on every path.
"""

from __future__ import annotations

import asyncio
import sys

from ..cli import EXIT_OK, terminated
from .core import CHAT_HELP, _open, _stdout_deliver, _write, session_arg


def _read_line(interactive: bool) -> str | None:
    """The next message; None to leave. At an interactive prompt, Ctrl-C with text typed
    clears the line (as a shell does) and Ctrl-C on an empty line leaves."""
    if not interactive:
        line = sys.stdin.readline()
        return None if line == "" else line
    while True:
        try:
            return input("you> ")
        except EOFError:
            print()
            return None
        except KeyboardInterrupt:
            if terminated():
                raise
            typed = _typed_text()
            print()
            if not typed:
                return None


def _typed_text() -> str:
    try:
        import readline

        return readline.get_line_buffer()
    except (ImportError, AttributeError):
        return ""


def _interrupted_note(agent, session_id: str) -> str | None:
    """Resuming a session whose last reply was cut off: say so."""
    last = next((m for m in reversed(agent.session(session_id).history) if m.role == "assistant"), None)
    if last is not None and last.metadata.get("interrupted"):
        reason = last.metadata.get("interrupted_reason", "interrupted")
        return f"[the last reply in this session was interrupted ({reason}); the model sees it as partial]"
    return None


def cmd_chat(args) -> int:
    interactive = sys.stdin.isatty()
    # by name: the kernel's plain prompt, or whichever plugin registered a better "terminal"
    agent = _open(args, approver="terminal" if interactive else None)
    agent.channel = "chat" if interactive else "pipe"  # plugins accept some things (/elevated) only from a person
    session_id = None
    try:
        session_id = agent.session(session_arg(args)).id
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
                if not text:
                    continue
                if text in ("/quit", "/exit"):
                    break
                if text == "/session":
                    _write(session_id + "\n")
                    continue
                if text == "/new":
                    session_id = agent.session(None).id
                    _write(f"new session {session_id}\n")
                    continue
                if text == "/help":
                    _write(CHAT_HELP + "\n")
                    continue
                if interactive:
                    _write("agent> ")
                try:
                    runner.run(agent.turn(text, session_id=session_id, deliver=_stdout_deliver))
                except KeyboardInterrupt:
                    if terminated():
                        raise
                    _write("\n")
                    print("[reply cancelled; what arrived is stored, marked interrupted]", file=sys.stderr)
            runner.run(agent.drain(timeout=5.0))  # a classification still running shapes the next session
    finally:
        agent.close()
        if session_id:
            print(f"[session {session_id}]", file=sys.stderr)
    return EXIT_OK
