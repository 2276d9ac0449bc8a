"""The reply vocabulary of the loopback model server: what it answers, and how it fails.

A script is a list of these (consumed one per request) or a function of the
request returning one. Plain strings are shorthand for :meth:`Reply.text`::

    server.script(
        Fault.rate_limit(retry_after=0.1),
        Reply.tool_calls([("get_weather", {"city": "Paris"})]),
        "It is sunny in Paris.",
    )
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Union


def approx_tokens(text: str) -> int:
    """A plausible token count: about one token per word or per four characters."""
    if not text:
        return 0
    return max(len(re.findall(r"\w+|[^\w\s]", text)), (len(text) + 3) // 4)


@dataclass
class ScriptedToolCall:
    """One tool call in a reply; ``arguments`` is the exact text sent (maybe not JSON)."""

    name: str
    arguments: str
    id: str


@dataclass
class Reply:
    """A successful answer: text (``content``) and/or tool calls (``calls``).

    ``chunk_chars`` sets how the text is cut into stream deltas (default: one delta
    per word); ``chunk_delay`` sleeps between stream chunks.
    """

    content: str = ""
    calls: list[ScriptedToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    chunk_chars: int | None = None
    chunk_delay: float = 0.0
    #: Anthropic wire only: thinking blocks sent before the answer (``{"type": "thinking", "thinking": …,
    #: "signature": …}`` or ``{"type": "redacted_thinking", "data": …}``), and prompt-cache usage
    #: (``cache_read_input_tokens`` / ``cache_creation_input_tokens``, on top of the prompt tokens)
    thinking: list[dict[str, Any]] = field(default_factory=list)
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @classmethod
    def text(cls, text: str, **kw: Any) -> "Reply":
        """A plain text answer."""
        return cls(content=text, **kw)

    @classmethod
    def tool_calls(cls, calls: list[tuple[str, Any]], *, text: str = "", **kw: Any) -> "Reply":
        """One or more tool calls ``(name, arguments)``; a dict is sent as JSON, a str verbatim."""
        scripted = []
        for i, (name, args) in enumerate(calls):
            raw = args if isinstance(args, str) else json.dumps(args)
            scripted.append(ScriptedToolCall(name=name, arguments=raw, id=f"call_{i}_{name}"[:40]))
        return cls(content=text, calls=scripted, finish_reason="tool_calls", **kw)

    @classmethod
    def malformed_tool_call(cls, name: str, raw_args_text: str, **kw: Any) -> "Reply":
        """A tool call whose ``arguments`` text is sent verbatim (not valid JSON)."""
        return cls(
            calls=[ScriptedToolCall(name=name, arguments=raw_args_text, id=f"call_0_{name}"[:40])],
            finish_reason="tool_calls",
            **kw,
        )

    def resolved_finish_reason(self) -> str:
        return self.finish_reason or ("tool_calls" if self.calls else "stop")

    def completion_token_count(self) -> int:
        if self.completion_tokens is not None:
            return self.completion_tokens
        return approx_tokens(self.content) + sum(approx_tokens(c.name + c.arguments) for c in self.calls)

    def text_chunks(self) -> list[str]:
        """The text cut into stream deltas, concatenating back to the text exactly."""
        if not self.content:
            return []
        if self.chunk_chars:
            n = self.chunk_chars
            return [self.content[i : i + n] for i in range(0, len(self.content), n)]
        return re.findall(r"\S+\s*|\s+", self.content)


@dataclass
class Fault:
    """A failure the server produces instead of (or while) answering."""

    kind: str
    code: int = 500  # the HTTP status (a field named like the ``status`` constructor would shadow it)
    retry_after: float | None = None
    seconds: float = 0.0
    after_chunks: int = 0
    then: "Reply | None" = None
    message: str = ""
    body: dict[str, Any] | None = None

    @classmethod
    def rate_limit(cls, retry_after: float | None = 0.1, message: str = "Rate limit reached for requests") -> "Fault":
        """429 with an OpenAI-style error body and a ``Retry-After`` header (seconds)."""
        return cls("http", code=429, retry_after=retry_after, message=message)

    @classmethod
    def status(cls, code: int = 500, message: str | None = None, retry_after: float | None = None) -> "Fault":
        """Any HTTP error status (500, 503, 401…) with an OpenAI-style error body."""
        return cls("http", code=code, retry_after=retry_after, message=message or f"scripted HTTP {code}")

    @classmethod
    def delay(cls, seconds: float, then: "Reply | str | None" = None) -> "Fault":
        """Wait ``seconds`` (past the client's timeout, usually) and then answer ``then``."""
        return cls("delay", seconds=seconds, then=as_reply(then) if then is not None else Reply(content="late reply"))

    @classmethod
    def cut_stream(cls, after_chunks: int = 1, reply: "Reply | str | None" = None) -> "Fault":
        """Start answering ``reply`` as SSE, then drop the connection after ``after_chunks``
        content chunks (a non-streaming request gets a truncated JSON body)."""
        default = Reply(content="this answer will be cut off before it ends properly")
        return cls("cut", after_chunks=after_chunks, then=as_reply(reply) if reply is not None else default)

    @classmethod
    def context_overflow(cls, limit: int = 128000, requested: int = 200000) -> "Fault":
        """400 with OpenAI's ``context_length_exceeded`` error."""
        message = (
            f"This model's maximum context length is {limit} tokens. However, your messages "
            f"resulted in {requested} tokens. Please reduce the length of the messages."
        )
        body = {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                          "code": "context_length_exceeded"}}
        return cls("http", code=400, message=message, body=body)

    def error_body(self) -> dict[str, Any]:
        if self.body is not None:
            return self.body
        kind = {429: "requests", 400: "invalid_request_error", 401: "authentication_error"}.get(self.code, "server_error")
        code = {429: "rate_limit_exceeded"}.get(self.code)
        return {"error": {"message": self.message, "type": kind, "param": None, "code": code}}


ScriptItem = Union[Reply, Fault, str, Callable[[Any], Union[Reply, Fault, str]]]


def as_reply(item: Reply | Fault | str) -> Reply | Fault:
    """Normalise shorthand: a string is a text reply."""
    if isinstance(item, str):
        return Reply(content=item)
    if isinstance(item, (Reply, Fault)):
        return item
    raise TypeError(f"a model_server script item must be a Reply, Fault or str, not {type(item).__name__}")
