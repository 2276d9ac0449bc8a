"""Provenance: where the content in a session's context came from.

Safety in clawkit rests on *where data came from*, not on recognising an attack. Any
content that the user did not type — a tool result, a web page, a workspace file, an MCP
result or tool description, a sub-agent's answer — makes the session carry **untrusted
content** from the moment it enters the context, whether or not a scanner flagged it. The
policy then asks before any call that can send data off the machine or change what runs
next (see docs/security.md, "Provenance").

This module is the one place that state is read and written, so plugins that never import
each other agree on it: a plugin that brings outside content in calls :func:`mark_untrusted`;
a gate reads :func:`untrusted_sources`. The record lives in the session's metadata (key
``untrusted``), persisted with the turn, so a resumed session stays marked.

The older key ``tainted`` (set by the shield when a scanner *detected* an injection) still
exists as the alarm; :func:`is_untrusted` is true for either.
"""

from __future__ import annotations

from typing import Any

KEY = "untrusted"
MAX_SOURCES = 20  # the first few sources are what an approval prompt names; the count keeps growing


def _meta(session: Any) -> dict[str, Any] | None:
    try:
        value = session.get(KEY)
    except Exception:
        return None
    return value if isinstance(value, dict) else None


def _entry(source: str, detail: str, kind: str) -> dict[str, str]:
    """One source as it is recorded (bounded, so the metadata stays small)."""
    return {"source": str(source)[:200], "detail": str(detail)[:300], "kind": str(kind)[:40]}


def mark_untrusted(session: Any, source: str, detail: str = "", *, kind: str = "tool") -> bool:
    """Record that content from ``source`` (a tool name, ``mcp:<server>``, ``agent_<name>``…)
    entered the session's context; ``detail`` names what (a file path, a URL, a server).

    ``kind`` is one of ``tool``, ``file``, ``web``, ``mcp``, ``mcp-description``, ``subagent``,
    ``memory``, ``project-file`` or another short word. Returns True when the session was
    not marked before (the first untrusted content: emit an event then)."""
    current = _meta(session)
    first = current is None or not current.get("count")
    record = dict(current) if current else {"count": 0, "sources": []}
    record["count"] = int(record.get("count") or 0) + 1
    sources = list(record.get("sources") or [])
    entry = _entry(source, detail, kind)
    if entry not in sources and len(sources) < MAX_SOURCES:
        sources.append(entry)
    record["sources"] = sources
    session.set(KEY, record)
    return first


def untrusted_sources(session: Any) -> list[dict[str, str]]:
    """The recorded sources of untrusted content (oldest first, at most :data:`MAX_SOURCES`).

    An unreadable record counts as untrusted: a gate that cannot tell must assume the worst."""
    try:
        value = session.get(KEY)
    except Exception:
        return [{"source": "unknown", "detail": "session state unreadable", "kind": "unknown"}]
    if value is None:
        return []
    if not isinstance(value, dict):
        return [{"source": "unknown", "detail": "session state malformed", "kind": "unknown"}]
    return [s for s in value.get("sources") or [] if isinstance(s, dict)]


def is_untrusted(session: Any) -> bool:
    """True when the session's context holds untrusted content (by provenance) or a scanner
    detected an injection in it (the ``tainted`` alarm)."""
    try:
        if session.get("tainted"):
            return True
    except Exception:
        return True
    return bool(untrusted_sources(session))


def describe(session: Any, limit: int = 3) -> str:
    """A short phrase for approval prompts: "after reading `notes.txt` (untrusted file via read_file), …"."""
    sources = untrusted_sources(session)
    parts = []
    for s in sources[:limit]:
        what = s.get("detail") or s.get("source") or "?"
        via = f" via {s.get('source')}" if s.get("source") and s.get("source") != what else ""
        parts.append(f"`{what}` (untrusted {s.get('kind') or 'content'}{via})")
    if not parts:
        try:
            if session.get("tainted"):
                return "after a scanner detected an injection in untrusted content"
        except Exception:
            return "the session's provenance record is unreadable"
        return ""
    more = len(sources) - limit
    return "after reading " + ", ".join(parts) + (f" and {more} more" if more > 0 else "")


# --- tool results ---------------------------------------------------------------------------------

#: argument names that say what a tool read, in the order they are looked for
_DETAIL_ARGS = ("path", "file", "file_path", "filename", "url", "uri", "command", "cmd", "pattern", "query", "dir",
                "directory")


def result_source(call: Any, result: Any) -> tuple[str, str] | None:
    """``(kind, detail)`` of a tool result, or None when the result does not carry outside content.

    A result is untrusted unless its tool declares ``trusted_output`` (checked by the caller) or
    its metadata says ``provenance: {"trusted": true}`` (a plugin vouching for it: a read of a path
    the user marked trusted). ``metadata["provenance"]`` may also name ``kind`` and ``detail``."""
    meta = getattr(result, "metadata", None) or {}
    prov = meta.get("provenance")
    if isinstance(prov, dict) and prov.get("trusted") is True:
        return None
    prov = prov if isinstance(prov, dict) else {}
    args = getattr(call, "arguments", None) or {}
    detail = ""
    for key in _DETAIL_ARGS:
        value = args.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value:
            detail = value
            break
    name = str(getattr(call, "name", "") or "")
    if isinstance(prov.get("source_agent"), str) and not prov.get("detail"):
        detail = f"answer of sub-agent {prov['source_agent']}"
    if meta.get("mcp_server"):
        kind, detail = "mcp", detail or f"MCP server {meta['mcp_server']}"
    elif name.startswith("agent_") or meta.get("provenance_agent"):
        kind = "subagent"
    elif any(k in args for k in ("url", "uri")) or name == "web_search":  # search results are web content
        kind = "web"
    elif any(k in args for k in ("command", "cmd")):
        kind = "command output"
    elif name.startswith("memory"):
        kind = "memory"
    elif any(k in args for k in ("path", "file", "file_path", "filename", "pattern", "dir", "directory")):
        kind = "file"
    else:
        kind = "tool output"
    return str(prov.get("kind") or kind), str(prov.get("detail") or detail or name)


def mark_result(ctx: Any, call: Any, result: Any, trusted_output: bool = False) -> bool:
    """Mark ``ctx.session`` untrusted for a tool result that brought outside content into the context
    (see :func:`result_source`); emit ``provenance.untrusted`` the first time. Returns True then.

    The kernel calls this after ``after_tool_call`` for every executed call, so the record holds
    whichever plugins are installed. A failure marks the session anyway (a gate must assume the worst)."""
    if trusted_output:
        return False
    try:
        found = result_source(call, result)
        if found is None:
            return False
        kind, detail = found
        # a source already recorded is not written again (no metadata write per call of a long session)
        first = bool(mark_once(ctx.session, source=str(call.name), detail=detail, kind=kind))
    except Exception:
        try:
            ctx.session.set("tainted", True)
        except Exception:
            pass
        return False
    if first:
        emit = getattr(ctx, "emit", None)
        if emit is not None:
            emit("provenance.untrusted", tool=call.name, call_id=getattr(call, "id", None), kind=kind,
                 detail=detail, reason=describe(ctx.session))
    return first


def mark_once(session: Any, source: str, detail: str = "", *, kind: str = "tool") -> bool | None:
    """:func:`mark_untrusted` unless this exact source is already recorded (no metadata write then:
    for content that reaches every turn, such as MCP tool descriptions). Returns None when it was
    already recorded, else what :func:`mark_untrusted` returns."""
    entry = _entry(source, detail, kind)
    if entry in untrusted_sources(session):
        return None
    return mark_untrusted(session, source, detail, kind=kind)


# --- sessions started for another one ----------------------------------------------------------------

def inherit(child: Any, parent: Any, source: str, detail: str = "") -> bool:
    """A session started to work for ``parent`` (a sub-agent's) starts with the parent's provenance:
    when the parent holds untrusted content, the task it hands over may carry it (or be steered by it),
    so ``child`` is marked untrusted (kind ``parent``, ``source`` naming the parent) and the parent's
    ``tainted`` alarm carries over. The child's own egress is then asked for like the parent's would
    be: delegating never launders untrusted data. Returns True when the child was marked.

    An unreadable parent record counts as untrusted (:func:`untrusted_sources`)."""
    try:
        untrusted = is_untrusted(parent)
        alarm = bool(parent.get("tainted"))
    except Exception:
        untrusted = alarm = True
    if not untrusted:
        return False
    seen = ""
    try:
        seen = describe(parent)
    except Exception:
        pass
    what = detail or f"task from session {getattr(parent, 'id', '?')}, which holds untrusted content"
    mark_untrusted(child, source, f"{what} ({seen})" if seen else what, kind="parent")
    if alarm:
        child.set("tainted", True)
    return True
