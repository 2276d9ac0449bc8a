"""What the panel reads beyond the plain API: a session list a person can scan and a session's
turns as a timeline (``GET /api/panel/sessions``, ``GET /api/sessions/{id}/timeline``).

Both read what every storage mode has: the session store's runs, steps, messages and usage
rows (SQLite or the workers' PostgreSQL) and the approval broker's rows. The status of a
session is worked out here once for both modes: ``waiting`` (a pending approval), ``running``
(this server runs or waits on a turn, or a worker's run is open), ``failed`` (its last run
ended in an error) or ``idle``.

Tool output is shown as the tool produced it: the shield's model-facing untrusted-data
wrapper is taken off for display, and the result is flagged ``untrusted`` instead.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

TITLE_CHARS = 120
OUTPUT_CHARS = 20_000
_WRAPPED = re.compile(
    r"\A\[UNTRUSTED DATA (?P<nonce>[0-9a-f]+) from (?P<source>[^\n]*?) — [^\n]*\]\n"
    r"(?P<warning>\[clawkit shield warning: [^\n]*\]\n)?(?P<body>.*)\n\[END UNTRUSTED DATA (?P=nonce)\]\Z", re.S)


def unwrap(text: str) -> tuple[str, dict[str, Any] | None]:
    """The tool's own output and what the wrapper said (source, warning), or the text as is."""
    m = _WRAPPED.match(text or "")
    if m is None:
        return text or "", None
    return m.group("body"), {"source": m.group("source"), "warning": bool(m.group("warning"))}


def tool_output(data: dict[str, Any], content: str) -> dict[str, Any]:
    """A tool message as the panel shows it: the output, whether it is untrusted, and why."""
    result = data.get("tool_result") or {}
    meta = result.get("metadata") or {}
    text, wrapper = unwrap(result.get("content") if isinstance(result.get("content"), str) else content)
    shield = meta.get("shield") if isinstance(meta.get("shield"), dict) else {}
    untrusted = wrapper is not None or meta.get("untrusted") is True or bool(shield)
    return {"call_id": result.get("call_id"), "name": result.get("name"), "output": text[:OUTPUT_CHARS],
            "truncated": len(text) > OUTPUT_CHARS, "is_error": bool(result.get("is_error")), "untrusted": untrusted,
            "source": (wrapper or {}).get("source") or shield.get("source"),
            "injection_warning": bool((wrapper or {}).get("warning") or shield.get("detections"))}


def _one(store: Any, sql: str, args: tuple) -> Any:
    row = store.conn.execute(sql, args).fetchone()
    return row


def _cost(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


class Status:
    """Session status for both runners: pending approvals, the runner's own view, open runs."""

    def __init__(self, server: Any):
        from .runner import InProcessRunner

        self.server = server
        self.local = isinstance(server.runner, InProcessRunner)  # it knows every running turn
        self.waiting: set[str] = {r["session_id"] for r in server.broker.list("pending", limit=1000)}

    def of(self, store: Any, sid: str) -> str:
        if sid in self.waiting:
            return "waiting"
        if self.server.runner.busy(sid):
            return "running"
        last = _one(store, "SELECT status, ended FROM runs WHERE session_id = ? ORDER BY started DESC LIMIT 1", (sid,))
        if last is None:
            return "idle"
        if last[1] is None and not self.local:  # a worker's turn is open (the workers commit its start)
            return "running"
        return "failed" if last[0] in ("error", "failed") else "idle"


def summary(server: Any, key: Any, agent: str | None, limit: int) -> list[dict[str, Any]]:
    runner = server.runner
    status = Status(server)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name, a in runner.agents.items():
        if (agent and name != agent) or not key.allows_agent(name):
            continue
        store = a.store
        store.flush()  # this process's queued usage rows (a running turn's) count too
        for row in store.list(limit=limit * 4):
            if row["agent"] != name or row["id"] in seen:
                continue
            sid = row["id"]
            seen.add(sid)
            first = _one(store, "SELECT content FROM messages WHERE session_id = ? AND role = 'user' ORDER BY id LIMIT 1", (sid,))
            usage = _one(store, "SELECT COALESCE(SUM(total_tokens),0), SUM(cost), COUNT(*) FROM usage WHERE session_id = ?", (sid,))
            title = " ".join(((first[0] if first else "") or "").split())
            out.append({"id": sid, "agent": name, "title": title[:TITLE_CHARS] + ("…" if len(title) > TITLE_CHARS else ""),
                        "label": row.get("label") or "", "status": status.of(store, sid), "messages": row["messages"],
                        "created": row["created"], "last_activity": row["updated"], "tokens": int(usage[0] or 0),
                        "cost": _cost(usage[1]), "model_calls": int(usage[2] or 0)})
    out.sort(key=lambda r: r["last_activity"], reverse=True)
    return out[:limit]


def _bar(kind: str, name: str, start: float, end: float | None, status: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "name": name, "start": start, "end": end, "status": status,
            "duration": None if end is None else max(0.0, end - start), **extra}


def timeline(server: Any, agent: str, sid: str) -> dict[str, Any]:
    """The session's turns (runs), oldest first, each with its bars on one time axis."""
    store = server.runner.agents[agent].store
    store.flush()
    rows = store.conn.execute("SELECT role, content, data, run_id FROM messages WHERE session_id = ? ORDER BY id", (sid,)).fetchall()
    asked: dict[str, str] = {}
    attached: dict[str, list[dict[str, Any]]] = {}  # run id -> its user messages' attachments (name, type, size)
    calls: dict[str, dict[str, Any]] = {}
    outputs: dict[str, dict[str, Any]] = {}
    for role, content, data, run_id in rows:
        d = json.loads(data) if data else {}
        if role == "user" and run_id and run_id not in asked:
            asked[run_id] = content or ""
        if role == "user" and run_id and d.get("blocks"):
            attached.setdefault(run_id, []).extend(
                {k: b.get(k) for k in ("name", "media_type", "size", "sha256", "source")}
                for b in d["blocks"] if b.get("type") in ("image", "file") and b.get("sha256"))
        for c in d.get("tool_calls") or ():
            calls[c.get("id")] = {"arguments": c.get("arguments")}
        if role == "tool":
            out = tool_output(d, content)
            outputs[out["call_id"]] = out
    approvals = [dict(r) for r in server.broker.list(None, session_id=sid, limit=1000)]
    by_run: dict[str, list[dict[str, Any]]] = {}
    for ap in approvals:
        by_run.setdefault(ap.get("run_id") or "", []).append(ap)
    now = time.time()
    turns = []
    for run in store.runs(sid):
        turns.append(_turn(store, run, asked.get(run["id"], ""), calls, outputs, by_run.pop(run["id"], []), now))
        turns[-1]["attachments"] = attached.get(run["id"], [])
    orphans = [ap for aps in by_run.values() for ap in aps]
    if orphans:  # a worker's turn whose run is not committed yet: its approvals still show
        start = min(ap["created"] for ap in orphans)
        turns.append({"id": orphans[0].get("run_id"), "title": asked.get(orphans[0].get("run_id") or "", ""), "started": start, "ended": None, "status": "running",
                      "tokens": 0, "cost": None, "bars": [_approval_bar(ap, now) for ap in orphans]})
    return {"id": sid, "agent": agent, "status": Status(server).of(store, sid), "now": now, "turns": turns,
            "tools": outputs}


def _approval_bar(ap: dict[str, Any], now: float) -> dict[str, Any]:
    end = ap.get("answered") or (None if ap["status"] == "pending" else ap.get("expires"))
    return _bar("approval", ap["tool"], ap["created"], end, ap["status"], call_id=ap.get("call_id"),
                detail={"approval": ap["id"], "reason": ap.get("reason"), "risk": ap.get("risk"),
                        "arguments": ap.get("arguments"), "answered_by": ap.get("answered_by"),
                        "call_hash": ap.get("call_hash"), "waited": (end or now) - ap["created"]})


def _turn(store: Any, run: dict[str, Any], title: str, calls: dict, outputs: dict, approvals: list, now: float) -> dict[str, Any]:
    bars = []
    for st in store.steps(run["id"]):
        usage = (st.get("data") or {}).get("usage") or {}
        if st["kind"] == "llm":
            bars.append(_bar("model", st["name"], st["started"], st["ended"], st["status"],
                             tokens=usage.get("total_tokens", 0), cost=_cost(usage.get("cost")),
                             detail={"prompt_tokens": usage.get("prompt_tokens", 0),
                                     "completion_tokens": usage.get("completion_tokens", 0),
                                     "estimated": bool(usage.get("estimated"))}))
        else:
            out = outputs.get(st["id"]) or {}
            bars.append(_bar("tool", st["name"], st["started"], st["ended"], st["status"], call_id=st["id"],
                             untrusted=bool(out.get("untrusted")),
                             detail={"arguments": (calls.get(st["id"]) or {}).get("arguments"), **out}))
    for child in store.child_runs(run["id"]):
        usage = (child.get("data") or {}).get("usage") or {}
        bars.append(_bar("agent", child["agent"], child["started"], child["ended"], child["status"] or "running",
                         tokens=usage.get("total_tokens", 0), cost=_cost(usage.get("cost")),
                         detail={"run": child["id"], "session": child["session_id"], "usage": usage}))
    bars.extend(_approval_bar(ap, now) for ap in approvals)
    bars.sort(key=lambda b: b["start"])
    usage = (run.get("data") or {}).get("usage") or {}
    tokens = usage.get("total_tokens") or sum(b.get("tokens") or 0 for b in bars if b["kind"] == "model")
    costs = [b["cost"] for b in bars if b["kind"] == "model" and b.get("cost") is not None]
    return {"id": run["id"], "title": " ".join(title.split())[:TITLE_CHARS], "started": run["started"], "ended": run["ended"],
            "status": run["status"] or ("running" if run["ended"] is None else "done"), "tokens": tokens,
            "cost": _cost(usage.get("cost")) if usage.get("cost") is not None else (sum(costs) if costs else None),
            "bars": bars}


def routes(server: Any) -> list[Route]:
    from .api_native import _int

    def who(key: Any) -> dict[str, Any]:
        return {"id": key.id, "name": key.name, "role": key.role, "can": {a: key.can(a) for a in ("run", "approve")}}

    async def me(request: Request) -> JSONResponse:
        return JSONResponse({"key": who(server.authorize(request))})

    async def sessions(request: Request) -> JSONResponse:
        key = server.authorize(request)
        rows = summary(server, key, request.query_params.get("agent"), _int(request, "limit", 100))
        return JSONResponse({"sessions": rows, "key": who(key)})

    async def session_timeline(request: Request) -> JSONResponse:
        sid = request.path_params["session_id"]
        agent = server.agent_for_session(request, sid)
        return JSONResponse(timeline(server, agent, sid))

    return [Route("/api/panel/me", me), Route("/api/panel/sessions", sessions), Route("/api/sessions/{session_id}/timeline", session_timeline)]
