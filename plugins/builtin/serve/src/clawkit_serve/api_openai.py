"""``POST /v1/chat/completions`` and ``GET /v1/models``: the OpenAI-compatible face.

* ``model`` names the agent (``GET /v1/models`` lists those the key may use).
* The agent keeps the conversation: send only the new user message and continue a
  session with the ``X-Clawkit-Session`` header or a ``session_id`` body field (the
  OpenAI client: ``extra_headers=`` / ``extra_body=``). Every answer carries the
  session id in that header and in a ``session_id`` field. Without one, a new session
  starts, seeded with the earlier user/assistant messages of ``messages``.
* Tools run inside the agent; the client sees the reply.
* A session runs one turn at a time: a second request gets 409, or waits with
  ``X-Clawkit-Wait: true`` (``"wait": true``).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from clawkit.types import Message

from .app import HttpError, Server
from .runner import SessionBusy, UnknownSession

SESSION_HEADER = "X-Clawkit-Session"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def parse(body: dict[str, Any]) -> tuple[str, str, list[Message]]:
    """(agent, the new user text, earlier messages) from a chat-completions body."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise HttpError(400, "'model' is required: the name of a served agent", code="missing_model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise HttpError(400, "'messages' must be a non-empty list of message objects", code="bad_messages")
    last = messages[-1]
    if last.get("role") != "user" or not _text(last.get("content")).strip():
        raise HttpError(400, "the last message must be a user message with text content", code="bad_messages")
    earlier = [Message(role=m["role"], content=_text(m.get("content")))
               for m in messages[:-1] if m.get("role") in ("user", "assistant") and _text(m.get("content"))]
    return model, _text(last["content"]), earlier


def routes(server: Server) -> list[Route]:
    async def models(request: Request) -> JSONResponse:
        key = server.authorize(request, "read")
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "clawkit"}
                for name in server.runner.agent_names() if key.allows_agent(name)]
        return JSONResponse({"object": "list", "data": data})

    async def chat_completions(request: Request):
        server.authorize(request, "run")
        body = await server.read_json(request)
        agent, text, earlier = parse(body)
        if agent not in server.runner.agent_names():
            raise HttpError(404, f"no agent named {agent!r} is served (GET /v1/models lists them)", code="model_not_found")
        server.authorize(request, "run", agent)
        requested = request.headers.get(SESSION_HEADER.lower()) or body.get("session_id")
        try:
            sid = server.runner.open_session(agent, requested or None, None if requested else earlier)
        except UnknownSession:
            raise HttpError(404, f"no session {requested} for agent {agent!r}", code="session_not_found") from None
        wait = str(request.headers.get("x-clawkit-wait", body.get("wait", ""))).lower() in ("1", "true", "yes")
        if not wait and server.runner.busy(sid):
            raise HttpError(409, f"session {sid} is running a turn; retry later or send 'X-Clawkit-Wait: true'",
                            code="session_busy")
        created, cid = int(time.time()), f"chatcmpl-{sid}-{time.monotonic_ns()}"
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(_stream(server, agent, sid, text, wait, cid, created, include_usage),
                                     media_type="text/event-stream", headers={SESSION_HEADER: sid, "Cache-Control": "no-cache"})
        result = await _run(server, agent, sid, text, None, wait)
        u = result.usage
        return JSONResponse({
            "id": cid, "object": "chat.completion", "created": created, "model": agent, "session_id": sid,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": result.reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens},
        }, headers={SESSION_HEADER: sid})

    return [Route("/v1/models", models), Route("/v1/chat/completions", chat_completions, methods=["POST"])]


async def _run(server: Server, agent: str, sid: str, text: str, deliver: Any, wait: bool) -> Any:
    from clawkit.errors import ProviderError

    try:
        return await server.runner.turn(agent, sid, text, deliver, wait=wait)
    except SessionBusy:
        raise HttpError(409, f"session {sid} is running a turn; retry later or send 'X-Clawkit-Wait: true'",
                        code="session_busy") from None
    except ProviderError as exc:
        raise HttpError(502, f"the agent's model call failed: {exc}", code="model_error") from None


async def _stream(server: Server, agent: str, sid: str, text: str, wait: bool, cid: str, created: int, include_usage: bool):
    queue: asyncio.Queue = asyncio.Queue()

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": agent, "session_id": sid,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(body)}\n\n".encode()

    def deliver(outbound: Any) -> None:
        if outbound.kind == "stream_chunk" and outbound.content:
            queue.put_nowait(outbound.content)
            server.runner.hub.publish(sid, {"type": "delta", "text": outbound.content})
        elif outbound.kind == "final_reply" and not outbound.metadata.get("streamed") and outbound.content:
            queue.put_nowait(outbound.content)

    task = asyncio.ensure_future(_run(server, agent, sid, text, deliver, wait))
    task.add_done_callback(lambda t: queue.put_nowait(None))
    yield chunk({"role": "assistant", "content": ""})
    while True:
        item = await queue.get()
        if item is None:
            break
        yield chunk({"content": item})
    try:
        result = task.result()
    except Exception as exc:  # the status line went out already: the error travels in the stream
        message, code = (exc.message, exc.code) if isinstance(exc, HttpError) else (f"the turn failed: {type(exc).__name__}", "turn_failed")
        yield f"data: {json.dumps({'error': {'message': message, 'code': code}})}\n\n".encode()
        yield b"data: [DONE]\n\n"
        return
    yield chunk({}, "stop")
    if include_usage:
        u = result.usage
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": agent, "choices": [],
                "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}}
        yield f"data: {json.dumps(body)}\n\n".encode()
    yield b"data: [DONE]\n\n"
