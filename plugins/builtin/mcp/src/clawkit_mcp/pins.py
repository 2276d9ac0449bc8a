"""What each MCP tool looked like when it was first seen, kept in the workspace's state database.

An MCP server's tool descriptions and input schemas are content from outside (the server decides
them, and can change them at any time: ``tools/list_changed``, a new version of its process). The
first description and schema of each tool are pinned in the table ``mcp_tool_pins``; a later
listing that differs is a *change*: shown (old vs new) in an ``mcp.tool_changed`` event and in the
approval reason, and the tool needs approval before it runs again (the plugin's
``before_tool_call``). Running it after that approval accepts the new version as the pin.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from clawkit.storage import Column, Table, declare

TABLE = Table("mcp_tool_pins", (
    Column("server", nullable=False), Column("tool", nullable=False), Column("description"), Column("input_schema"),
    Column("digest", nullable=False), Column("first_seen", "real", nullable=False), Column("updated", "real", nullable=False),
), primary_key=("server", "tool"))

SHOWN = 400  # characters of each description/schema shown in a change


def canonical_schema(schema: Any) -> str:
    return json.dumps(schema if schema is not None else {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def digest(description: str, schema: str) -> str:
    return hashlib.sha256(f"{description}\n{schema}".encode("utf-8", "surrogatepass")).hexdigest()


def _db(ctx: Any) -> Any:
    conn = ctx.session.store.conn
    declare(conn, TABLE)
    return conn


def check(ctx: Any, server: str, tool: str, description: str, schema: str) -> dict[str, Any] | None:
    """Pin ``tool`` of ``server`` at first sight; a later difference is returned as a change
    (``{"old_description", "old_schema", "new_description", "new_schema"}``), None when unchanged."""
    conn = _db(ctx)
    new = digest(description, schema)
    row = conn.execute("SELECT description, input_schema, digest FROM mcp_tool_pins WHERE server = ? AND tool = ?",
                       (server, tool)).fetchone()
    if row is None:
        now = time.time()
        conn.execute("INSERT INTO mcp_tool_pins (server, tool, description, input_schema, digest, first_seen, updated) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)", (server, tool, description, schema, new, now, now))
        return None
    if row[2] == new:
        return None
    return {"old_description": row[0] or "", "old_schema": row[1] or "{}", "new_description": description,
            "new_schema": schema}


def accept(ctx: Any, server: str, tool: str, description: str, schema: str) -> None:
    """The person approved a call of the changed tool: its current version becomes the pin."""
    conn = _db(ctx)
    conn.execute("UPDATE mcp_tool_pins SET description = ?, input_schema = ?, digest = ?, updated = ? "
                 "WHERE server = ? AND tool = ?", (description, schema, digest(description, schema), time.time(),
                                                    server, tool))


def _short(text: str) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= SHOWN else text[:SHOWN] + f"… ({len(text)} characters)"


def explain(server: str, tool: str, change: dict[str, Any]) -> str:
    """The change, old vs new, for an approval reason."""
    parts = []
    if change["old_description"] != change["new_description"]:
        parts.append(f"description was {_short(change['old_description'])!r}, now {_short(change['new_description'])!r}")
    if change["old_schema"] != change["new_schema"]:
        parts.append(f"input schema was {_short(change['old_schema'])}, now {_short(change['new_schema'])}")
    return (f"MCP server {server!r} changed tool {tool!r} since it was first used ({'; '.join(parts)}); "
            "approving runs it and accepts the new version")
