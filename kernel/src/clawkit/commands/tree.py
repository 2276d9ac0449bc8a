"""``clawkit sessions show ID --tree``: a session's runs and, under each tool step that
spawned one, the sub-agent runs (in their own sessions) — tools, usage and outcome."""

from __future__ import annotations

from typing import Any


def _usage(run: dict[str, Any]) -> dict[str, Any]:
    return dict((run.get("data") or {}).get("usage") or {})


def rolled_up(store: Any, run: dict[str, Any]) -> dict[str, Any]:
    """A run's usage as recorded (the kernel already adds its children's in)."""
    u = _usage(run)
    return {"tokens": int(u.get("total_tokens") or 0), "cost": u.get("cost")}


def _line(run: dict[str, Any], usage: dict[str, Any]) -> str:
    tools = ", ".join((run.get("data") or {}).get("tools") or []) or "none"
    cost = f" ${usage['cost']:.6f}" if usage.get("cost") else ""
    took = f" {run['ended'] - run['started']:.2f}s" if run.get("ended") else ""
    status = run.get("status") or "?"
    if status == "running" and run.get("ended") is None:
        status = "unfinished"
    return (f"{run['agent']}  run {run['id']}  session {run['session_id']}  [{status}]{took}  "
            f"tokens {usage['tokens']}{cost}  tools: {tools}")


def print_tree(store: Any, session_id: str, out: Any = print) -> None:
    runs = store.runs(session_id)
    if not runs:
        out(f"session {session_id}: no runs recorded")
        return
    out(f"session {session_id}  agent {runs[0]['agent']}  trace {runs[0]['trace_id']}")

    def walk(run: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        head = "" if top else prefix + ("└─ " if last else "├─ ")
        out(head + _line(run, rolled_up(store, run)))
        kids = store.child_runs(run["id"])
        inner = prefix if top else prefix + ("   " if last else "│  ")
        steps = {s["id"]: s for s in store.steps(run["id"])}
        for i, kid in enumerate(kids):
            step = steps.get(kid.get("parent_step_id") or "")
            if step is not None:
                out(f"{inner}{'└─' if i == len(kids) - 1 else '├─'} via {step['name']} ({step['status']})")
            walk(kid, inner + ("   " if i == len(kids) - 1 else "│  "), True, False)

    for run in runs:
        walk(run, "  ", True, True)
