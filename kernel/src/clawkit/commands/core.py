"""``clawkit run``, ``chat``, ``plugins``, ``schema`` and ``init``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..cli import EXIT_BUDGET, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, add_agent_options, overrides_from
from ..errors import UsageError
from ..hookspecs import hookimpl

INIT_TEMPLATE = """\
# A clawkit agent. Reference: docs/agent-yaml.md; schema: `clawkit schema`.
name: {name}
model: {model}
# model:                      # or a mapping with provider settings
#   name: openai/gpt-4o-mini
#   api_base: ${{OPENAI_BASE_URL:-https://api.openai.com/v1}}
#   api_key: ${{OPENAI_API_KEY}}
instructions: |
  You are a helpful assistant. Answer concisely.
tools: []                     # allowlist, e.g. [read_file, list_dir]
workspace: .
limits:
  context_window: 128000
  max_tool_rounds: 20
plugins: {{}}                  # per-plugin sections, e.g. truncator: {{max_share: 0.3}}
"""


def register(cli) -> None:
    p = cli.command("run", help="run one turn of an agent and stream the reply")
    p.add_argument("agent", help="agent YAML file")
    p.add_argument("message", help="the user message")
    add_session_options(p)
    p.add_argument("--json", action="store_true",
                   help='print {"session_id", "reply", "tool_calls", "usage", "interrupted", "stop_reason"}')
    p.add_argument("--record", metavar="FILE", help="record the model traffic to a cassette (JSON, or YAML by extension)")
    p.add_argument("--replay", metavar="FILE", help="answer model calls from a cassette, offline (see docs/testing.md)")
    add_agent_options(p)
    p.set_defaults(handler=cmd_run)

    p = cli.command("chat", help="interactive session (reads one message per line when stdin is not a terminal)")
    p.add_argument("agent", help="agent YAML file")
    add_session_options(p)
    add_agent_options(p)
    p.set_defaults(handler=cmd_chat)

    p = cli.command("plugins", help="list installed plugins and the hooks they implement")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_plugins)

    p = cli.command("schema", help="print the JSON Schema of agent files (kernel + installed plugins)")
    p.add_argument("--output", "-o", help="write to this file instead of stdout")
    p.set_defaults(handler=cmd_schema)

    p = cli.command("init", help="scaffold an agent YAML file")
    p.add_argument("path", nargs="?", default="agent.yaml")
    p.add_argument("--name", default="assistant")
    p.add_argument("--model", default="openai/gpt-4o-mini")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.set_defaults(handler=cmd_init)


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


def add_session_options(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--session", metavar="ID", help="resume this session (it must exist: `clawkit sessions list`)")
    g.add_argument("--new-session", metavar="ID", help="start a new session with this id")


def _open(args, approver: Any = None, extra: tuple = ()):
    from ..runtime import load_config, open_agent

    if not Path(args.agent).is_file():
        raise UsageError(f"{args.agent}: no such agent file")
    overrides = overrides_from(args)
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
        from ..cli import quiet_stdout

        quiet_stdout()


def _stdout_deliver(outbound) -> None:
    if outbound.kind == "stream_chunk":
        _write(outbound.content)
    elif outbound.kind == "final_reply":
        _write(("" if outbound.metadata.get("streamed") else outbound.content) + "\n")
    else:  # notices, routed messages, tool displays a plugin chose to show
        _write(f"\n[{outbound.kind}] {outbound.content}\n")


def redacted(agent, data: Any) -> Any:
    """``--json`` output without secrets: the session store's redactor when a plugin set one (the
    policy's: names, formats, values, encoded forms), then the kernel's by value (the environment's
    secrets and the model key, :func:`clawkit.secrets.scrub`) in any case."""
    from ..secrets import scrub

    redact_value = getattr(getattr(agent, "store", None), "redact_value", None)
    if callable(redact_value):
        try:
            data = redact_value(data)
        except Exception:  # the kernel's pass below still runs
            pass
    return scrub(data)


def run_and_report(agent, message: str, *, as_json: bool, session_id: str | None = None, trailer=None) -> int:
    """One turn: stream the reply (or print the JSON result), then close the agent.

    Exit 0, or 4 (``EXIT_INTERRUPTED``) when the reply was cut off: the partial text is
    stored, marked interrupted, and ``--json`` has ``"interrupted": true``."""
    try:
        result = agent.run(message, session_id=session_id, deliver=None if as_json else _stdout_deliver)
    finally:
        agent.close()
    if as_json:
        _write(json.dumps(redacted(agent, result.as_json()), default=str) + "\n")
    else:
        print(f"[session {result.session_id}{trailer(result) if trailer else ''}]", file=sys.stderr)
    if result.interrupted:
        why = f": {result.stop_detail}" if result.stop_detail else ""
        print(f"clawkit: warning: the reply was interrupted ({len(result.reply)} characters arrived){why}; it is "
              f"stored marked interrupted in session {result.session_id}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result.stop_reason == "budget":
        print(f"clawkit: stopped by a budget: {result.stop_detail}; continue with --session {result.session_id} and a raised budget", file=sys.stderr)
        return EXIT_BUDGET
    return EXIT_OK


def cmd_run(args) -> int:
    if getattr(args, "record", None) or getattr(args, "replay", None):
        return _run_with_cassette(args)
    return run_and_report(_open(args), args.message, as_json=args.json, session_id=session_arg(args))


def _run_with_cassette(args) -> int:
    """The model's ``api_base`` goes through a loopback cassette server: recording forwards to the real
    endpoint; replaying answers from the file and refuses any non-loopback connection."""
    from contextlib import nullcontext

    from ..testing.cassette import CassetteError, CassetteServer, default_upstream, loopback_only

    if args.record and args.replay:
        raise UsageError("--record and --replay exclude each other")
    agent = _open(args)
    model = agent.config.model
    upstream = model.api_base or default_upstream(model.name)
    if args.record and not upstream:
        agent.close()
        raise UsageError(f"--record: set model.api_base for {model.name!r} (the endpoint to record from)")
    try:
        server = CassetteServer(args.record or args.replay, record=bool(args.record), upstream=upstream).start()
    except CassetteError as exc:
        agent.close()
        raise UsageError(str(exc).splitlines()[0]) from None
    model.api_base = server.url
    model.fallbacks = []  # a cassette holds the first model's traffic only (docs/fallbacks.md)
    try:
        with loopback_only() if args.replay else nullcontext():
            code = run_and_report(agent, args.message, as_json=args.json, session_id=session_arg(args))
    except Exception:
        if not server.mismatches:
            raise
        code = 1  # the mismatch's diff, below, says more than the provider's 400
    finally:
        server.stop()
    if server.mismatches:
        print(f"clawkit: {server.mismatches[0]}", file=sys.stderr)
        return 1
    if args.record:
        print(f"[recorded {len(server.cassette.entries)} model call(s) to {args.record}]", file=sys.stderr)
    return code


CHAT_HELP = "commands: /quit, /session, /new, /help — directives like /think high are passed to plugins"


def cmd_chat(args) -> int:
    from .chat import cmd_chat as chat

    return chat(args)


def cmd_plugins(args) -> int:
    from ..plugins import plugin_infos

    infos = plugin_infos(args.pm)
    if args.json:
        print(json.dumps([i.__dict__ for i in infos], indent=2))
        return EXIT_OK
    if not infos:
        print("no plugins installed")
    for i in infos:
        print(f"{i.name:14} {i.distribution or '-'} {i.version or ''}")
        print(f"{'':14} hooks: {', '.join(i.hooks) or '-'}")
    return EXIT_OK


def agent_schema(pm) -> dict[str, Any]:
    from ..config import build_agent_model, collect_sections
    from ..hooks import HookRunner

    model = build_agent_model(collect_sections(HookRunner(pm)))
    schema = model.model_json_schema()
    schema["title"] = "clawkit agent"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def cmd_schema(args) -> int:
    text = json.dumps(agent_schema(args.pm), indent=2, sort_keys=True) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_init(args) -> int:
    path = Path(args.path)
    if path.exists() and not args.force:
        print(f"clawkit init: {path} exists (use --force to overwrite)", file=sys.stderr)
        return EXIT_USAGE
    path.write_text(INIT_TEMPLATE.format(name=args.name, model=args.model), encoding="utf-8")
    print(f"wrote {path}")
    return EXIT_OK
