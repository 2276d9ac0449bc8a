"""``POST /v1/chat/completions`` and ``GET /v1/models``: the OpenAI-compatible face.

* ``model`` names the agent (``GET /v1/models`` lists those the key may use).
* The agent keeps the conversation: send only the new user message and continue a
  session with the ``X-Clawkit-Session`` header or a ``session_id`` body field (the
  OpenAI client: ``extra_headers=`` / ``extra_body=``). Every answer carries the
  session id in that header and in a ``session_id`` field. Without one, a new session
  starts, seeded with the earlier messages (tool calls and results included).
* Tools run inside the agent; the client sees the reply. Client-side ``tools`` are refused;
  every other field works or is refused with a 400 (openai_request.py).
* A retry (same ``Idempotency-Key``, or the SDKs' ``x-stainless-retry-count``) attaches to
  the turn it repeats instead of starting another (replays.py).
* A session runs one turn at a time: a second request gets 409, or waits with
  ``X-Clawkit-Wait: true`` (``"wait": true``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from clawkit.attachments import AttachmentError

from . import openai_request, replays
from .httperror import HttpError
from .runner import Checkpointed, SessionBusy, UnknownSession
from .turn_settings import CURRENT

log = logging.getLogger("clawkit.serve")
#: on an error after the turn started: the official SDKs must not retry (a retry would be a second turn)
NO_RETRY = {"x-should-retry": "false"}

SESSION_HEADER = "X-Clawkit-Session"

if TYPE_CHECKING:
    from .app import Server


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "clawkit"}


def routes(server: Server) -> list[Route]:
    async def models(request: Request) -> JSONResponse:
        key = server.authorize(request, "read")
        return JSONResponse({"object": "list", "data": [_model(n) for n in server.runner.agent_names() if key.allows_agent(n)]})

    async def model(request: Request) -> JSONResponse:
        key = server.authorize(request, "read")
        name = request.path_params["model"]
        if name not in server.runner.agent_names() or not key.allows_agent(name):
            raise HttpError(404, f"no agent named {name!r} is served (GET /v1/models lists them)", code="model_not_found")
        return JSONResponse(_model(name))

    async def chat_completions(request: Request):
        key = server.authorize(request, "run")
        body = await server.read_json(request)
        req = openai_request.parse(body)
        agent = req.agent
        if agent not in server.runner.agent_names():
            raise HttpError(404, f"no agent named {agent!r} is served (GET /v1/models lists them)", code="model_not_found")
        server.authorize(request, "run", agent)
        if req.attachments and not getattr(server.runner, "attachments", False):
            raise HttpError(400, "image and file parts are not supported by this server's turn runner (queued "
                            "workers take text)", code="unsupported_content")
        if req.settings and not getattr(server.runner, "request_settings", False):
            raise HttpError(400, f"{', '.join(sorted(req.settings))}: per-request model settings are not supported by "
                            "this server's turn runner (queued workers use the agent's own settings)", code="unsupported_parameter")
        idem = request.headers.get("idempotency-key") or None
        fp = replays.fingerprint(key.id, body, request)
        earlier = server.replays.find(key.id, idem, fp, replays.retry_count(request) > 0)
        if earlier is not None:  # a retry: the turn it repeats answers it, no new turn
            return await _replay(server, agent, earlier, req.stream, body)
        requested = request.headers.get(SESSION_HEADER.lower()) or body.get("session_id")
        try:
            sid = server.runner.open_session(agent, requested or None, None if requested else req.earlier)
        except UnknownSession:
            raise HttpError(404, f"no session {requested} for agent {agent!r}", code="session_not_found") from None
        except AttachmentError as exc:  # an earlier message's image for a model without vision
            raise HttpError(400, str(exc), code="bad_attachment") from None
        wait = str(request.headers.get("x-clawkit-wait", body.get("wait", ""))).lower() in ("1", "true", "yes")
        if not wait and server.runner.busy(sid):
            raise HttpError(409, f"session {sid} is running a turn; retry later or send 'X-Clawkit-Wait: true'",
                            code="session_busy")
        attempt = replays.Attempt(fp, sid, f"chatcmpl-{sid}-{time.monotonic_ns()}", int(time.time()))
        queue: asyncio.Queue | None = asyncio.Queue() if req.stream else None
        token = CURRENT.set((sid, req.settings) if req.settings else None)
        try:  # the turn's task copies this context: its model calls see the settings
            task = asyncio.ensure_future(_run(server, agent, sid, req.text, _deliver(server, sid, queue) if queue else None, wait,
                                              req.attachments, req.settings))
        finally:
            CURRENT.reset(token)
        server.replays.begin(key.id, idem, attempt, task)
        if queue is not None:
            task.add_done_callback(lambda t: queue.put_nowait(None))
            return _streaming(agent, attempt, _queued(queue), task, body)
        return _completion(agent, attempt, await asyncio.shield(task))

    return [Route("/v1/models", models), Route("/v1/models/{model:path}", model),
            Route("/v1/chat/completions", chat_completions, methods=["POST"])]


def _usage(result: Any) -> dict[str, int]:
    u = result.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}


def _completion(agent: str, attempt: replays.Attempt, result: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({
        "id": attempt.cid, "object": "chat.completion", "created": attempt.created, "model": agent,
        "session_id": attempt.session_id,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.reply}, "finish_reason": "stop"}],
        "usage": _usage(result),
    }, headers={SESSION_HEADER: attempt.session_id, **(headers or {})})


async def _replay(server: Server, agent: str, attempt: replays.Attempt, stream: bool, body: dict[str, Any]):
    """Answer a retry from the turn it repeats: wait for it if it still runs, else its outcome again."""
    headers = {"X-Clawkit-Replayed": "true"}
    if attempt.interrupted:  # started by another server process (before a restart, or beside this one)
        await _settle_elsewhere(server, agent, attempt, headers)
    if stream:
        async def whole():
            result = await asyncio.shield(attempt.task)
            if result.reply:
                yield result.reply

        return _streaming(agent, attempt, whole(), attempt.task, body, headers)
    try:
        result = await asyncio.shield(attempt.task)
    except HttpError as exc:  # the same error again, marked as a replay
        raise HttpError(exc.status, exc.message, code=exc.code, headers={**exc.headers, **headers}) from None
    return _completion(agent, attempt, result, headers)


#: how long a retry of a turn another server process started waits for that turn's outcome
ELSEWHERE_WAIT = 10.0


async def _settle_elsewhere(server: Server, agent: str, attempt: replays.Attempt, headers: dict[str, str]) -> None:
    """A retry of a turn this process did not start: wait a little for its outcome (another server on
    the same database finishing it) or its answer in the session (resumed after its approval was
    answered); otherwise refuse it — never run it again."""
    deadline = time.monotonic() + ELSEWHERE_WAIT
    while True:
        outcome = server.replays.log.outcome(attempt.cid)
        if outcome is not None:
            server.replays.settle(attempt, outcome)
            return
        reply = _answer_in_session(server, agent, attempt)
        if reply is not None:
            server.replays.settle(attempt, {"reply": reply})
            return
        if time.monotonic() >= deadline:
            raise HttpError(409, f"this request's turn (session {attempt.session_id}) was started by a server process "
                            "that stopped before it ended, or by another one still running it; it is not run again "
                            "(a turn waiting for approval resumes when the approval is answered) — read the session, "
                            f"or send a new request with {SESSION_HEADER}: {attempt.session_id}", code="turn_interrupted",
                            headers={**NO_RETRY, **headers, SESSION_HEADER: attempt.session_id})
        await asyncio.sleep(0.2)


def _answer_in_session(server: Server, agent: str, attempt: replays.Attempt) -> str | None:
    """The answer the request's turn left in its session (it finished in a later process: resumed after
    its approval was answered), or None while it has none."""
    store = server.runner.agents[agent].store
    rows = store.conn.execute("SELECT role, content, data FROM messages WHERE session_id = ? AND created >= ? ORDER BY id",
                              (attempt.session_id, attempt.started)).fetchall()
    if not any(r[0] == "user" for r in rows) or not rows or rows[-1][0] != "assistant" or '"tool_calls"' in (rows[-1][2] or ""):
        return None
    return rows[-1][1]


async def _queued(queue: asyncio.Queue):
    while True:
        item = await queue.get()
        if item is None:
            return
        yield item


def _deliver(server: Server, sid: str, queue: asyncio.Queue):
    def deliver(outbound: Any) -> None:
        if outbound.kind == "stream_chunk" and outbound.content:
            queue.put_nowait(outbound.content)
            server.runner.hub.publish(sid, {"type": "delta", "text": outbound.content})
        elif outbound.kind == "final_reply" and not outbound.metadata.get("streamed") and outbound.content:
            queue.put_nowait(outbound.content)

    return deliver


async def _run(server: Server, agent: str, sid: str, text: str, deliver: Any, wait: bool,
               attachments: list[Any] | None = None, settings: dict[str, Any] | None = None) -> Any:
    from clawkit.errors import ProviderError
    from clawkit.output import OutputValidationError

    try:
        extra: dict[str, Any] = {"attachments": attachments} if attachments else {}
        if settings:  # an in-process turn reads them from CURRENT too; a queued one carries them to its worker
            extra["settings"] = settings
        return await server.runner.turn(agent, sid, text, deliver, wait=wait, **extra)
    except AttachmentError as exc:  # refused before the turn touched the session (a URL: before any model call)
        raise HttpError(400, str(exc), code="bad_attachment") from None
    except SessionBusy:
        raise HttpError(409, f"session {sid} is running a turn; retry later or send 'X-Clawkit-Wait: true'",
                        code="session_busy") from None
    except ProviderError as exc:  # the turn ran (tools may have): a retry would repeat it
        raise HttpError(502, f"the agent's model call failed: {exc}", code="model_error", headers=NO_RETRY) from None
    except OutputValidationError as exc:  # the response_format was asked for and never met
        raise HttpError(502, str(exc), code="output_invalid", headers=NO_RETRY) from None
    except (HttpError, sqlite3.DatabaseError):
        raise
    except Checkpointed as exc:
        raise HttpError(503, str(exc), code="checkpointed", headers={**NO_RETRY, "Retry-After": "5"}) from None
    except Exception as exc:
        log.error("clawkit serve: a chat-completions turn on session %s failed", sid, exc_info=exc)
        raise HttpError(500, f"the turn failed ({type(exc).__name__}); the server log has the details",
                        code="turn_failed", headers=NO_RETRY) from None


def _streaming(agent: str, attempt: replays.Attempt, texts: Any, task: asyncio.Future, body: dict[str, Any],
               headers: dict[str, str] | None = None) -> StreamingResponse:
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return StreamingResponse(_sse(agent, attempt, texts, task, include_usage), media_type="text/event-stream",
                             headers={SESSION_HEADER: attempt.session_id, "Cache-Control": "no-cache", **(headers or {})})


async def _sse(agent: str, attempt: replays.Attempt, texts: Any, task: asyncio.Future, include_usage: bool):
    sid, cid, created = attempt.session_id, attempt.cid, attempt.created

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": agent, "session_id": sid,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(body)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    try:
        async for text in texts:
            yield chunk({"content": text})
        result = await asyncio.shield(task)
    except Exception as exc:  # the status line went out already: the error travels in the stream
        message, code = (exc.message, exc.code) if isinstance(exc, HttpError) else (f"the turn failed: {type(exc).__name__}", "turn_failed")
        yield f"data: {json.dumps({'error': {'message': message, 'code': code}})}\n\n".encode()
        yield b"data: [DONE]\n\n"
        return
    yield chunk({}, "stop")
    if include_usage:
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": agent, "choices": [],
                "usage": _usage(result)}
        yield f"data: {json.dumps(body)}\n\n".encode()
    yield b"data: [DONE]\n\n"
