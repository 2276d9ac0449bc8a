"""The ``clawkit`` command line. Plugins add subcommands through ``register_commands``.

Exit codes (docs/cli.md lists them for users): 0 success; 1 runtime failure; 2 bad
input or configuration; 3 a model call failed; 4 the reply was interrupted (stored,
marked interrupted); 5 a budget stopped the run; 6 the answer did not match the output schema
(typed output); 130 Ctrl-C; 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any, Callable, Sequence

from . import __version__
from .errors import UsageError

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_MODEL, EXIT_INTERRUPTED = 0, 1, 2, 3, 4
EXIT_BUDGET = 5  # a hard budget (tokens, cost, calls, wall time) stopped the run; the session can continue
EXIT_OUTPUT = 6  # typed output: the answer did not match the output schema after every retry
EXIT_SIGINT, EXIT_SIGTERM = 130, 143


class Cli:
    """Handed to ``register_commands``: ``cli.command(name, help)`` → an argparse parser."""

    def __init__(self, subparsers: Any, plugin: str | None = None):
        self._subparsers = subparsers
        self.plugin = plugin
        self.names: set[str] = set()

    def command(self, name: str, help: str = "", **kwargs: Any) -> argparse.ArgumentParser:
        if name in self._subparsers.choices:
            raise ValueError(f"the clawkit command {name!r} exists already")
        parser = self._subparsers.add_parser(name, help=help, description=help, **kwargs)
        parser.set_defaults(handler=_no_handler(name))
        self.names.add(name)
        return parser


def _no_handler(name: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        print(f"clawkit {name}: this command has no handler", file=sys.stderr)
        return EXIT_USAGE

    return handler


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
    """The ``--agent`` file's validated config, or None when no ``--agent`` was given."""
    agent = getattr(args, "agent", None)
    if not agent:
        return None
    from pathlib import Path

    if not Path(agent).is_file():
        raise UsageError(f"--agent {agent}: no such agent file")
    from .runtime import load_config

    cfg, _ = load_config(agent, pm=getattr(args, "pm", None))
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


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    from . import safeyaml

    out: dict[str, Any] = {}
    if getattr(args, "model", None):
        out["model"] = args.model
    if getattr(args, "workspace", None):
        out["workspace"] = args.workspace
    if getattr(args, "db", None):
        out["state_db"] = args.db
    for item in getattr(args, "overrides", []) or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = safeyaml.safe_load(value, f"--set {key.strip()}") if value else ""
    return out


def build_parser(pm) -> argparse.ArgumentParser:
    from .commands import core, demo, sessions
    from .hooks import HookRunner

    parser = argparse.ArgumentParser(prog="clawkit", description="clawkit: plugin-first LLM agents.")
    parser.add_argument("--version", action="version", version=f"clawkit {__version__}")
    parser.add_argument("--db", default=None, metavar="PATH",
                        help="session database (default: .clawkit/state.db, or the --agent's); also accepted after the command")
    parser.add_argument("-v", "--verbose", action="store_true", help="log plugin warnings to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    cli = Cli(sub)
    core.register(cli)
    sessions.register(cli)
    demo.register(cli)
    try:
        from .commands import prompt
    except ImportError:
        prompt = None  # type: ignore[assignment]
    if prompt is not None:
        prompt.register(cli)
    for plugin, fn, argnames in HookRunner(pm).impls("register_commands"):
        try:
            fn(cli=Cli(sub, plugin))
        except Exception as exc:
            print(f"clawkit: plugin {plugin} failed to add its commands: {exc}", file=sys.stderr)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import ConfigError, ProviderError, UsageError
    from .plugins import PluginError, get_plugin_manager

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        pm = get_plugin_manager()
    except PluginError as exc:
        print(f"clawkit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    parser = build_parser(pm)
    args = parser.parse_args(argv)
    import logging  # after parsing: --help never pays for it

    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(name)s: %(message)s")
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    args.pm = pm
    previous = _install_sigterm()
    try:
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows up here, inside the handling below
        return code
    except BrokenPipeError:
        quiet_stdout()
        return EXIT_OK
    except (ConfigError, UsageError) as exc:
        print(f"clawkit: {exc}" if isinstance(exc, UsageError) else f"clawkit: config error:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    except ProviderError as exc:
        print(f"clawkit: model call failed ({exc.kind}): {exc}", file=sys.stderr)
        return EXIT_MODEL
    except PluginError as exc:
        print(f"clawkit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        line = database_error(exc)
        if line is None:
            raise
        print(f"clawkit: {line}", file=sys.stderr)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        if terminated():
            print("\nclawkit: terminated (SIGTERM); what was produced is saved", file=sys.stderr)
            return EXIT_SIGTERM
        print("\nclawkit: interrupted; what was produced is saved", file=sys.stderr)
        return EXIT_SIGINT
    finally:
        signal.signal(signal.SIGTERM, previous)


def database_error(exc: BaseException) -> str | None:
    """One line for a state database that cannot be used (corrupt, locked, not a database), or
    None when ``exc`` is something else (then it is a bug and its traceback is worth showing)."""
    import sqlite3  # the PostgreSQL backend's errors derive from sqlite3's

    if isinstance(exc, sqlite3.DatabaseError):
        what = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        hint = ("another process holds it; retry when it is done" if "locked" in what or "busy" in what else
                "the file is damaged or not a clawkit database: move it aside (a new one is created) or restore a backup")
        return f"the state database cannot be used: {what} ({hint})"
    return None


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
