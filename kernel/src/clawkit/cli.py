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
from .cliopts import (  # noqa: F401  (re-exported: plugins' commands use them from here)
    EXIT_BUDGET, EXIT_INTERRUPTED, EXIT_MODEL, EXIT_OK, EXIT_OUTPUT, EXIT_RUNTIME, EXIT_SIGINT, EXIT_SIGTERM, EXIT_USAGE,
    _install_sigterm, add_agent_options, add_workspace_options, overrides_from, quiet_stdout, terminated,
    workspace_config, workspace_db,
)
from .errors import UsageError


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
    from . import gcfreeze

    gcfreeze.own_process()  # the command's own process: its start-up heap may leave the collector's walks
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
