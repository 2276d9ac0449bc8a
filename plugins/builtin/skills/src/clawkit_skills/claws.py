"""Reading (and writing telemetry back to) ``.claws`` files.

A ``.claws`` file is a sequence of blocks separated by lines that are exactly
``---``. A block is named by a marker (``# NAME``, ``## NAME``, ``/* NAME */`` or
``// NAME``, optionally ``BLOCK 8:`` / ``THE`` in front) in one of its first three
lines; a section without a marker continues the previous block. The parser keeps
the original text and every block's character span, so telemetry can be written
back with every other byte of the file unchanged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# canonical kind -> accepted names (upper case, spaces normalised)
BLOCK_NAMES: dict[str, tuple[str, ...]] = {
    "identity": ("CRYPTOGRAPHIC IDENTITY", "IDENTITY"),
    "manifest": ("MANIFEST",),
    "vibe": ("VIBE",),
    "idl": ("CLAW-IDL", "CLAW IDL", "CLAWIDL", "IDL", "INTERFACE", "INTERFACES"),
    "engine": ("ENGINE",),
    "telemetry": ("TELEMETRY",),
    "state": ("STATE", "STATE CHECKPOINT"),
    "verification": ("VERIFICATION", "FORMAL VERIFICATION", "FORMAL VERIFICATION PROOF", "VERIFICATION PROOF"),
    "lexicon": ("LEXICON",),
    "fingerprint": ("NEURAL FINGERPRINT", "FINGERPRINT"),
}
TITLES = {k: v[0] for k, v in BLOCK_NAMES.items()}
_NAME_TO_KIND = {name: kind for kind, names in BLOCK_NAMES.items() for name in names}
_MARKER = re.compile(
    r"^\s*(?:#{1,2}\s*|/\*+\s*|//\s*)"
    r"(?:BLOCK\s*\d+\s*[:.\-]\s*)?(?:THE\s+)?"
    r"(?P<name>[A-Z][A-Z \-]*?)\s*(?:\*+/)?\s*$",
    re.IGNORECASE,
)
REQUIRED = ("manifest", "vibe", "idl")


class ClawsError(Exception):
    """A problem in a skill file; ``str()`` is ``file:line: [BLOCK] message``."""

    def __init__(self, file: str, line: int, block: str, message: str):
        self.file, self.line, self.block, self.message = str(file), line, block, message
        super().__init__(self.format())

    def format(self) -> str:
        where = f"[{self.block}] " if self.block else ""
        return f"{self.file}:{self.line}: {where}{self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "block": self.block, "message": self.message}


@dataclass
class Block:
    """One block: its kind, the marker as written, and where its body lies in the file."""

    kind: str  # a key of BLOCK_NAMES, "preamble" or "unknown"
    title: str  # the marker text as written ("THE LEXICON")
    marker_line: int  # 1-based; 0 for the preamble
    body_line: int  # 1-based line of the body's first line
    start: int  # character offsets of the body in the file text
    end: int
    text: str = ""

    @property
    def body(self) -> str:
        return self.text


@dataclass
class ClawsFile:
    """A parsed ``.claws`` file: original text, blocks in order, and each block's data."""

    path: str
    text: str
    blocks: list[Block]
    data: dict[str, Any] = field(default_factory=dict)
    errors: list[ClawsError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def block(self, kind: str) -> Block | None:
        return next((b for b in self.blocks if b.kind == kind), None)

    def error(self, block: Block | None, line: int | None, message: str) -> None:
        title = block.title.upper() if block is not None else ""
        self.errors.append(ClawsError(self.path, line or (block.body_line if block else 1), title, message))


MAX_MARKER_LINE = 160  # block markers are short; the pattern backtracks polynomially on long blank-padded lines


def _marker(line: str) -> str | None:
    if len(line) > MAX_MARKER_LINE:
        return None
    m = _MARKER.match(line.rstrip("\r\n"))
    if not m:
        return None
    name = re.sub(r"\s+", " ", m.group("name").strip().upper())
    return name if name in _NAME_TO_KIND else None


def _is_separator(line: str) -> bool:
    return line.rstrip("\r\n").rstrip(" \t") == "---"


def split_blocks(text: str) -> list[Block]:
    """Cut ``text`` into blocks, recording each body's span (nothing is normalised)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))
    # sections: (first line index, end line index exclusive)
    sections: list[tuple[int, int]] = []
    start = 0
    for i, ln in enumerate(lines):
        if _is_separator(ln):
            sections.append((start, i))
            start = i + 1
    sections.append((start, len(lines)))
    blocks: list[Block] = []
    for s, e in sections:
        marker_at, name = None, None
        seen = 0
        for j in range(s, e):
            if not lines[j].strip():
                continue
            name = _marker(lines[j])
            if name is not None:
                marker_at = j
                break
            seen += 1
            if seen >= 3:
                break
        if marker_at is None:
            if blocks:  # continues the previous block, separator line included
                prev = blocks[-1]
                prev.end = offsets[e]
                prev.text = text[prev.start : prev.end]
            else:
                blocks.append(Block("preamble", "", 0, s + 1, offsets[s], offsets[e], text[offsets[s] : offsets[e]]))
            continue
        kind = _NAME_TO_KIND[name]  # type: ignore[index]
        title = re.sub(r"^\s*(?:#{1,2}|/\*+|//)\s*|\s*\*+/\s*$", "", lines[marker_at].rstrip("\r\n")).strip()
        body_start = offsets[marker_at + 1]
        blocks.append(Block(kind, title, marker_at + 1, marker_at + 2, body_start, offsets[e], text[body_start : offsets[e]]))
    return blocks


# --- body parsers --------------------------------------------------------------------------


def strip_json_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments outside strings (keeping line numbers) and
    drop trailing commas, so hand-written JSON blocks parse."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return re.sub(r",(\s*[}\]])", r" \1", "".join(out))


def camel_to_snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def parse_json_block(cf: ClawsFile, block: Block) -> Any:
    cleaned = strip_json_comments(block.text)
    if not cleaned.strip():
        return {}
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError as exc:
        cf.error(block, block.body_line + exc.lineno - 1, f"invalid JSON: {exc.msg} (column {exc.colno})")
        return None


def parse_yaml_block(cf: ClawsFile, block: Block) -> Any:
    # YAML forbids tabs for indentation; hand-written files use them anyway
    text = re.sub(r"(?m)^\t+", lambda m: "    " * len(m.group(0)), block.text)
    from clawkit.errors import ConfigError
    from clawkit.safeyaml import check, safe_load

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        check(node, cf.path if hasattr(cf, "path") else "<claws>")  # alias bombs, deep nesting: bounded
        data = safe_load(text)
    except ConfigError as exc:
        cf.error(block, block.body_line, f"refused YAML: {str(exc).split(': ', 1)[-1]}")
        return None
    except RecursionError:
        cf.error(block, block.body_line, "refused YAML: nested too deeply")
        return None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = block.body_line + (mark.line if mark else 0)
        cf.error(block, line, f"invalid YAML: {getattr(exc, 'problem', None) or exc}")
        return None
    cf.data.setdefault("_nodes", {})[block.kind] = node
    return data


def parse_key_values(block: Block) -> dict[str, str]:
    """``Key: value`` lines (identity, verification); other lines are ignored."""
    out: dict[str, str] = {}
    for ln in block.text.splitlines():
        m = re.match(r"^\s*[-*]?\s*\**([A-Za-z][\w \-]*?)\**\s*:\s*(.*?)\s*$", ln)
        if m:
            out[m.group(1).strip().lower().replace(" ", "_").replace("-", "_")] = m.group(2).strip().strip('"').strip("'")
    return out


_VIBE_KEYS = {"purpose": "purpose", "trigger": "trigger", "triggers": "trigger", "tone": "tone",
              "constraint": "constraints", "constraints": "constraints"}


def parse_vibe(block: Block) -> dict[str, Any]:
    """Purpose / Trigger / Tone / Constraint entries in any of the written forms.

    ``**Purpose:** …``, ``**Purpose**: …``, ``Purpose: …`` and ``## Purpose`` headings
    with text under them; several constraints allowed (repeated entries or a list).
    Other labelled entries are kept in ``extra``; unlabelled text in ``intro``.
    """
    entries: list[tuple[str, list[str]]] = []
    heading = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*:?\s*#*\s*$")
    bold = re.compile(r"^\s*(?:[-*+]\s+)?(\*\*|__)(.+?)(?::\s*\1|\1\s*:)\s*(.*)$")
    plain = re.compile(r"^\s*(?:[-*+]\s+)?(purpose|triggers?|tone|constraints?)\s*:\s*(.*)$", re.IGNORECASE)
    for ln in block.text.splitlines():
        m = heading.match(ln)
        if m:
            entries.append((m.group(1).strip().strip("*_"), []))
            continue
        m = bold.match(ln) or plain.match(ln)
        if m:
            label, rest = (m.group(2), m.group(3)) if m.re is bold else (m.group(1), m.group(2))
            entries.append((label.strip(), [rest] if rest.strip() else []))
            continue
        if not entries:
            entries.append(("", []))
        entries[-1][1].append(ln)
    vibe: dict[str, Any] = {"purpose": "", "trigger": "", "tone": "", "constraints": [], "extra": {}, "intro": ""}
    for label, body in entries:
        text = "\n".join(body).strip()
        key = _VIBE_KEYS.get(label.lower())
        if key == "constraints":
            items = [re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", ln).strip() for ln in body if ln.strip()]
            listed = all(re.match(r"^\s*(?:[-*+]|\d+[.)])\s+", ln) for ln in body if ln.strip()) and len(items) > 1
            vibe["constraints"].extend(items if listed else ([_join(body)] if text else []))
        elif key:
            vibe[key] = (vibe[key] + " " + _join(body)).strip() if vibe[key] else _join(body)
        elif label:
            if text:
                vibe["extra"][label] = _join(body)
        elif text:
            vibe["intro"] = text
    return vibe


def _join(lines: list[str]) -> str:
    """Paragraph text: wrapped lines joined, list items kept on their own lines."""
    out: list[str] = []
    for ln in lines:
        s = ln.strip()
        if not s:
            if out and out[-1] != "\n":
                out.append("\n")
            continue
        if re.match(r"^(?:[-*+]|\d+[.)])\s+", s) or not out or out[-1] == "\n":
            out.append(("\n" if out and out[-1] != "\n" else "") + s)
        else:
            out.append(" " + s)
    return "".join(x for x in out).strip().replace("\n\n\n", "\n\n")


def parse_engine(block: Block) -> dict[str, Any]:
    """``<script lang="…">`` code (kept, never run) and/or numbered steps."""
    text = block.text
    m = re.search(r"<script(?:\s+lang\s*=\s*[\"']?([\w.+-]+)[\"']?)?[^>]*>(.*?)(?:</script>|$)", text, re.S | re.I)
    steps: list[str] = []
    outside = text if m is None else text[: m.start()] + text[m.end() :]
    for ln in outside.splitlines():
        s = re.match(r"^\s*(?:\d+[.)]|[-*+]|step\s*\d+\s*[:.)-])\s+(.+)$", ln, re.I)
        if s:
            steps.append(s.group(1).strip())
    engine: dict[str, Any] = {"steps": steps, "lang": None, "code": None, "prose": outside.strip()}
    if m is not None:
        engine["lang"] = (m.group(1) or "text").lower()
        engine["code"] = m.group(2).strip("\n")
    return engine


# --- the whole file --------------------------------------------------------------------------


def parse_claws(text: str, path: str | Path = "<string>") -> ClawsFile:
    """Parse a ``.claws`` file; problems are collected in ``errors`` (never raised)."""
    cf = ClawsFile(str(path), text, split_blocks(text))
    seen: dict[str, Block] = {}
    for b in cf.blocks:
        if b.kind in ("preamble", "unknown"):
            continue
        if b.kind in seen:
            cf.warnings.append(f"{cf.path}:{b.marker_line}: [{b.title.upper()}] second {TITLES[b.kind]} block ignored")
            continue
        seen[b.kind] = b
        if b.kind == "manifest":
            cf.data["manifest"] = parse_yaml_block(cf, b)
        elif b.kind in ("telemetry", "state", "lexicon"):
            value = parse_json_block(cf, b)
            if value is not None and not isinstance(value, dict):
                cf.error(b, b.body_line, "expected a JSON object")
                value = None
            cf.data[b.kind] = value
        elif b.kind == "fingerprint":
            stripped = b.text.strip()
            cf.data[b.kind] = parse_json_block(cf, b) if stripped.startswith(("{", "//", "/*")) else parse_yaml_block(cf, b)
        elif b.kind in ("identity", "verification"):
            cf.data[b.kind] = parse_key_values(b)
        elif b.kind == "vibe":
            cf.data["vibe"] = parse_vibe(b)
        elif b.kind == "engine":
            cf.data["engine"] = parse_engine(b)
        elif b.kind == "idl":
            cf.data["idl_text"] = b.text
    for kind in REQUIRED:
        if kind not in seen:
            cf.errors.append(ClawsError(cf.path, 1, TITLES[kind], f"missing required block {TITLES[kind]}"))
    return cf


TELEMETRY_KEYS = ("execution_count", "success_rate", "avg_latency_ms", "errors", "last_refactor", "refactor_reason")


def normalise_keys(data: dict[str, Any]) -> dict[str, Any]:
    """camelCase top-level keys → snake_case (values untouched)."""
    return {camel_to_snake(k): v for k, v in data.items()}


def with_telemetry(text: str, telemetry: dict[str, Any]) -> str:
    """``text`` with its TELEMETRY block's body replaced by ``telemetry`` (JSON).

    Every byte outside that body is unchanged; a file without a TELEMETRY block
    gets one appended at the end. Keys are written in snake_case.
    """
    body = json.dumps(normalise_keys(telemetry), indent=2, ensure_ascii=False)
    nl = "\r\n" if "\r\n" in text else "\n"
    body = body.replace("\n", nl)
    blk = next((b for b in split_blocks(text) if b.kind == "telemetry"), None)
    if blk is None:
        sep = "" if text.endswith(("\n", "\r")) or not text else nl
        return f"{text}{sep}---{nl}# TELEMETRY{nl}{body}{nl}"
    old = text[blk.start : blk.end]
    # keep the block's own leading and trailing blank lines
    lead = old[: len(old) - len(old.lstrip("\r\n"))]
    trail = old[len(old.rstrip(" \t\r\n")) :]
    if not trail.endswith(("\n", "\r")) and blk.end < len(text):
        trail += nl
    return text[: blk.start] + lead + body + (trail or (nl if blk.end < len(text) else "")) + text[blk.end :]


def read_telemetry(path: str | Path) -> dict[str, Any]:
    cf = parse_claws(Path(path).read_text(encoding="utf-8"), path)
    return normalise_keys(cf.data.get("telemetry") or {})


def write_telemetry(path: str | Path, telemetry: dict[str, Any]) -> None:
    """Rewrite only the TELEMETRY block of the file at ``path`` (atomic replace)."""
    p = Path(path)
    with open(p, encoding="utf-8", newline="") as fh:
        text = fh.read()
    new = with_telemetry(text, telemetry)
    tmp = p.with_name(f".{p.name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(new)
    tmp.replace(p)
