"""The ``clawkit`` command line. Plugins add subcommands through ``register_commands``.

Exit codes (docs/cli.md lists them for users): 0 success; 1 runtime failure; 2 bad
input or configuration; 3 a model call failed; 4 the reply was interrupted (stored,
marked interrupted); 130 Ctrl-C; 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Sequence

from . import __version__
from .errors import UsageError

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_MODEL, EXIT_INTERRUPTED = 0, 1, 2, 3, 4
EXIT_BUDGET = 5  # a hard budget (tokens, cost, calls, wall time) stopped the run; the session can continue
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


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    from . import safeyaml

    out: dict[str, Any] = {}
    if getattr(args, "model", None):
        out["model"] = args.model
    if getattr(args, "workspace", None):
        out["workspace"] = args.workspace
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
    parser.add_argument("--db", default=".clawkit/state.db", help="session database (default: .clawkit/state.db)")
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
    try:
        return int(args.handler(args) or 0)
    except (ConfigError, UsageError) as exc:
        print(f"clawkit: {exc}" if isinstance(exc, UsageError) else f"clawkit: config error:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    except ProviderError as exc:
        print(f"clawkit: model call failed ({exc.kind}): {exc}", file=sys.stderr)
        return EXIT_MODEL
    except PluginError as exc:
        print(f"clawkit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\nclawkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
