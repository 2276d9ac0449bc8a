"""``model_server``: a real OpenAI-compatible chat-completions server on 127.0.0.1.

Tests point the real provider (litellm, the OpenAI SDK, plain httpx…) at
``server.url`` and script what the "model" answers, including faults::

    def test_weather(model_server):
        model_server.script(
            Fault.rate_limit(retry_after=0.1),
            Reply.tool_calls([("get_weather", {"city": "Paris"})]),
            "It is sunny.",
        )
        ...  # call the model with api_base=model_server.url
        assert model_server.requests[1].body["tools"]

Both plain JSON and SSE streaming (``"stream": true``, with a final usage chunk
when ``stream_options.include_usage``) are spoken, at ``/v1/chat/completions``
and ``/chat/completions``; the same script is also answered in Anthropic's Messages
format at ``/v1/messages`` (see :mod:`clawkit.testing.anthropic_api`). Every
request is recorded on ``server.requests``.
``ModelServer(report_usage=False)`` (or setting ``server.report_usage``) plays a server that
reports no usage at all: none in whole answers, no usage chunk whatever
``include_usage`` asks, zeros in the Anthropic format.
When the script runs out the server answers 400 with a message saying so, so a
test that makes more model calls than it scripted fails clearly.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

from . import anthropic_api as anthropic
from .replies import Fault, Reply, ScriptItem, approx_tokens, as_reply

__all__ = ["ModelServer", "RecordedRequest", "Reply", "Fault", "model_server"]

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
ANTHROPIC_PATHS = ("/v1/messages",)


@dataclass
class RecordedRequest:
    """One request the server received: parsed JSON ``body`` and lower-cased ``headers``."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> Any:
        return self.body

    @property
    def messages(self) -> list[dict[str, Any]]:
        return (self.body or {}).get("messages", []) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        return (self.body or {}).get("tools", []) if isinstance(self.body, dict) else []

    @property
    def stream(self) -> bool:
        return bool(isinstance(self.body, dict) and self.body.get("stream"))

    @property
    def system(self) -> str:
        """The system prompt the request carried, as text, in either wire format (OpenAI: the
        ``system`` messages; Anthropic: the ``system`` field, a string or text blocks)."""
        body = self.body if isinstance(self.body, dict) else {}
        parts: list[Any] = []
        if "system" in body:
            parts.append(body["system"])
        parts.extend(m.get("content") for m in self.messages if isinstance(m, dict) and m.get("role") == "system")
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, list):
                out.extend(b.get("text", "") for b in part if isinstance(b, dict))
        return "\n\n".join(p for p in out if p)


class ModelServer:
    """The loopback model server. Use as a context manager, or ``start()``/``stop()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, report_usage: bool = True) -> None:
        self.report_usage = report_usage  # False: a server that never sends usage (include_usage is ignored)
        self.replies: list[ScriptItem] = []
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[RecordedRequest], Reply | Fault | str] | None = None
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.model_server = self
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> "ModelServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="clawkit-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop open connections (delayed answers are abandoned)."""
        self.stopping.set()
        self._httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            _abort(conn)
        self._httpd.server_close()

    def __enter__(self) -> "ModelServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``: the form Anthropic-style clients want)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The OpenAI-style base URL, ending in ``/v1``: pass it as ``api_base``."""
        return self.base_url + "/v1"

    # --- scripting ----------------------------------------------------------------------

    def script(self, *items: ScriptItem) -> "ModelServer":
        """Set what the server answers: replies consumed in order, or one function
        ``fn(request: RecordedRequest) -> Reply | Fault | str`` called for every request."""
        with self._lock:
            if len(items) == 1 and callable(items[0]) and not isinstance(items[0], (Reply, Fault)):
                self.responder, self.replies = items[0], []
            else:
                self.responder, self.replies = None, list(items)
        return self

    def reset(self) -> None:
        """Forget the script and the recorded requests."""
        with self._lock:
            self.replies, self.requests, self.responder = [], [], None

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        return len(self.replies)

    def _next(self, request: RecordedRequest) -> Reply | Fault:
        with self._lock:
            self.requests.append(request)
            responder = self.responder
            item = self.replies.pop(0) if responder is None and self.replies else None
            count = len(self.requests)
        if responder is not None:
            return as_reply(responder(request))
        if item is None:
            return Fault.status(400, f"model_server: script exhausted — request #{count} has no scripted reply")
        if callable(item) and not isinstance(item, (Reply, Fault)):
            item = item(request)
        return as_reply(item)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's default backlog is 5: fifty clients connecting at once on a busy machine
    # overflow it and some connections are reset (a ReadError on the client)
    request_queue_size = 1024
    model_server: ModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # a bug in the server: show it


def _abort(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every small write waits ~40 ms for an ACK
    timeout = 60
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        ms = self.server.model_server
        with ms._lock:
            ms._conns.add(self.connection)

    def finish(self) -> None:
        ms = self.server.model_server
        with ms._lock:
            ms._conns.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        try:
            self._chat()
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            self.close_connection = True  # the client gave up (timeouts): nothing to answer

    def _chat(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        if path not in CHAT_PATHS + ANTHROPIC_PATHS:
            self._send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            self._send_json(400, {"error": {"message": f"invalid JSON body: {exc}", "type": "invalid_request_error"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        ms = self.server.model_server
        item = ms._next(RecordedRequest("POST", path, headers, body))
        cut_after = None
        if isinstance(item, Fault) and item.kind == "delay":
            ms.stopping.wait(item.seconds)
            item = item.then or Reply(content="")
        if isinstance(item, Fault) and item.kind == "cut":
            cut_after, item = item.after_chunks, item.then or Reply(content="")
        anthropic_style = path in ANTHROPIC_PATHS
        if isinstance(item, Fault):
            extra = {"Retry-After": _fmt_seconds(item.retry_after)} if item.retry_after is not None else {}
            self._send_json(item.code, anthropic.error_body(item) if anthropic_style else item.error_body(), extra)
            return
        body = body if isinstance(body, dict) else {}
        if anthropic_style:
            counted = usage(item, body) if ms.report_usage else {"prompt_tokens": 0, "completion_tokens": 0}
            anthropic.respond(self, item, body, cut_after, counted)
        elif body.get("stream"):
            include_usage = ms.report_usage and bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(item, body, include_usage, cut_after)
        else:
            self._complete(item, body, cut_after)

    # --- answers ------------------------------------------------------------------------

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _complete(self, reply: Reply, body: dict[str, Any], cut_after: int | None) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if reply.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in reply.calls
            ]
        payload = {
            **_envelope(reply, body, "chat.completion"),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.resolved_finish_reason(),
                         "logprobs": None}],
            "usage": usage(reply, body),
        }
        if not self.server.model_server.report_usage:
            del payload["usage"]
        if cut_after is None:
            self._send_json(200, payload)
        else:
            self._send_truncated_json(payload)

    def _send_truncated_json(self, payload: Any) -> None:
        """Announce the whole body, send half of it, and hang up."""
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self._cut()

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")  # so a cut stream is detectably incomplete
        self.end_headers()

    def _stream(self, reply: Reply, body: dict[str, Any], include_usage: bool, cut_after: int | None) -> None:
        self._start_sse()
        base = _envelope(reply, body, "chat.completion.chunk")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

        self._event(chunk({"role": "assistant", "content": ""}))
        for n, delta in enumerate(_deltas(reply)):
            if cut_after is not None and n >= cut_after:
                self._cut()
                return
            if reply.chunk_delay:
                time.sleep(reply.chunk_delay)
            self._event(chunk(delta))
        if cut_after is not None:  # fewer deltas than the cut point: cut before the finish
            self._cut()
            return
        self._event(chunk({}, reply.resolved_finish_reason()))
        if include_usage:
            self._event({**base, "choices": [], "usage": usage(reply, body)})
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")

    def _event(self, payload: dict[str, Any], name: str | None = None) -> None:
        head = b"event: " + name.encode() + b"\n" if name else b""
        self._write_chunk(head + b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

    def _cut(self) -> None:
        """Drop the connection mid-body: the client sees an incomplete response."""
        self.close_connection = True
        _abort(self.connection)


def _deltas(reply: Reply) -> Iterator[dict[str, Any]]:
    for piece in reply.text_chunks():
        yield {"content": piece}
    for i, call in enumerate(reply.calls):
        yield {"tool_calls": [{"index": i, "id": call.id, "type": "function",
                               "function": {"name": call.name, "arguments": ""}}]}
        args = call.arguments
        for start in range(0, len(args), 12):
            yield {"tool_calls": [{"index": i, "function": {"arguments": args[start : start + 12]}}]}


def _envelope(reply: Reply, body: dict[str, Any], obj: str) -> dict[str, Any]:
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": obj, "created": int(time.time()),
            "model": reply.model or str(body.get("model") or "scripted-model"), "system_fingerprint": None}


def usage(reply: Reply, body: dict[str, Any]) -> dict[str, int]:
    """Plausible OpenAI-style usage: scripted numbers, else words/characters counted."""
    if reply.prompt_tokens is not None:
        prompt = reply.prompt_tokens
    else:
        prompt = 0
        for m in body.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            text = content if isinstance(content, str) else json.dumps(content or "")
            prompt += 4 + approx_tokens(text)
            if isinstance(m, dict) and m.get("tool_calls"):
                prompt += approx_tokens(json.dumps(m["tool_calls"]))
        for key in ("tools", "system"):
            if body.get(key):
                prompt += approx_tokens(json.dumps(body[key]))
    completion = reply.completion_token_count()
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _fmt_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


try:
    import pytest
except ImportError:  # the server works without pytest; only the fixture needs it
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def model_server() -> Iterator[ModelServer]:
        """A fresh loopback OpenAI-compatible model server for one test (see :class:`ModelServer`)."""
        with ModelServer() as server:
            yield server
