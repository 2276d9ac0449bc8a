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
    entry = {"source": str(source)[:200], "detail": str(detail)[:300], "kind": str(kind)[:40]}
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
    """A short phrase for approval prompts: "after reading `notes.txt` (untrusted file), …"."""
    parts = []
    for s in untrusted_sources(session)[:limit]:
        what = s.get("detail") or s.get("source") or "?"
        parts.append(f"`{what}` ({s.get('kind') or 'untrusted'} via {s.get('source')})")
    if not parts:
        return ""
    more = len(untrusted_sources(session)) - limit
    return "after reading " + ", ".join(parts) + (f" and {more} more" if more > 0 else "")
