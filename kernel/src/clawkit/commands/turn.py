"""Opening an agent for a command-line turn and writing its reply to stdout: shared by
``clawkit run`` (:mod:`.core`) and ``clawkit chat`` (:mod:`.chat`), which import this module
rather than each other."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..cliopts import overrides_from
from ..errors import UsageError
from ..hookspecs import hookimpl

CHAT_HELP = ("commands: /quit, /session, /new, /attach PATH_OR_URL (sent with your next message), /verbose (tool calls "
             "in full, or one line each), /help — directives like /think high are passed to plugins")


class StderrNotices:
    """The CLI's own observer: one short stderr line per model retry, not only under ``-v``
    (a script or a person otherwise sees seconds of silence while the call is retried)."""

    @hookimpl
    def on_event(self, event) -> None:
        if event.type == "llm.retry":
            line = event.data.get("line") or f"model call failed ({event.data.get('error', '')}); retrying"
            print(f"clawkit: {line}", file=sys.stderr, flush=True)
        elif event.type == "llm.fallback":  # docs/fallbacks.md
            print(f"clawkit: {event.data.get('line') or 'falling back to ' + str(event.data.get('to_model'))}",
                  file=sys.stderr, flush=True)


def _open(args, approver: Any = None, extra: tuple = (), more: dict[str, Any] | None = None):
    from ..runtime import load_config, open_agent

    if not Path(args.agent).is_file():
        raise UsageError(f"{args.agent}: no such agent file")
    overrides = {**overrides_from(args), **(more or {})}
    cfg, _ = load_config(args.agent, overrides, pm=args.pm)
    workspace = Path(cfg.workspace)
    if not workspace.is_dir():
        if not getattr(args, "create_workspace", False):
            raise UsageError(f"{args.agent}: workspace {workspace} does not exist "
                             f"(create it, or pass --create-workspace)")
        workspace.mkdir(parents=True)
    agent = open_agent(args.agent, overrides, approver=approver, extra_plugins=(StderrNotices(), *extra))
    try:
        _check_session(agent, args)
    except BaseException:
        agent.close()
        raise
    return agent


def _check_session(agent, args) -> None:
    """``--session`` must name an existing session; ``--new-session`` one that does not exist yet."""
    sid, new = getattr(args, "session", None), getattr(args, "new_session", None)
    if sid and not agent.store.exists(sid):
        raise UsageError(f"--session {sid}: no such session in {agent.store.path} "
                         f"(see `clawkit sessions list`; --new-session {sid} starts one with this id)")
    if new and agent.store.exists(new):
        raise UsageError(f"--new-session {new}: a session with this id exists already (resume it with --session)")


def session_arg(args) -> str | None:
    return getattr(args, "session", None) or getattr(args, "new_session", None)


def _write(text: str) -> None:
    """Write and flush stdout; once the reader has gone (``| head``) the rest is dropped
    quietly and the turn still completes (and is stored)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        from ..cliopts import quiet_stdout

        quiet_stdout()


def _stdout_deliver(outbound) -> None:
    if outbound.kind == "stream_chunk":
        _write(outbound.content)
    elif outbound.kind == "final_reply":
        _write(("" if outbound.metadata.get("streamed") else outbound.content) + "\n")
    else:  # notices, routed messages, tool displays a plugin chose to show
        _write(f"\n[{outbound.kind}] {outbound.content}\n")
