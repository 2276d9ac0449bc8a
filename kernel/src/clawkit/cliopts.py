"""What the ``clawkit`` command line and its commands share: exit codes, the agent and workspace
options, SIGTERM handling. Its own module so that :mod:`clawkit.cli` (which builds the parser
from the commands) and :mod:`clawkit.commands` (which use these) do not import each other;
``clawkit.cli`` re-exports every name for plugins.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from .errors import UsageError

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_MODEL, EXIT_INTERRUPTED = 0, 1, 2, 3, 4
EXIT_BUDGET = 5  # a hard budget (tokens, cost, calls, wall time) stopped the run; the session can continue
EXIT_OUTPUT = 6  # typed output: the answer did not match the output schema after every retry
EXIT_SIGINT, EXIT_SIGTERM = 130, 143


def add_agent_options(p: argparse.ArgumentParser) -> None:
    """The cascade's CLI layer: ``--model``, ``--workspace``, ``--set key.path=value``."""
    p.add_argument("--model", help="override the agent's model (litellm model string)")
    p.add_argument("--workspace", help="override the agent's workspace directory")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key, e.g. --set limits.max_tool_rounds=3 (repeatable)")
    p.add_argument("--create-workspace", action="store_true", help="create the agent's workspace if it does not exist")
    p.add_argument("--db", metavar="PATH|URL", default=argparse.SUPPRESS,
                   help="the session database: a SQLite file or a postgresql:// URL (default: the agent's state_db)")


def add_workspace_options(parser: argparse.ArgumentParser) -> None:
    """``--agent AGENT.yaml`` and ``--db PATH`` on ``parser`` and on every subcommand under it.

    For commands that read a workspace's state (sessions, skills, memory, audit…): call it
    once the subcommands exist, and read the result with :func:`workspace_db` /
    :func:`workspace_config`. The options default to "not given" (``argparse.SUPPRESS``),
    so ``clawkit --db PATH sessions list`` and ``clawkit sessions list --db PATH`` agree.
    """
    parsers, i = [parser], 0
    while i < len(parsers):
        for action in parsers[i]._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(p for p in action.choices.values() if p not in parsers)
        i += 1
    for p in parsers:
        given = {o for a in p._actions for o in a.option_strings}
        if "--agent" not in given:
            p.add_argument("--agent", metavar="AGENT.yaml", default=argparse.SUPPRESS,
                           help="use this agent's workspace (its state_db, settings)")
        if "--db" not in given:
            p.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS,
                           help="the session database (default: the --agent's, else .clawkit/state.db)")


def workspace_config(args: argparse.Namespace) -> Any:
    """The ``--agent`` file's validated config, or None when no ``--agent`` was given. Read once per
    command (kept on ``args``: a command asking for its database and its config loads the file once)."""
    agent = getattr(args, "agent", None)
    if not agent:
        return None
    cached = vars(args).get("_workspace_config")
    if cached is not None and cached[0] == agent:
        return cached[1]
    from pathlib import Path

    if not Path(agent).is_file():
        raise UsageError(f"--agent {agent}: no such agent file")
    from .runtime import load_config

    cfg, _ = load_config(agent, pm=getattr(args, "pm", None))
    args._workspace_config = (agent, cfg)
    return cfg


def workspace_db(args: argparse.Namespace) -> Any:
    """The session database a workspace command reads: ``--db`` (before or after the command),
    else the ``--agent``'s ``state_db`` (default ``<workspace>/.clawkit/state.db``), else
    ``./.clawkit/state.db``."""
    from pathlib import Path

    from .storage import is_postgres_url

    if getattr(args, "db", None):
        return args.db if is_postgres_url(args.db) else Path(args.db)
    cfg = workspace_config(args)
    if cfg is not None:
        if is_postgres_url(cfg.state_db):
            return cfg.state_db
        return Path(cfg.state_db or Path(cfg.workspace) / ".clawkit" / "state.db")
    return Path(".clawkit/state.db")


def session_store(args: argparse.Namespace) -> Any:
    """The workspace's session store (:func:`workspace_db`) for the ``sessions`` commands; a missing
    SQLite file is a usage error, not a new empty database."""
    from .sessions import SessionStore
    from .storage import is_postgres_url

    db = workspace_db(args)
    if not is_postgres_url(db) and not db.is_file():
        raise UsageError(f"{db}: no session database here (pass --db PATH or --agent AGENT.yaml)")
    return SessionStore(db)


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if getattr(args, "model", None):
        out["model"] = args.model
    if getattr(args, "workspace", None):
        # a path typed on the command line is relative to the current directory (the YAML's
        # ``workspace:`` key stays relative to the YAML file's folder)
        out["workspace"] = os.path.abspath(os.path.expanduser(args.workspace))
    if getattr(args, "db", None):
        out["state_db"] = args.db
    out.update(key_values(getattr(args, "overrides", []) or [], "--set"))
    return out


def key_values(items: list[str], flag: str) -> dict[str, Any]:
    """``KEY=VALUE`` arguments of ``flag`` (``--set``, ``submit --setting``): each VALUE read as YAML."""
    from . import safeyaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key.strip()] = safeyaml.safe_load(value, f"{flag} {key.strip()}") if value else ""
    return out


_terminated = False


def terminated() -> bool:
    """True once SIGTERM was received (a KeyboardInterrupt then means "leave", not "cancel the reply")."""
    return _terminated


def _install_sigterm() -> Any:
    """SIGTERM is handled like Ctrl-C — through whatever SIGINT handler is active (asyncio's
    cancels the running turn, which stores its partial reply; the default raises
    KeyboardInterrupt) — so ``finally`` blocks run and plugins' threads are joined instead
    of the process dying mid-write."""

    def on_sigterm(signum: int, frame: Any) -> None:
        global _terminated
        _terminated = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, on_sigterm)


def quiet_stdout() -> None:
    """The reader of stdout went away (``| head``): send the rest to /dev/null so neither
    later writes nor the interpreter's final flush raise."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
