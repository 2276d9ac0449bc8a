"""``clawkit prompt AGENT.yaml [--message TEXT] [--classification JSON] [--json]``.

Prints the system prompt and the tools the agent's first request for the message
would carry — built by the same code a turn runs (message hooks and directives,
routing, skill activation, memory recall, contributors, ``before_llm_call``) — and
for every contributor whether it was included and why (untagged / tag matched / no
tag matched / filtered / cut by budget / failed), with its size in tokens. Nothing
is written: the session lives in memory and no model is called (the classifier
neither: pass ``--classification`` to see a classified turn).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

from ..cliopts import EXIT_OK, UsageError, add_agent_options, overrides_from


def register(cli) -> None:
    p = cli.command("prompt", help="show an agent's assembled system prompt and why each contributor is in or out")
    p.add_argument("agent", help="agent YAML file")
    p.add_argument("--message", help="the user message to assemble the prompt for")
    p.add_argument(
        "--classification",
        metavar="JSON",
        help='assume this session classification, e.g. \'{"topic": "coding", "domain": ["security"]}\' (or @file.json)',
    )
    p.add_argument("--channel", default="cli", help="the channel the message arrives on (default: cli)")
    p.add_argument("--json", action="store_true", help="print the prompt and the inclusion report as JSON")
    add_agent_options(p)
    p.set_defaults(handler=cmd_prompt)


def parse_classification(raw: str | None):
    """``--classification`` as a SessionClassification; UsageError naming the problem."""
    from pydantic import ValidationError

    from ..types import SessionClassification

    if raw is None:
        return None
    source = "--classification"
    if raw.startswith("@"):
        source = raw[1:]
        try:
            raw = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--classification {source}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"{source}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a JSON object with label, topic, complexity, domain, flags")
    try:
        return SessionClassification.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"{source}: invalid classification: {problems}") from None


def token_counter(model: str) -> tuple[Callable[[str], int], str]:
    """Exact offline counts with tiktoken when an encoding is available; else ~4 chars/token."""
    from clawkit.tokens import get_counter

    counter = get_counter(model)
    label = counter.encoding_name if counter.exact else "estimate (4 chars per token)"
    return counter.count, label


def build_report(agent: Any, message: str | None, classification: Any, channel: str = "cli") -> dict[str, Any]:
    """What the agent's first request for ``message`` would carry, as a JSON-able dict.

    Built by :meth:`clawkit.loop.Agent.preview` — the turn's own code path (message
    hooks, routing, skill activation, memory recall, contributors, ``before_llm_call``)
    — so ``prompt`` and ``tools`` are exactly what a turn sends. No model is called.
    """
    import asyncio

    agent.channel = channel
    request, assembled = asyncio.run(agent.preview(message, classification))
    count, tokenizer = token_counter(agent.config.model.name)
    text = request.system or ""
    report = assembled.report if assembled is not None else []
    return {
        "agent": agent.config.name,
        "message": message,
        "channel": channel,
        "classification": classification.model_dump() if classification is not None else None,
        "prompt": text,
        "chars": len(text),
        "tokens": count(text),
        "tokenizer": tokenizer,
        "budget_chars": agent.config.limits.context_window,
        "tools": [t.name for t in request.tools],
        "request": {
            "model": request.model,
            "system": text,
            "tools": [t.model_dump(mode="json", include={"name", "description", "parameters"}) for t in request.tools],
            "messages": [m.model_dump(mode="json", include={"role", "content"}) for m in request.messages],
            "reasoning_effort": request.reasoning_effort,
        },
        "contributors": [{**r.as_dict(), "tokens": count(r.text) if r.text else 0} for r in report],
    }


def render_text(data: dict[str, Any]) -> str:
    lines = [data["prompt"], ""]
    n_in = sum(1 for c in data["contributors"] if c["included"])
    lines.append(
        f"--- {data['agent']}: {data['chars']} chars, {data['tokens']} tokens ({data['tokenizer']}); "
        f"{n_in} of {len(data['contributors'])} contributors included"
    )
    lines.append(f"tools sent ({len(data['tools'])}): {', '.join(data['tools']) or '-'}")
    if not data["contributors"]:
        lines.append("(no prompt contributors registered: the prompt is the agent's instructions)")
    width = max([len(c["id"]) for c in data["contributors"]] + [2])
    for c in data["contributors"]:
        mark = "+" if c["included"] else "-"
        size = f"{c['tokens']:>6} tok" if c["tokens"] else " " * 10
        detail = f"  ({c['detail']})" if c["detail"] else ""
        lines.append(f"{mark} {c['id']:<{width}}  {c['reason']:<15} {size}  p{c['priority']}{detail}")
    return "\n".join(lines)


def cmd_prompt(args) -> int:
    from ..runtime import open_agent

    if not Path(args.agent).is_file():
        raise UsageError(f"{args.agent}: no such agent file")
    classification = parse_classification(args.classification)
    agent = open_agent(args.agent, overrides_from(args), persist=False)
    try:
        data = build_report(agent, args.message, classification, args.channel)
    finally:
        agent.close()
    out = json.dumps(data, indent=2, ensure_ascii=False) if args.json else render_text(data)
    try:
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `clawkit prompt … | head`
        pass
    return EXIT_OK
