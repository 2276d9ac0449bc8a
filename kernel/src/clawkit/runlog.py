"""Usage, runs and steps in the session store: the Task/Run/Step/Trace vocabulary, persisted.
:class:`RunRecords` is the part of :class:`clawkit.sessions.SessionStore` that writes and reads
them (queued with the store's other writes, committed when the turn next waits)."""

from __future__ import annotations

import json
import time
from typing import Any

from .session_schema import _RUN_COLUMNS, _RUN_SQL, _STEP_SQL, _USAGE_SQL, _dump
from .types import Usage


class RunRecords:
    """Mixed into :class:`clawkit.sessions.SessionStore` (which provides ``conn``, ``flush``,
    ``_observe``, ``_pending`` and ``_run_end_sql``)."""

    def record_usage(self, session_id: str, run_id: str | None, model: str | None, usage: Usage) -> None:
        """Queue one model call's usage (committed at the turn's end, like events)."""
        self._observe(
            _USAGE_SQL,
            (session_id, run_id, model, usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, usage.cost, time.time()),
        )

    def usage_totals(self, session_id: str) -> dict[str, Any]:
        self.flush()
        r = self.conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0),"
            " COALESCE(SUM(total_tokens),0), SUM(cost) FROM usage WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        return dict(zip(("calls", "prompt_tokens", "completion_tokens", "total_tokens", "cost"), r))

    # runs and steps: the Task/Run/Step/Trace vocabulary, persisted ----------------------

    def run_start(self, run: dict[str, Any]) -> None:
        """Record a run (one turn of one agent) as started, with the turn's first commit (so a run
        whose process died stays visible as ``running``).

        ``run`` holds ``id, trace_id, task_id, session_id, agent`` and optionally
        ``parent_run_id``/``parent_step_id`` (the step of another run that spawned it)
        and ``data`` (anything else worth showing: the tools it was offered).
        """
        self._pending.append((_RUN_SQL, (run["id"], run["trace_id"], run.get("task_id"), run["session_id"], run["agent"],
                              run.get("parent_run_id"), run.get("parent_step_id"), run.get("started") or time.time(),
                              _dump(run.get("data") or {}))))

    def run_end(self, run_id: str, status: str, data: dict[str, Any] | None = None) -> None:
        """Close a run with its outcome (``done``, ``error``, ``cancelled``…); ``data`` is merged in."""
        self._observe(self._run_end_sql, (time.time(), status, _dump(data or {}), run_id))

    def step(self, run_id: str, step_id: str, kind: str, name: str, started: float, ended: float | None,
             status: str, data: dict[str, Any] | None = None) -> None:
        """Record one step of a run: a model call (``llm``) or a tool call (``tool``)."""
        self._observe(_STEP_SQL, (step_id, run_id, kind, name, started, ended, status, _dump(data or {})))

    def _runs(self, where: str, args: tuple) -> list[dict[str, Any]]:
        self.flush()
        rows = self.conn.execute(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs WHERE {where} ORDER BY started", args).fetchall()
        out = []
        for r in rows:
            d = dict(zip(_RUN_COLUMNS, r))
            d["data"] = json.loads(d["data"] or "{}")
            out.append(d)
        return out

    def runs(self, session_id: str) -> list[dict[str, Any]]:
        """A session's runs, oldest first."""
        return self._runs("session_id = ?", (session_id,))

    def child_runs(self, run_id: str) -> list[dict[str, Any]]:
        """Runs another run spawned (sub-agents), oldest first."""
        return self._runs("parent_run_id = ?", (run_id,))

    def trace_runs(self, trace_id: str) -> list[dict[str, Any]]:
        """Every run of one trace, across agents and sessions."""
        return self._runs("trace_id = ?", (trace_id,))

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        self.flush()
        rows = self.conn.execute(
            "SELECT id, kind, name, started, ended, status, data FROM steps WHERE run_id = ? ORDER BY started", (run_id,)
        ).fetchall()
        return [dict(zip(("id", "kind", "name", "started", "ended", "status", "data"), r[:6]), data=json.loads(r[6])) for r in rows]
