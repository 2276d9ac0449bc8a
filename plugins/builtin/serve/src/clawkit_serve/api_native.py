"""The native API (``/api/...``): sessions, live events, approvals, the audit ledger.

See docs/serve.md for the reference; every route needs a key (read unless noted).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from clawkit.attachments import Attachment, AttachmentError
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from . import audit
from .httperror import HttpError
from .approvals import ApprovalError, answered_by, public
from .runner import SessionBusy
from .forget_api import delete_route

SHOWN_EVENTS = ("tool.", "turn.", "session.", "approval.", "shield.", "sequence.", "directive.", "llm.", "compaction")

if TYPE_CHECKING:
    from .app import Server


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event.get('type', 'message')}\ndata: {json.dumps(event, default=str)}\n\n".encode()


def _turn_json(result: Any) -> dict[str, Any]:
    return {**result.as_json(), "run_id": result.run_id, "stop_reason": result.stop_reason}


def routes(server: Server) -> list[Route]:
    runner = server.runner

    async def agents(request: Request) -> JSONResponse:
        key = server.authorize(request)
        out = [{"name": n, "model": a.config.model.name, "tools": [t.name for t in a.tools.visible()]}
               for n, a in runner.agents.items() if key.allows_agent(n)]
        return JSONResponse({"agents": out, "key": {"id": key.id, "name": key.name, "role": key.role}})

    async def list_sessions(request: Request) -> JSONResponse:
        key = server.authorize(request)
        wanted = request.query_params.get("agent")
        limit = _int(request, "limit", 50)
        out = []
        seen: set[str] = set()
        for name, a in runner.agents.items():
            if (wanted and name != wanted) or not key.allows_agent(name):
                continue
            for row in a.store.list(limit=limit * 4):
                if row["agent"] == name and row["id"] not in seen:
                    seen.add(row["id"])
                    out.append({**row, "busy": runner.busy(row["id"])})
        out.sort(key=lambda r: r["updated"], reverse=True)
        return JSONResponse({"sessions": out[:limit]})

    async def create_session(request: Request):
        body = await server.read_json(request)
        agent = body.get("agent")
        if agent not in runner.agent_names():
            server.authorize(request, "run")
            raise HttpError(404, f"no agent named {agent!r} is served", code="agent_not_found")
        server.authorize(request, "run", agent)
        sid = runner.open_session(agent, None)
        if not body.get("message"):
            return JSONResponse({"session_id": sid, "agent": agent}, status_code=201)
        return await _turn(request, agent, sid, body)

    async def post_message(request: Request):
        sid = request.path_params["session_id"]
        agent = server.agent_for_session(request, sid, "run")
        body = await server.read_json(request)
        if not isinstance(body.get("message"), str) or not body["message"].strip():
            raise HttpError(400, "'message' (a non-empty string) is required", code="missing_message")
        return await _turn(request, agent, sid, body)

    async def _turn(request: Request, agent: str, sid: str, body: dict[str, Any]):
        wait = bool(body.get("wait")) or request.headers.get("x-clawkit-wait", "").lower() in ("1", "true", "yes")
        attached = attachments(body)
        if attached and not getattr(runner, "attachments", False):
            raise HttpError(400, "'attachments' are not supported by this server's turn runner", code="unsupported_content")
        extra = {"attachments": attached} if attached else {}
        if not wait and runner.busy(sid):
            raise HttpError(409, f"session {sid} is running a turn; retry later or pass \"wait\": true", code="session_busy")
        if not body.get("stream"):
            try:
                result = await runner.turn(agent, sid, body["message"], _hub_deliver(runner, sid), wait=wait, **extra)
            except SessionBusy:
                raise HttpError(409, f"session {sid} is running a turn", code="session_busy") from None
            except AttachmentError as exc:  # refused before the turn touched the session
                raise HttpError(400, str(exc), code="bad_attachment") from None
            return JSONResponse(_turn_json(result), headers={"X-Clawkit-Session": sid})
        queue = runner.hub.subscribe(sid)

        async def events():
            task = asyncio.ensure_future(runner.turn(agent, sid, body["message"], _hub_deliver(runner, sid), wait=wait,
                                                     **extra))
            try:
                yield sse({"type": "session", "session_id": sid})
                while not task.done() or not queue.empty():
                    get = asyncio.ensure_future(queue.get())
                    done, _ = await asyncio.wait({get, task}, return_when=asyncio.FIRST_COMPLETED)
                    if get in done:
                        yield sse(get.result())
                    else:
                        get.cancel()
                try:
                    yield sse({"type": "result", **_turn_json(task.result())})
                except Exception as exc:
                    yield sse({"type": "error", "message": f"{type(exc).__name__}: {exc}"})
            finally:
                runner.hub.unsubscribe(sid, queue)

        return StreamingResponse(events(), media_type="text/event-stream", headers={"X-Clawkit-Session": sid, "Cache-Control": "no-cache"})

    async def transcript(request: Request) -> JSONResponse:
        sid = request.path_params["session_id"]
        agent = server.agent_for_session(request, sid)
        store = runner.agents[agent].store
        row = store.row(sid)
        meta = store.load_metadata(sid)
        classification = store.load_classification(sid)
        events = [e for e in store.events(sid) if e["type"].startswith(SHOWN_EVENTS)][-500:]
        return JSONResponse({
            "id": sid, "agent": agent, "created": row["created"], "updated": row["updated"], "busy": runner.busy(sid),
            "classification": classification.model_dump() if classification else None,
            "plan": meta.get("plan"), "usage": store.usage_totals(sid),
            "messages": [m.model_dump(exclude_defaults=True) for m in store.messages(sid)],
            "events": events, "approvals": [public(r) for r in server.broker.list(None, session_id=sid)],
        })

    async def session_events(request: Request):
        sid = request.path_params["session_id"]
        server.agent_for_session(request, sid)
        return _live(runner, sid, None)

    async def all_events(request: Request):
        key = server.authorize(request)
        return _live(runner, None, key)

    async def approvals(request: Request) -> JSONResponse:
        key = server.authorize(request)
        status = request.query_params.get("status", "pending")
        rows = server.broker.list(None if status == "all" else status, request.query_params.get("session"), _int(request, "limit", 100))
        return JSONResponse({"approvals": [public(r) for r in rows if key.allows_agent(r["agent"])]})

    async def approval(request: Request) -> JSONResponse:
        row = _approval_row(server, request, "read")
        return JSONResponse(public(row))

    async def answer(request: Request) -> JSONResponse:
        row = _approval_row(server, request, "approve")
        body = await server.read_json(request)
        decision = body.get("decision")
        if decision not in ("approve", "deny"):
            raise HttpError(400, "'decision' must be \"approve\" or \"deny\"", code="bad_decision")
        key = request.scope["clawkit.key"]
        try:
            done = server.broker.answer(row["id"], decision == "approve", by=answered_by(key.id, key.name),
                                        call_hash=body.get("call_hash"), note=body.get("note"))
        except ApprovalError as exc:
            raise HttpError(exc.status, str(exc), code="approval_" + {404: "not_found", 409: "conflict", 410: "expired"}.get(exc.status, "error")) from None
        return JSONResponse(public(done))

    async def audit_list(request: Request) -> JSONResponse:
        agent = _audit_agent(server, request)
        q = request.query_params
        try:
            recs = await audit.records(server.db_of(agent), session=q.get("session"), tool=q.get("tool"),
                                       decision=q.get("decision"), kind=q.get("kind"), limit=_int(request, "limit", 200))
        except audit.AuditUnavailable as exc:
            raise HttpError(404, str(exc), code="audit_unavailable") from None
        return JSONResponse({"agent": agent, "records": recs})

    async def audit_verify(request: Request) -> JSONResponse:
        agent = _audit_agent(server, request)
        try:
            result = await audit.verify(server.db_of(agent))
        except audit.AuditUnavailable as exc:
            raise HttpError(404, str(exc), code="audit_unavailable") from None
        return JSONResponse({"agent": agent, **result})

    return [
        Route("/api/agents", agents),
        Route("/api/sessions", list_sessions, methods=["GET"]),
        Route("/api/sessions", create_session, methods=["POST"]),
        Route("/api/sessions/{session_id}", transcript, methods=["GET"]),
        Route("/api/sessions/{session_id}", delete_route(server), methods=["DELETE"]),  # forget_api.py
        Route("/api/sessions/{session_id}/messages", post_message, methods=["POST"]),
        Route("/api/sessions/{session_id}/events", session_events),
        Route("/api/events", all_events),
        Route("/api/approvals", approvals),
        Route("/api/approvals/{approval_id}", approval, methods=["GET"]),
        Route("/api/approvals/{approval_id}", answer, methods=["POST"]),
        Route("/api/audit", audit_list),
        Route("/api/audit/verify", audit_verify),
    ]


def attachments(body: dict[str, Any]) -> list[Any]:
    """``"attachments": [{"data": <base64>, "name"?}, {"url": "https://…"}]`` of a native message
    (docs/serve.md): bytes typed and bounded by the turn, a URL fetched through its gates."""
    items = body.get("attachments")
    if items is None:
        return []
    if not isinstance(items, list):
        raise HttpError(400, "'attachments' must be a list of {\"data\": base64, \"name\"} or {\"url\"} objects",
                        code="bad_attachment")
    out: list[Any] = []
    for i, item in enumerate(items):
        where = f"attachments[{i}]"
        if not isinstance(item, dict) or ("data" in item) == ("url" in item):
            raise HttpError(400, f"{where}: give exactly one of 'data' (base64) or 'url'", code="bad_attachment")
        if "url" in item:
            if not isinstance(item["url"], str) or not item["url"].lower().startswith(("https://", "http://")):
                raise HttpError(400, f"{where}.url: an http(s) URL is required", code="bad_attachment")
            out.append(item["url"])
            continue
        try:
            data = base64.b64decode(str(item["data"]), validate=True)
        except (binascii.Error, ValueError):
            raise HttpError(400, f"{where}.data: not valid base64", code="bad_attachment") from None
        out.append(Attachment(data, str(item.get("name") or f"attachment-{i}")[:200], "upload"))
    return out


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 0 < int(raw) <= 10000:
        raise HttpError(400, f"query parameter {name!r} must be an integer from 1 to 10000", code="bad_query")
    return int(raw)


def _hub_deliver(runner: Any, sid: str):
    def deliver(outbound: Any) -> None:
        if outbound.kind == "stream_chunk" and outbound.content:
            runner.hub.publish(sid, {"type": "delta", "text": outbound.content})

    return deliver


def _live(runner: Any, sid: str | None, key: Any) -> StreamingResponse:
    queue = runner.hub.subscribe(sid)

    async def events():
        try:
            yield b": connected\n\n"
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), 15)
                except asyncio.TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if key is not None and not _visible(runner, event, key):
                    continue
                yield sse(event)
        finally:
            runner.hub.unsubscribe(sid, queue)

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _visible(runner: Any, event: dict[str, Any], key: Any) -> bool:
    sid = event.get("session_id")
    if not sid:
        return False
    try:
        return key.allows_agent(runner.agent_of(sid))
    except KeyError:
        return False


def _approval_row(server: Server, request: Request, action: str) -> dict[str, Any]:
    server.authorize(request, action)
    row = server.broker.get(request.path_params["approval_id"])
    if row is None:
        raise HttpError(404, f"no approval {request.path_params['approval_id']}", code="approval_not_found")
    server.authorize(request, action, row["agent"])
    return row


def _audit_agent(server: Server, request: Request) -> str:
    key = server.authorize(request)
    agent = request.query_params.get("agent") or next((n for n in server.runner.agent_names() if key.allows_agent(n)), None)
    if agent is None or agent not in server.runner.agent_names():
        raise HttpError(404, f"no agent named {agent!r} is served", code="agent_not_found")
    server.authorize(request, "read", agent)
    return agent
