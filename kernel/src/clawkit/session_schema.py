"""The kernel's session tables (:class:`clawkit.sessions.SessionStore` creates them), the SQL the
store writes them with on either backend, and the JSON form of their structured columns."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json as _to_json

from .storage import SQLITE, Column, Index, Table, script

TABLES = (
    Table("sessions", (
        Column("id", nullable=False), Column("agent", nullable=False),
        Column("created", "real", nullable=False), Column("updated", "real", nullable=False),
        Column("metadata", nullable=False, default="{}"), Column("classification"),
    ), primary_key=("id",)),
    Table("messages", (
        Column("id", "integer", autoincrement=True), Column("session_id", nullable=False, references="sessions(id)"),
        Column("run_id"), Column("role", nullable=False), Column("content", nullable=False), Column("data"),
        Column("created", "real", nullable=False),
    ), indexes=(Index("messages_session", ("session_id", "id")),)),
    Table("events", (
        Column("id", "integer", autoincrement=True), Column("session_id"), Column("run_id"),
        Column("type", nullable=False), Column("data", nullable=False), Column("ts", "real", nullable=False),
    ), indexes=(Index("events_session", ("session_id", "id")),)),
    Table("usage", (
        Column("id", "integer", autoincrement=True), Column("session_id", nullable=False), Column("run_id"),
        Column("model"), Column("prompt_tokens", "integer"), Column("completion_tokens", "integer"),
        Column("total_tokens", "integer"), Column("cost", "real"), Column("ts", "real", nullable=False),
    )),
    Table("runs", (
        Column("id", nullable=False), Column("trace_id", nullable=False), Column("task_id"),
        Column("session_id", nullable=False), Column("agent", nullable=False), Column("parent_run_id"),
        Column("parent_step_id"), Column("started", "real", nullable=False), Column("ended", "real"),
        Column("status", nullable=False, default="running"), Column("data", nullable=False, default="{}"),
    ), primary_key=("id",), indexes=(Index("runs_session", ("session_id", "started")),
                                     Index("runs_parent", ("parent_run_id",)), Index("runs_trace", ("trace_id",)))),
    Table("steps", (
        Column("id", nullable=False), Column("run_id", nullable=False), Column("kind", nullable=False), Column("name"),
        Column("started", "real", nullable=False), Column("ended", "real"), Column("status"),
        Column("data", nullable=False, default="{}"),
    ), primary_key=("run_id", "id")),
)
#: the kernel's tables as one SQLite script (what a plain sqlite3 reader may run)
SCHEMA = script(TABLES, SQLITE)


_DATA_FIELDS = {"tool_calls", "tool_result", "blocks", "metadata"}  # a message's structured part (the data column)
_RESULT_TEXT = {"tool_result": {"content"}}
_MESSAGE_SQL = "INSERT INTO messages (session_id, run_id, role, content, data, created) VALUES (?, ?, ?, ?, ?, ?)"
_EVENT_SQL = "INSERT INTO events (session_id, run_id, type, data, ts) VALUES (?, ?, ?, ?, ?)"
_USAGE_SQL = (
    "INSERT INTO usage (session_id, run_id, model, prompt_tokens, completion_tokens, total_tokens, cost, ts)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


_RUN_SQL = (
    "INSERT OR REPLACE INTO runs (id, trace_id, task_id, session_id, agent, parent_run_id, parent_step_id, started, status, data)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)"
)
_RUN_END_SQL = "UPDATE runs SET ended = ?, status = ?, data = json_patch(data, ?) WHERE id = ?"
_META_KEY_SQL = ("UPDATE sessions SET metadata = json_set(CASE WHEN json_valid(metadata) THEN metadata ELSE '{}' END, ?, json(?)),"
                 " updated = ? WHERE id = ?")
_META_KEY_SQL_PG = ("UPDATE sessions SET metadata = jsonb_set(clawkit_jsonb(metadata), ARRAY[?], ?::jsonb)::text,"
                    " updated = ? WHERE id = ?")
# a text column read as JSON, '{}' when it is not an object (json_valid's role on SQLite)
_PG_FUNCTIONS = {"clawkit_jsonb": """CREATE OR REPLACE FUNCTION clawkit_jsonb(t text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
  IF jsonb_typeof(t::jsonb) = 'object' THEN RETURN t::jsonb; END IF;
  RETURN '{}'::jsonb;
EXCEPTION WHEN others THEN RETURN '{}'::jsonb;
END $f$"""}
# PostgreSQL has no json_patch: a top-level merge (every run_end caller passes a flat object)
_RUN_END_SQL_PG = "UPDATE runs SET ended = ?, status = ?, data = (data::jsonb || ?::jsonb)::text WHERE id = ?"
_STEP_SQL = "INSERT OR REPLACE INTO steps (id, run_id, kind, name, started, ended, status, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_RUN_COLUMNS = ("id", "trace_id", "task_id", "session_id", "agent", "parent_run_id", "parent_step_id", "started", "ended", "status", "data")


def _scrub(value: Any) -> Any:
    """``value`` with lone surrogates (not encodable as UTF-8) replaced by U+FFFD, in every string inside."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    return value


def _map_strings(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return value


def _dump_json(value: Any) -> str:
    """:func:`_dump` of JSON values only: anything else raises (ValueError) instead of becoming its ``str``."""
    return _to_json(value).decode()


def _dump(value: Any) -> str:
    """Compact JSON text (pydantic-core's serializer: ~5x json.dumps on the small dicts of events and
    steps); what JSON cannot hold becomes its ``str``. A lone surrogate raises ValueError."""
    return _to_json(value, fallback=str).decode()
