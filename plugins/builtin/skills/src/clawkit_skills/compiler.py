"""Compiling skills (``.claws`` and ``SKILL.md``) into :class:`CompiledSkill`.

The compiled form is plain natural language plus standard tool schemas: Vibe →
prompt paragraphs, Manifest → guardrails + capability requests + tool allowlist,
IDL → JSON Schema tool definitions, Engine → execution plan, Verification →
confidence, Telemetry → selection weight. The Lexicon is carried on the compiled
skill for the transport codec and never rendered into any prompt text.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from clawkit.types import ToolDef

from .claws import ClawsError, TITLES, normalise_keys, parse_claws
from .idl import IdlError, compile_idl

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass
class CompiledSkill:
    """A skill ready for the prompt and the model's tools."""

    name: str
    description: str
    path: str
    format: str  # "claws" | "skill.md"
    content_hash: str
    version: str = ""
    trigger: str = ""  # when to use it (Vibe Trigger), for routers
    keywords: list[str] = field(default_factory=list)  # manifest/frontmatter `keywords` or `tags`, for routers
    system_prompt_section: str = ""
    tool_definitions: list[ToolDef] = field(default_factory=list)
    guardrails: list[str] = field(default_factory=list)
    execution_plan: list[str] = field(default_factory=list)
    confidence: float = 0.5
    verification: str = "unverified"  # verified | unverified | failed
    weight: float = 1.0
    capability_requests: list[dict[str, Any]] = field(default_factory=list)
    allowed_tools: list[str] = field(default_factory=list)
    lexicon: dict[str, Any] | None = None  # for the ClawDense codec only; never in a prompt
    dialect_hints: dict[str, dict[str, str]] = field(default_factory=dict)  # tool -> {field: dotted key}
    requires: dict[str, list[str]] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    source: str = ""  # workspace | user | plugin:<name>, set by discovery
    model: str = ""  # manifest `modelOverride`/`model` (frontmatter `model`): the model routed turns use
    fallback_models: list[str] = field(default_factory=list)  # manifest/frontmatter `fallbackModels`: tried in order

    def openai_tools(self) -> list[dict[str, Any]]:
        return [t.openai_schema() for t in self.tool_definitions]

    def anthropic_tools(self) -> list[dict[str, Any]]:
        return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in self.tool_definitions]

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "format": self.format, "path": self.path,
                "source": self.source, "version": self.version, "trigger": self.trigger, "keywords": self.keywords, "tools": [t.name for t in self.tool_definitions],
                "confidence": self.confidence, "verification": self.verification, "weight": self.weight}


class SkillCompileError(Exception):
    """A skill failed to compile; ``errors`` are :class:`ClawsError` (file, line, block)."""

    def __init__(self, errors: list[ClawsError]):
        self.errors = errors
        super().__init__("\n".join(e.format() for e in errors))


def content_hash(data: bytes | str) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9]+", "_", text.lower())).strip("_")


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z][a-z])", lambda m: "_" + (m.group(1) or m.group(2)), name).lower()


def tool_name(skill: str, interface: str, single: bool) -> str:
    """``skill_<skill>`` for a skill's only tool, ``skill_<skill>_<interface>`` otherwise."""
    base = f"skill_{_slug(skill)}"
    if single:
        return base[:64]
    part = _slug(_snake(interface))
    part = re.sub(r"_(args|arguments|request|input|params|parameters)$", "", part) or part
    if part.startswith(_slug(skill) + "_"):
        part = part[len(_slug(skill)) + 1 :]
    return f"{base}_{part}"[:64]


# --- guardrails from the manifest ---------------------------------------------------------------

_CAP_PHRASES = {
    "net.http": "make network (HTTP) requests", "net": "use the network", "fs.read": "read files",
    "fs.write": "write files", "fs": "access files", "env.read": "read environment variables",
    "shell.exec": "run shell commands", "exec": "run commands", "process.spawn": "start processes",
    "browser": "control the browser", "memory.read": "read memory", "memory.write": "write memory",
    "clipboard": "use the clipboard",
}


def _phrase(cap: str) -> str:
    return _CAP_PHRASES.get(cap, f"use {cap}")


def _items(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def guardrails_from(permissions: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for p in permissions:
        if "deny" in p and "capability" not in p:
            for cap in _items(p["deny"]):
                out.append(f"You may not {_phrase(cap)}.")
            continue
        cap = str(p.get("capability"))
        scope = _items(p.get("allow")) + _items(p.get("paths"))
        keys = _items(p.get("keys"))
        if scope == ["*"]:
            line = f"You may {_phrase(cap)} ({cap}) without a target restriction."
        elif scope:
            line = f"You may {_phrase(cap)} ({cap}) only for: {', '.join(f'`{x}`' for x in scope)}."
        elif keys:
            line = f"You may {_phrase(cap)} ({cap}) only for the keys: {', '.join(f'`{x}`' for x in keys)}."
        else:
            line = f"You may {_phrase(cap)} ({cap})."
        if scope and keys:
            line = line[:-1] + f"; keys: {', '.join(keys)}."
        denied = _items(p.get("deny"))
        if denied:
            line += f" Never for: {', '.join(denied)}."
        if p.get("pii_scan"):
            line += (" Personal data (e-mail addresses, phone, card, IBAN and social-security numbers) is never"
                     " sent through it, and is redacted from what it returns.")
        out.append(line)
    if not out:
        out.append("This skill requests no capabilities (no network, file or command access of its own).")
    return out


def _permission_items(manifest: dict[str, Any], cf, block) -> list[dict[str, Any]]:
    raw = manifest.get("permissions") or []
    nodes = cf.data.get("_nodes", {}).get("manifest")
    lines: list[int] = []
    try:  # the line of each list item, for errors
        for k, v in nodes.value:
            if k.value == "permissions" and hasattr(v, "value") and isinstance(v.value, list):
                lines = [block.body_line + item.start_mark.line for item in v.value]
    except Exception:
        pass
    if not isinstance(raw, list):
        cf.error(block, None, "permissions must be a list of `- capability: X` or `- deny: X` items")
        return []
    out = []
    for i, item in enumerate(raw):
        line = lines[i] if i < len(lines) else block.body_line
        if isinstance(item, str):
            item = {"capability": item}
        if not isinstance(item, dict) or not ("capability" in item or "deny" in item):
            cf.error(block, line, "each permission needs `capability:` or `deny:`")
            continue
        for key in ("allow", "deny", "paths", "keys"):
            if key in item and not isinstance(item[key], (list, str)):
                cf.error(block, line, f"permission `{key}` must be a list")
        out.append({k: v for k, v in item.items()})
    return out


# --- .claws ------------------------------------------------------------------------------------------


def _confidence(verification: dict[str, str] | None) -> tuple[float, str]:
    if not verification:
        return 0.5, "unverified"
    status = (verification.get("status") or "").upper()
    if status.startswith("VERIFIED"):
        return 1.0, "verified"
    if status.startswith("FAILED"):
        return 0.0, "failed"
    return 0.5, "unverified"


def _weight(telemetry: dict[str, Any] | None) -> float:
    t = normalise_keys(telemetry or {})
    try:
        count = float(t.get("execution_count") or 0)
        rate = float(t.get("success_rate", 1.0))
    except (TypeError, ValueError):
        return 1.0
    if count <= 0:
        return 1.0
    # shrink towards 1.0 while there is little evidence
    evidence = min(count, 20.0) / 20.0
    return round(max(0.0, min(1.0, 1.0 - evidence * (1.0 - rate))), 4)


#: ``@dialect`` sources the skill tools fill (clawkit_skills.skilltools.dialect_value); other
#: ``context.*`` keys have no value and are warned about; any other dotted key reads turn state
DIALECT_SOURCES = frozenset({"context.query", "context.message", "context.text", "user.message", "context.task",
                             "context.action", "context.url", "context.path", "context.cmd", "context.workspace",
                             "workspace", "context.session_id", "session.id"})
#: manifest keys that become behaviour (the rest is metadata, and `skills check` says so)
MANIFEST_USED = frozenset({"id", "name", "description", "version", "schema_version", "keywords", "tags",
                           "permissions", "tools", "requires", "modelOverride", "model", "fallbackModels"})
#: keys of a permission item the shield and the guardrails use
PERMISSION_USED = frozenset({"capability", "deny", "allow", "paths", "keys", "pii_scan"})


def _prose_steps(text: str) -> list[str]:
    """ENGINE prose: each paragraph (or each line of a line-per-step block) becomes a step."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    steps: list[str] = []
    for para in paras:
        lines = [ln.strip() for ln in para.splitlines() if ln.strip() and not ln.strip().startswith(("#", "//"))]
        if len(lines) > 1 and all(re.search(r"[.!?:]$", ln) for ln in lines):
            steps.extend(lines)  # one sentence per line: one step each
        elif lines:
            steps.append(" ".join(lines))
    return steps


def _plan(engine: dict[str, Any] | None) -> list[str]:
    if not engine:
        return []
    if engine.get("steps"):
        return list(engine["steps"])
    if engine.get("code") is None and engine.get("prose"):
        return _prose_steps(engine["prose"])
    code = engine.get("code") or ""
    steps = []
    for ln in code.splitlines():
        m = re.match(r"^\s*(?://|#)\s*(?:\d+[.)]\s*)?(.+?)\s*$", ln)
        if m and not m.group(1).startswith(("!", "@", "eslint", "type:")):
            steps.append(m.group(1))
    if steps:
        return steps
    calls = []
    for name in re.findall(r"\bawait\s+([A-Za-z_][\w.]*)\s*\(", code):
        if name not in calls:
            calls.append(name)
    return [f"Use {c}" for c in calls]


def compile_claws(text: str, path: str | Path = "<string>", digest: str | None = None) -> CompiledSkill:
    """Compile ``.claws`` text; raises :class:`SkillCompileError` listing every problem."""
    cf = parse_claws(text, path)
    manifest = cf.data.get("manifest")
    mblock = cf.block("manifest")
    if manifest is not None and not isinstance(manifest, dict):
        cf.error(mblock, None, "the manifest must be a YAML mapping (id, version, permissions…)")
        manifest = None
    manifest = manifest or {}
    permissions = _permission_items(manifest, cf, mblock) if mblock is not None else []
    name = str(manifest.get("id") or manifest.get("name") or Path(str(path)).stem)
    tools: list[ToolDef] = []
    dialects: dict[str, dict[str, str]] = {}
    vibe = cf.data.get("vibe") or {}
    idl_block = cf.block("idl")
    idl = None
    if idl_block is not None:
        try:
            idl = compile_idl(idl_block.text, idl_block.body_line)
        except IdlError as exc:
            cf.error(idl_block, exc.line, exc.message)
        else:
            single = len(idl.tools) == 1
            for iface in idl.tools:
                tname = tool_name(name, iface, single)
                desc = idl.interfaces[iface].description or vibe.get("purpose") or f"The {name} skill."
                desc = f"Skill {name}: {desc}".strip()
                if len(desc) > 1000:
                    desc = desc[:999] + "…"
                tools.append(ToolDef(name=tname, description=desc, parameters=idl.schemas[iface], plugin="skills"))
                dialects[tname] = idl.dialects.get(iface, {})
    vblock = cf.block("vibe")
    if vblock is not None and not (vibe.get("purpose") or vibe.get("intro")):
        cf.error(vblock, vblock.body_line, "the VIBE block needs a Purpose (e.g. `**Purpose:** …` or a `## Purpose` heading)")
    if cf.errors:
        raise SkillCompileError(cf.errors)
    confidence, verification = _confidence(cf.data.get("verification"))
    plan = _plan(cf.data.get("engine"))
    _warn_losses(cf, manifest, permissions, plan, idl_block, idl)
    guardrails = guardrails_from(permissions)
    lexicon = cf.data.get("lexicon")
    skill = CompiledSkill(
        name=name,
        description=_one_line(manifest.get("description") or vibe.get("purpose") or vibe.get("intro") or name),
        path=str(path),
        format="claws",
        content_hash=digest or content_hash(text),
        version=str(manifest.get("version") or ""),
        trigger=str(vibe.get("trigger") or ""),
        keywords=_items(manifest.get("keywords") or manifest.get("tags")),
        tool_definitions=tools,
        guardrails=guardrails,
        execution_plan=plan,
        confidence=confidence,
        verification=verification,
        weight=_weight(cf.data.get("telemetry")),
        capability_requests=[{**p, "skill": name} for p in permissions],
        allowed_tools=_items(manifest.get("tools")),
        model=str(manifest.get("modelOverride") or manifest.get("model") or ""),
        fallback_models=_items(manifest.get("fallbackModels")),
        lexicon=normalise_keys(lexicon) if isinstance(lexicon, dict) else None,
        dialect_hints=dialects,
        requires=_requires(manifest.get("requires")),
        metadata={
            "identity": cf.data.get("identity"), "state": normalise_keys(cf.data.get("state") or {}) or None,
            "verification": cf.data.get("verification"), "fingerprint": cf.data.get("fingerprint"),
            "telemetry": normalise_keys(cf.data.get("telemetry") or {}) or None,
            "manifest": {k: v for k, v in manifest.items() if k not in ("permissions",)},
            "engine_lang": (cf.data.get("engine") or {}).get("lang"),
        },
        warnings=list(cf.warnings),
    )
    skill.system_prompt_section = render_claws_section(skill, vibe)
    return skill


def _warn_losses(cf: Any, manifest: dict[str, Any], permissions: list[dict[str, Any]], plan: list[str],
                 idl_block: Any, idl: Any) -> None:
    """A located warning for each construct of the file that does not become behaviour."""
    def warn(block: Any, line: int | None, message: str) -> None:
        title = block.title.upper() if block is not None else ""
        cf.warnings.append(f"{cf.path}:{line or (block.body_line if block is not None else 1)}: [{title}] {message}")

    from .claws import _MARKER, _NAME_TO_KIND, _is_separator

    lines = cf.text.splitlines()
    for i, ln in enumerate(lines):  # a section whose marker names no known block merges into the previous one
        if i and not _is_separator(lines[i - 1]) or not ln.strip():
            continue
        m = _MARKER.match(ln)
        name = re.sub(r"\s+", " ", m.group("name").strip().upper()) if m else None
        if name and name not in _NAME_TO_KIND and (i == 0 or _is_separator(lines[i - 1])):
            cf.warnings.append(f"{cf.path}:{i + 1}: [{name}] unknown block: not a .claws block; its text is "
                               "merged into the previous block's, not carried into behaviour")
    mblock = cf.block("manifest")
    mtext = mblock.text if mblock is not None else ""
    for key in manifest:
        if key not in MANIFEST_USED:
            warn(mblock, _key_line(mtext, mblock, key, top=True),
                 f"manifest key {key!r} is kept as metadata only; clawkit does not act on it")
    after = _key_line(mtext, mblock, "permissions", top=True)
    for item in permissions:
        for key in item:
            if key not in PERMISSION_USED:
                line = _key_line(mtext, mblock, key, after=after)
                warn(mblock, line, f"permission key {key!r} ({item.get('capability') or item.get('deny')}) is not enforced")
                after = line
    eblock = cf.block("engine")
    engine = cf.data.get("engine") or {}
    if eblock is not None and not plan:
        what = f"its <script lang={engine.get('lang')}> code is never run and holds no comment steps or awaited calls" \
            if engine.get("code") else "it has no steps"
        warn(eblock, eblock.body_line, f"the ENGINE block compiles to an empty plan: {what}")
    elif eblock is not None and engine.get("code") and engine.get("steps"):
        warn(eblock, eblock.body_line, "the <script> code is not run; the plan comes from the numbered steps only")
    if idl is not None:
        for iface in idl.interfaces.values():
            for f in iface.fields:
                if f.dialect and f.dialect.startswith(("context.", "user.", "session.")) and f.dialect not in DIALECT_SOURCES:
                    warn(idl_block, f.line, f"@dialect:{f.dialect} on {iface.name}.{f.name} has no source; the field is "
                                            f"never auto-filled (supported: {', '.join(sorted(DIALECT_SOURCES))})")
    ident = cf.block("identity")
    if ident is not None:
        warn(ident, ident.body_line, "the signature is not verified; kept as provenance metadata")
    fp = cf.block("fingerprint")
    if fp is not None:
        warn(fp, fp.body_line, "NEURAL FINGERPRINT is kept as metadata; the Shield's third layer does not use it yet")
    state = cf.block("state")
    if state is not None:
        warn(state, state.body_line, "STATE is kept as metadata; checkpoints are not restored")


def _one_line(text: str, limit: int = 140) -> str:
    s = re.sub(r"\s+", " ", str(text)).strip()
    first = re.split(r"(?<=[.!?])\s", s, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def render_claws_section(skill: CompiledSkill, vibe: dict[str, Any]) -> str:
    """The prompt text of a compiled ``.claws`` skill (no lexicon, no metadata)."""
    head = f"### Skill: {skill.name}" + (f" (v{skill.version})" if skill.version else "")
    parts = [head]
    for text in (vibe.get("intro"), vibe.get("purpose")):
        if text:
            parts.append(text)
    if vibe.get("trigger"):
        parts.append(f"Use it when: {vibe['trigger']}")
    if vibe.get("tone"):
        parts.append(f"Tone: {vibe['tone']}")
    for label, text in (vibe.get("extra") or {}).items():
        parts.append(f"{label}: {text}")
    if vibe.get("constraints"):
        parts.append("Constraints:\n" + "\n".join(f"- {c}" for c in vibe["constraints"]))
    parts.append("Guardrails:\n" + "\n".join(f"- {g}" for g in skill.guardrails))
    if skill.allowed_tools:
        parts.append("Tools this skill uses: " + ", ".join(skill.allowed_tools) + ".")
    if skill.execution_plan:
        parts.append("When performing this skill, follow these steps:\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(skill.execution_plan, 1)))
    if skill.tool_definitions:
        names = ", ".join(f"`{t.name}`" for t in skill.tool_definitions)
        parts.append(f"Skill tool: call {names} with the request's parameters to get validated arguments and the plan; it does not act by itself.")
    if skill.verification != "unverified":
        parts.append(f"Confidence: {skill.verification}.")
    return "\n".join(parts)


# --- SKILL.md ----------------------------------------------------------------------------------------

_FRONTMATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


def _key_line(text: str, block: Any, key: str, *, top: bool = False, after: int | None = None) -> int | None:
    """The file line where ``key:`` is written in ``block``'s body (YAML or JSON; ``top``: unindented
    only), at or after line ``after``; None when it cannot be found (the block's first line is used)."""
    if block is None:
        return None
    first = block.body_line
    pat = re.compile(rf"^{re.escape(key)}\s*:" if top else rf"(?:^|[\s{{,\-])[\"']?{re.escape(key)}[\"']?\s*:")
    for i, ln in enumerate(text.splitlines()):
        if (after is None or first + i >= after) and pat.search(ln):
            return first + i
    return None


SKILL_MD_USED = frozenset({"name", "description", "metadata", "requires", "os", "allowed-tools", "allowed_tools",
                           "version", "keywords", "tags", "homepage", "license", "model", "modelOverride", "fallbackModels"})
OS_NAMES = {"darwin": "darwin", "macos": "darwin", "mac": "darwin", "linux": "linux", "win32": "win32",
            "windows": "win32"}


#: where OpenClaw-style metadata keeps its keys; what clawkit acts on there (emoji and homepage are
#: display-only in OpenClaw too); and the requirement kinds it checks
NAMESPACES = ("openclaw", "clawdbot", "clawkit")
METADATA_USED = frozenset({"requires", "os", "emoji", "homepage"})
REQUIRES_USED = frozenset({"bins", "anyBins", "env", "config", "tools"})


def _front_line(front_text: str, key: str) -> int:
    """The file line of ``key:`` in the frontmatter (top-level first, else nested or in JSON); 2 if unseen."""
    lines = front_text.splitlines()
    for pat in (rf"^{re.escape(key)}\s*:", rf"(?:^|[\s{{,])[\"']?{re.escape(key)}[\"']?\s*:"):
        for i, ln in enumerate(lines, 2):
            if re.search(pat, ln):
                return i
    return 2


def _requires(raw: Any) -> dict[str, list[str]]:
    if not isinstance(raw, dict):
        return {}
    out: dict[str, list[str]] = {}
    for key in ("bins", "anyBins", "env", "config", "tools", "os"):
        if raw.get(key):
            out[key] = _items(raw[key])
    return out


def compile_skill_md(text: str, path: str | Path = "SKILL.md", digest: str | None = None) -> CompiledSkill:
    """Compile an Agent Skills ``SKILL.md`` (YAML frontmatter + Markdown)."""
    p = Path(str(path))
    m = _FRONTMATTER.match(text)
    if not m:
        raise SkillCompileError([ClawsError(str(path), 1, "FRONTMATTER", "SKILL.md must start with `---` YAML frontmatter (name, description)")])
    from clawkit.errors import ConfigError
    from clawkit.safeyaml import safe_load

    try:
        front = safe_load(m.group(1), str(path)) or {}
    except ConfigError as exc:
        raise SkillCompileError([ClawsError(str(path), 2, "FRONTMATTER", f"refused YAML: {str(exc).split(': ', 2)[-1]}")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SkillCompileError([ClawsError(str(path), 2 + (mark.line if mark else 0), "FRONTMATTER", f"invalid YAML: {getattr(exc, 'problem', None) or exc}")]) from None
    if not isinstance(front, dict):
        raise SkillCompileError([ClawsError(str(path), 2, "FRONTMATTER", "frontmatter must be a mapping")])
    body = text[m.end() :].strip()
    meta = front.get("metadata") or {}
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            meta = {}
    requires: dict[str, Any] = {}
    oses: list[str] = _items(front.get("os"))
    warnings: list[str] = []
    # OpenClaw puts gating under metadata.openclaw (older: clawdbot, clawkit) or at the top level
    scopes = [front] + ([meta] if isinstance(meta, dict) else [])
    if isinstance(meta, dict):
        scopes += [meta[ns] for ns in NAMESPACES if isinstance(meta.get(ns), dict)]
    for scope in scopes:
        req = scope.get("requires")
        if isinstance(req, dict):
            for key, value in req.items():
                requires.setdefault(key, [])
                requires[key] = list(dict.fromkeys([*requires[key], *_items(value)]))
        if scope is not front and scope.get("os"):
            oses = list(dict.fromkeys([*oses, *_items(scope.get("os"))]))
        if isinstance(req, dict):
            for key in req:
                if key not in REQUIRES_USED:
                    warnings.append(f"{path}:{_front_line(m.group(1), key)}: [FRONTMATTER] requires.{key} is not "
                                    f"checked (clawkit gates on {', '.join(sorted(REQUIRES_USED))})")
        if scope is front:
            continue
        for key in scope:
            if key not in METADATA_USED and not (scope is meta and key in NAMESPACES):
                warnings.append(f"{path}:{_front_line(m.group(1), key)}: [FRONTMATTER] metadata {key!r} is not "
                                "acted on by clawkit")
    for key in front:
        if key not in SKILL_MD_USED:
            warnings.append(f"{path}:{_front_line(m.group(1), key)}: [FRONTMATTER] {key!r} is not acted on by clawkit")
    if oses:
        requires["os"] = oses
    name = str(front.get("name") or (p.parent.name if p.name.upper() == "SKILL.MD" else p.stem))
    description = str(front.get("description") or "")
    errors = []
    if not description:
        errors.append(ClawsError(str(path), 2, "FRONTMATTER", "missing `description` (one line saying when to use the skill)"))
    if not body:
        errors.append(ClawsError(str(path), text[: m.end()].count("\n") + 1, "BODY", "the skill has no instructions after the frontmatter"))
    if errors:
        raise SkillCompileError(errors)
    allowed = front.get("allowed-tools") or front.get("allowed_tools") or []
    if isinstance(allowed, str):
        allowed = allowed.replace(",", " ").split()
    folder = p.resolve().parent
    section = (f"### Skill: {name}\n{description}\n\nSkill folder: {folder} (read-only: read the files it "
               f"mentions, such as FORMS.md or scripts/…, with read_skill_file(skill=\"{name}\", path=…))\n\n{body}")
    return CompiledSkill(
        name=name, description=_one_line(description), path=str(path), format="skill.md",
        content_hash=digest or content_hash(text), version=str(front.get("version") or ""),
        keywords=_items(front.get("keywords") or front.get("tags")),
        system_prompt_section=section, allowed_tools=[str(t) for t in allowed], requires=_requires(requires),
        metadata={"frontmatter": front}, warnings=warnings,
        model=str(front.get("modelOverride") or front.get("model") or ""), fallback_models=_items(front.get("fallbackModels")),
    )


def compile_file(path: str | Path, data: bytes | None = None) -> CompiledSkill:
    """Compile a ``.claws`` or ``SKILL.md`` file from disk (or from ``data``)."""
    p = Path(path)
    raw = p.read_bytes() if data is None else data
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillCompileError([ClawsError(str(p), 1, "", f"not UTF-8 text: {exc}")]) from None
    digest = content_hash(raw)
    if p.suffix.lower() == ".claws":
        return compile_claws(text, p, digest)
    return compile_skill_md(text, p, digest)


# --- requirement gating ----------------------------------------------------------------------------


def _dotted(data: Any, key: str) -> Any:
    cur = data
    for part in key.split("."):
        if isinstance(cur, dict):
            cur = cur.get(part)
        else:
            cur = getattr(cur, part, None)
        if cur is None:
            return None
    return cur


def missing_requirements(skill: CompiledSkill, config: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> list[str]:
    """Why ``skill`` cannot run here (empty when it can): missing bins, env vars, config keys."""
    env = os.environ if env is None else env
    reasons = []
    req = skill.requires
    missing_bins = [b for b in req.get("bins", []) if shutil.which(b, path=env.get("PATH")) is None]
    if missing_bins:
        reasons.append("missing binaries: " + ", ".join(missing_bins))
    any_bins = req.get("anyBins", [])
    if any_bins and not any(shutil.which(b, path=env.get("PATH")) for b in any_bins):
        reasons.append("needs one of the binaries: " + ", ".join(any_bins))
    missing_env = [e for e in req.get("env", []) if not env.get(e)]
    if missing_env:
        reasons.append("missing environment variables: " + ", ".join(missing_env))
    missing_cfg = [c for c in req.get("config", []) if not _dotted(config or {}, c)]
    if missing_cfg:
        reasons.append("missing config: " + ", ".join(missing_cfg))
    oses = [OS_NAMES.get(o.lower(), o.lower()) for o in req.get("os", [])]
    if oses and sys.platform not in oses:
        reasons.append(f"needs os {', '.join(req['os'])} (this is {sys.platform})")
    return reasons


__all__ = ["CompiledSkill", "SkillCompileError", "compile_claws", "compile_skill_md", "compile_file",
           "missing_requirements", "content_hash", "tool_name", "TITLES"]
