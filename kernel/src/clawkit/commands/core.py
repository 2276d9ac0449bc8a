"""``clawkit run``, ``chat``, ``plugins``, ``schema`` and ``init``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..cliopts import EXIT_BUDGET, EXIT_INTERRUPTED, EXIT_OK, EXIT_OUTPUT, EXIT_USAGE, add_agent_options
from ..errors import UsageError
from .turn import CHAT_HELP, StderrNotices, _check_session, _open, _stdout_deliver, _write, session_arg  # noqa: F401

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
                   help='print {"session_id", "reply", "tool_calls", "usage", "interrupted", "stop_reason"} '
                        '(and "output" for a typed run: --schema, output:)')
    p.add_argument("--record", metavar="FILE", help="record the model traffic to a cassette (JSON, or YAML by extension)")
    p.add_argument("--replay", metavar="FILE", help="answer model calls from a cassette, offline (see docs/testing.md)")
    p.add_argument("-a", "--attachment", action="append", default=[], metavar="PATH_OR_URL",
                   help="attach an image (PNG, JPEG, GIF, WebP), a PDF or a text file, or an https:// URL of one; "
                        "repeatable (docs/attachments.md)")
    p.add_argument("--schema", metavar="SCHEMA", help="typed output: the answer must match SCHEMA — inline JSON Schema, a "
                   "file holding one, or the concise form 'name str, age int, tags list'; stdout is then exactly the "
                   "JSON value (docs/typed-output.md)")
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


def add_session_options(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--session", metavar="ID", help="resume this session (it must exist: `clawkit sessions list`)")
    g.add_argument("--new-session", metavar="ID", help="start a new session with this id")


def redacted(agent, data: Any) -> Any:
    """``--json`` output without secrets: the session store's redactor when a plugin set one (the
    policy's: names, formats, values, encoded forms), then the kernel's by value (the environment's
    secrets and the model key, :func:`clawkit.secrets.scrub`) in any case."""
    from ..secrets import scrub

    redact_value = getattr(getattr(agent, "store", None), "redact_value", None)
    if callable(redact_value):
        try:
            try:
                data = redact_value(data)
            except TypeError:  # something it cannot see into (bytes, an object): redacted as its JSON text holds it
                import json

                data = redact_value(json.loads(json.dumps(data, default=str)))
        except Exception:  # the kernel's pass below still runs
            pass
    return scrub(data)


def run_and_report(agent, message: str, *, as_json: bool, session_id: str | None = None, trailer=None,
                   output_type: Any = None, attachments: list | None = None) -> int:
    """One turn: stream the reply (or print the JSON result), then close the agent.

    Exit 0, or 4 (``EXIT_INTERRUPTED``) when the reply was cut off: the partial text is
    stored, marked interrupted, and ``--json`` has ``"interrupted": true``. A typed run
    (``output_type``, or the agent's ``output:``) prints exactly the validated JSON value,
    or exits 6 (``EXIT_OUTPUT``) with the validation errors on stderr."""
    from ..output import OutputValidationError

    typed = output_type is not None or getattr(agent.config, "output", None) is not None
    try:
        deliver = None if as_json or typed else _stdout_deliver
        result = agent.run(message, session_id=session_id, deliver=deliver, output_type=output_type,
                           **({"attachments": attachments} if attachments else {}))
    except OutputValidationError as exc:
        if as_json:  # a script reading --json gets the failure as data too
            _write(json.dumps(redacted(agent, {"session_id": exc.session_id, "reply": exc.reply, "output": None,
                                               "stop_reason": "output_invalid", "output_errors": exc.errors,
                                               "attempts": exc.attempts})) + "\n")
        print(f"clawkit: the answer does not match the output schema after {exc.attempts} attempt(s):", file=sys.stderr)
        for error in exc.errors:
            print(f"  - {error}", file=sys.stderr)
        print(f"clawkit: the answers are stored in session {exc.session_id} (raise output.retries to allow more)",
              file=sys.stderr)
        return EXIT_OUTPUT
    finally:
        agent.close()
    if typed and not as_json and not result.interrupted:
        _write(result.reply + "\n")  # exactly the JSON value
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
    agent = _open(args)
    try:
        output_type = output_spec(agent, args)
    except BaseException:
        agent.close()
        raise
    return run_and_report(agent, args.message, as_json=args.json, session_id=session_arg(args), output_type=output_type,
                          attachments=getattr(args, "attachment", None))


def output_spec(agent, args) -> Any:
    """``--schema`` (or the agent's ``output:``) as an OutputSpec, checked before any model call: a bad
    schema is exit 2 naming what is wrong; ``output.retries`` and ``strategy`` apply to ``--schema`` too."""
    from ..errors import ConfigError
    from ..output import OutputSpec

    configured = getattr(agent.config, "output", None)
    try:
        base = OutputSpec.of(configured, config=agent.config) if configured is not None else None
    except ValueError as exc:
        raise ConfigError(f"{agent.config.where('output')}: output: {exc}") from None
    text = getattr(args, "schema", None)
    if not text:
        return base
    try:
        spec = OutputSpec.of(text)
    except ValueError as exc:
        raise UsageError(f"--schema: {exc}") from None
    if configured is not None:
        spec.retries, spec.strategy = configured.retries, configured.strategy
    return spec


def _run_with_cassette(args) -> int:
    """The model's ``api_base`` goes through a loopback cassette server: recording forwards to the real
    endpoint; replaying answers from the file and refuses any non-loopback connection."""
    from contextlib import nullcontext

    from ..testing.cassette import CassetteError, CassetteServer, default_upstream, loopback_only
    from ..testing.replay import TemporaryState, ToolTape, hermetic_overrides, place_pins

    if args.record and args.replay:
        raise UsageError("--record and --replay exclude each other")
    if getattr(args, "session", None):
        raise UsageError("--session cannot be combined with --record/--replay: a cassette run starts from a fresh "
                         "state so that its replay is the same run (see docs/testing.md)")
    with TemporaryState() as state:  # hermetic: no earlier session or memory enters the recording or its replay
        tape = ToolTape(None, record=bool(args.record), pins={})  # type: ignore[arg-type]
        agent = _open(args, extra=(tape,), more=hermetic_overrides(args.pm, state))
        model = agent.config.model
        upstream = model.api_base or default_upstream(model.name)
        if args.record and not upstream:
            agent.close()
            raise UsageError(f"--record: set model.api_base for {model.name!r} (the endpoint to record from)")
        tape.pins = place_pins(agent.config.workspace, state)
        try:
            server = CassetteServer(args.record or args.replay, record=bool(args.record), upstream=upstream,
                                    pins=tape.pins).start()
        except CassetteError as exc:
            agent.close()
            raise UsageError(str(exc).splitlines()[0]) from None
        tape.cassette = server.cassette
        model.api_base = server.url
        model.fallbacks = []  # a cassette holds the first model's traffic only (docs/fallbacks.md)
        try:
            with loopback_only() if args.replay else nullcontext():
                code = run_and_report(agent, args.message, as_json=args.json, session_id=session_arg(args),
                                      attachments=getattr(args, "attachment", None),
                                      output_type=output_spec(agent, args))
        except Exception:
            if not (server.mismatches or tape.mismatches):
                raise
            code = 1  # the mismatch's diff, below, says more than the provider's 400
        finally:
            server.stop()
    if server.mismatches or tape.mismatches:
        print(f"clawkit: {(server.mismatches or tape.mismatches)[0]}", file=sys.stderr)
        return 1
    if args.record:
        print(f"[recorded {len(server.cassette.entries)} model call(s) to {args.record}]", file=sys.stderr)
    return code


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
