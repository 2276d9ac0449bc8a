"""``clawkit skills list | show NAME | check | stats``.

Skills are looked up for the current directory as workspace, or for an agent
(``--agent AGENT.yaml``: its workspace and its ``plugins.skills`` section).
``check`` compiles every skill file in every source and exits 1 on any error,
printing ``file:line: [BLOCK] message`` lines (for CI). ``stats`` prints this
plugin's metrics and every other ``<plugin>_metrics`` table in the state db
(``metric TEXT, value REAL``), e.g. the translation device's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

from clawkit.cli import add_workspace_options, workspace_config, workspace_db
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the handlers import what they need: ``clawkit --help`` must stay fast
    from .registry import SkillRegistry


def add_commands(cli: Any) -> None:
    p = cli.command("skills", help="list, show, check skills (.claws and SKILL.md) and their stats")
    p.add_argument("--workspace", help="workspace directory (default: the current directory)")
    sub = p.add_subparsers(dest="skills_cmd")
    ls = sub.add_parser("list", help="every skill: name, source, availability, one line")
    ls.add_argument("--json", action="store_true")
    show = sub.add_parser("show", help="the compiled skill: prompt section, tool schemas, guardrails")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    sub.add_parser("check", help="compile every skill file; exit 1 naming file and line on errors")
    st = sub.add_parser("stats", help="skills metrics (and other plugins' *_metrics tables)")
    st.add_argument("--json", action="store_true")
    for child in sub.choices.values():  # `clawkit skills check --workspace DIR` works too
        child.add_argument("--workspace", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    add_workspace_options(p)  # --agent AGENT.yaml and --db PATH, before or after the action
    p.set_defaults(handler=handle)


def _agent_config(args: Any) -> Any:
    from clawkit.config import AgentConfig

    cfg = workspace_config(args)
    if cfg is not None:
        return cfg
    ws = Path(getattr(args, "workspace", None) or ".").resolve()
    cfg = AgentConfig(name="skills-cli", model="none", workspace=ws)
    return cfg


def _registry(args: Any) -> SkillRegistry:
    from .state import build_registry

    return build_registry(_agent_config(args))


def handle(args: Any) -> int:
    cmd = getattr(args, "skills_cmd", None) or "list"
    try:
        if cmd == "stats":
            return cmd_stats(args)
        reg = _registry(args)
    except Exception as exc:  # a bad agent file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return {"list": cmd_list, "show": cmd_show, "check": cmd_check}[cmd](reg, args)


def _agent_tools(args: Any) -> Any:
    """The agent's ``tools:`` allowlist as a registry (None without an agent file): what a skill's
    ``requires.tools`` / ``allowed-tools`` are checked against."""
    from clawkit.tools import ToolRegistry

    from .state import SKILLS_GROUP

    cfg = workspace_config(args)
    if cfg is None:
        return None
    tools = ToolRegistry(list(cfg.tools or []))
    tools.add_group("skills", SKILLS_GROUP)
    return tools


def cmd_list(reg: SkillRegistry, args: Any) -> int:
    from .state import missing_tools

    rows = []
    agent_tools = _agent_tools(args)
    for name, entry in sorted(reg.skills.items()):
        reasons = list(reg.unavailable_reason(name))
        missing = missing_tools(agent_tools, entry.skill) if agent_tools is not None else []
        if missing:
            reasons.append(f"needs tool(s) {', '.join(missing)}, which the agent's tools: does not allow")
        rows.append({**entry.skill.summary(), "available": not reasons, "reason": "; ".join(reasons),
                     "stale": entry.stale, "shadowed": entry.shadowed})
    broken = [e.format() for e in reg.errors()]
    if getattr(args, "json", False):
        print(json.dumps({"skills": rows, "errors": broken}, indent=2))
        return 0
    if not rows:
        print("no skills found (looked in: " + ", ".join(str(p) for _, p in reg.sources) + ")")
    for r in rows:
        state = "available" if r["available"] else f"unavailable: {r['reason']}"
        if r["stale"]:
            state += " (file has errors; last good version)"
        print(f"{r['name']:<20} {r['format']:<8} {r['source']:<16} {state}\n    {r['description']}")
    for line in broken:
        print(f"error: {line}", file=sys.stderr)
    return 0


def cmd_show(reg: SkillRegistry, args: Any) -> int:
    sk = reg.get(args.name)
    if sk is None:
        print(f"error: no skill named {args.name!r} (known: {', '.join(sorted(reg.skills)) or 'none'})", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps({**sk.summary(), "system_prompt_section": sk.system_prompt_section,
                          "tools": sk.openai_tools(), "guardrails": sk.guardrails, "execution_plan": sk.execution_plan,
                          "capability_requests": sk.capability_requests, "requires": sk.requires,
                          "unavailable": reg.unavailable_reason(sk.name)}, indent=2, default=str))
        return 0
    print(f"# {sk.name} ({sk.format}, {sk.source}) — {sk.path}")
    reasons = reg.unavailable_reason(sk.name)
    if reasons:
        print("UNAVAILABLE: " + "; ".join(reasons))
    print("\n## Prompt section\n" + sk.system_prompt_section)
    print("\n## Tool schemas")
    print(json.dumps(sk.openai_tools(), indent=2) if sk.tool_definitions else "(none)")
    print("\n## Guardrails\n" + ("\n".join(f"- {g}" for g in sk.guardrails) or "(none)"))
    if sk.capability_requests:
        print("\n## Capability requests\n" + json.dumps(sk.capability_requests, indent=2))
    print(f"\nconfidence: {sk.confidence} ({sk.verification}); weight: {sk.weight}")
    return 0


def cmd_check(reg: SkillRegistry, args: Any) -> int:
    errors = reg.errors()
    total = len(reg.files)
    for e in errors:
        print(e.format())
    for state in reg.files.values():
        if state.skill is not None:
            for w in state.skill.warnings:
                print(f"warning: {w}")
    bad = len({e.file for e in errors})
    print(f"{total - bad} of {total} skill files OK" + (f"; {len(errors)} error(s) in {bad} file(s)" if errors else ""),
          file=sys.stderr if errors else sys.stdout)
    return 1 if errors else 0


def cmd_stats(args: Any) -> int:
    import sqlite3

    from clawkit.storage import connect, exists, table_names

    db = workspace_db(args)
    tables: dict[str, dict[str, float]] = {}
    if exists(db):
        conn = connect(db, read_only=True)
        try:
            names = [n for n in table_names(conn) if n.endswith("_metrics")]
            for name in names:
                try:
                    rows = conn.execute(f'SELECT metric, value FROM "{name}" ORDER BY metric').fetchall()
                except sqlite3.Error:
                    continue  # not in the shared (metric, value) shape
                tables[name[: -len("_metrics")]] = {m: v for m, v in rows}
        finally:
            conn.close()
    reg = _registry(SimpleNamespace(agent=getattr(args, "agent", None), workspace=getattr(args, "workspace", None)))
    tables.setdefault("skills", {})
    tables["skills"] = {"skills_available": float(len(reg.available())), "skills_total": float(len(reg.skills)),
                        "skill_files_with_errors": float(len({e.file for e in reg.errors()})), **tables["skills"]}
    if getattr(args, "json", False):
        print(json.dumps(tables, indent=2))
        return 0
    for plugin, metrics in tables.items():
        print(f"[{plugin}]")
        for m, v in metrics.items():
            print(f"  {m:<32} {v:g}")
    return 0
