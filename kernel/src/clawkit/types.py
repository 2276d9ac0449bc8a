"""The unified types every part of clawkit speaks.

Messages, tool definitions and calls, model requests and responses, and the run
vocabulary (``Task``, ``Run``, ``Step``, ``Trace``). All are pydantic models so
they validate at the edges and serialise to JSON for sessions and exports.
"""

from __future__ import annotations

import os
import threading
import time
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    """Base of the kernel's types: schemas are built on first use, keeping start-up fast."""

    model_config = ConfigDict(defer_build=True)


_random = [b"", 0]  # os.urandom read 4 KiB at a time (see new_id): the bytes, the next offset
_random_lock = threading.Lock()


def _forget_random() -> None:
    global _random_lock
    _random[:] = [b"", 0]  # a forked child never repeats its parent's ids
    _random_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_random)


def new_id(prefix: str) -> str:
    """A short, sortable-enough unique id with a readable prefix (``run_3f2a…``): 8 bytes of the
    kernel's CSPRNG, read 4 KiB at a time — ``os.urandom`` releases the GIL, and a turn makes a
    dozen ids, each a hand-off to whichever thread waits for the GIL (the store's writer, a tool's)."""
    with _random_lock:  # (threads make ids too: no two read the same 8 bytes)
        buf, at = _random
        if at + 8 > len(buf):
            buf, at = os.urandom(4096), 0
            _random[0] = buf
        _random[1] = at + 8
    return f"{prefix}_{buf[at:at + 8].hex()}"


class Risk(str, Enum):
    """How dangerous a tool is; the policy plugins decide what each level requires."""

    SAFE = "safe"
    GUARDED = "guarded"
    UNSAFE = "unsafe"


class ToolDef(Model):
    """A tool as the model sees it: name, description and JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    risk: Risk = Risk.SAFE
    plugin: str | None = None
    #: the result is made by the tool itself (a plan, a confirmation), never content from outside the
    #: user's typing: it does not mark the session untrusted (see :mod:`clawkit.provenance`)
    trusted_output: bool = False
    #: every process the tool starts goes through :func:`clawkit.process.confine`, so a sandbox can jail
    #: it: a gate may ask the sandbox (:func:`clawkit.process.confinement`) whether it can reach the network
    confined: bool = False
    #: the tool hands its work to another session that starts with this session's provenance (a
    #: sub-agent: :func:`clawkit.provenance.inherit`), so that session's own calls are gated as this one's
    #: would be; a gate need not ask for the hand-over itself on account of untrusted content
    inherits_provenance: bool = False
    #: what the tool does, in the names skill manifests use (``fs.read``, ``net.http``…): the gates that
    #: enforce manifests read it through :func:`clawkit.effects.capability_of` (None: the standard table)
    capability: str | None = None

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class ToolCall(Model):
    """One call the model asked for. ``arguments`` may be rewritten by ``before_tool_call``.

    ``raw_arguments`` keeps the text the model sent, so a call whose arguments were
    not valid JSON can still be reported back to it.
    """

    id: str = Field(default_factory=lambda: new_id("call"))
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    argument_error: str | None = None

    def signature(self) -> str:
        """Name plus canonical arguments: identical calls share it."""
        import json

        return self.name + ":" + json.dumps(self.arguments, sort_keys=True, default=str)


class ToolResult(Model):
    """What a tool returned (or the error it became). ``content`` is what the model sees."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


class ContentBlock(Model):
    """A typed piece of a message: text, a tool call, a tool result, or an image reference."""

    type: Literal["text", "tool_call", "tool_result", "image", "file"]
    text: str | None = None
    tool_call: ToolCall | None = None
    tool_result: ToolResult | None = None
    url: str | None = None
    # an attachment (``image`` or ``file``; :mod:`clawkit.attachments`): a reference to bytes stored once
    # per content hash; ``data`` (base64) is filled in memory only, never stored, exported or logged
    media_type: str | None = None
    name: str | None = None
    size: int | None = None
    sha256: str | None = None
    tokens: int | None = None  # the estimated prompt tokens it costs
    source: str | None = None  # the path or URL it came from
    data: str | None = Field(None, exclude=True, repr=False)


class Message(Model):
    """One message in a session. Text-only messages keep ``content`` as a plain string."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_result: ToolResult | None = None
    blocks: list[ContentBlock] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat-completions shape, which litellm translates for every provider."""
        import json

        if self.role == "tool" and self.tool_result is not None:
            return {"role": "tool", "tool_call_id": self.tool_result.call_id, "content": self.content}
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.blocks and self.role == "user":
            from .content_parts import attached, openai_part

            parts = [openai_part(b) for b in attached(self)]
            if parts:
                out["content"] = ([{"type": "text", "text": self.content}] if self.content else []) + parts
        if self.tool_calls:
            out["content"] = self.content or None
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.raw_arguments
                        if c.argument_error and c.raw_arguments is not None
                        else json.dumps(c.arguments),
                    },
                }
                for c in self.tool_calls
            ]
        return out


class Usage(Model):
    """Tokens and cost of one model call (cost in USD, when the provider knows it).

    ``estimated`` is true when the provider reported no usage and the tokens were counted
    locally (:func:`clawkit.tokens.estimate_usage`); a sum is estimated when any part is."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None
    estimated: bool = False
    #: prompt tokens read from / written to the provider's prompt cache (Anthropic's
    #: cache_read_input_tokens / cache_creation_input_tokens); both are included in ``prompt_tokens``
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    #: completion tokens spent thinking (OpenAI's reasoning_tokens; for Anthropic counted from the
    #: thinking text); included in ``completion_tokens``
    reasoning_tokens: int = 0


class LlmRequest(Model):
    """Everything one model call needs. ``before_llm_call`` may change any field."""

    model: str
    messages: list[Message]
    system: str = ""
    tools: list[ToolDef] = Field(default_factory=list)
    stream: bool = True
    reasoning_effort: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: an OpenAI-style ``response_format`` the answer must follow (typed output, :mod:`clawkit.output`)
    response_format: dict[str, Any] | None = None
    #: which tool the model must call: None (it chooses), ``"required"`` (one of ``tools``), or
    #: ``{"name": tool}`` (that one); each provider writes it in its wire's form
    tool_choice: str | dict[str, Any] | None = None

    def openai_messages(self) -> list[dict[str, Any]]:
        head = [{"role": "system", "content": self.system}] if self.system else []
        return head + [m.to_openai() for m in self.messages]


class LlmResponse(Model):
    """The model's answer: text, tool calls, usage, and why it stopped."""

    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    model: str | None = None
    id: str | None = None  # the provider's response id (``chatcmpl-…``, ``msg_…``) when it sent one
    #: the model's thinking blocks as the provider sent them (Anthropic: ``thinking`` with its
    #: ``signature``, ``redacted_thinking`` with its ``data``): kept on the assistant message
    #: (``metadata["thinking"]``) and sent back with it, as extended thinking with tools requires
    thinking: list[dict[str, Any]] = Field(default_factory=list)


class Decision(Model):
    """What a ``before_tool_call`` gate says about a call."""

    action: Literal["allow", "block", "require_approval"]
    reason: str = ""
    plugin: str | None = None

    @classmethod
    def block(cls, reason: str) -> "Decision":
        return cls(action="block", reason=reason)

    @classmethod
    def require_approval(cls, reason: str) -> "Decision":
        return cls(action="require_approval", reason=reason)

    @classmethod
    def allow(cls, reason: str = "") -> "Decision":
        return cls(action="allow", reason=reason)


DeliveryKind = Literal["stream_chunk", "final_reply", "tool_call_display", "tool_result_display", "routed", "notice"]


class Outbound(Model):
    """Something about to be delivered to a user or another agent.

    ``message_sending`` implementations may rewrite ``content`` or set ``cancelled``.
    """

    kind: DeliveryKind
    content: str
    target: str = "user"
    cancelled: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)

    def cancel(self) -> None:
        self.cancelled = True


class Event(Model):
    """An observable fact: ``session.start``, ``tool.blocked``, ``hook.error``…"""

    type: str
    session_id: str | None = None
    run_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    ts: float = Field(default_factory=time.time)


class Trace(Model):
    """Correlates everything one user request caused, across agents."""

    id: str = Field(default_factory=lambda: new_id("trace"))


class Task(Model):
    """What the user asked for: one inbound message and the work it starts."""

    id: str = Field(default_factory=lambda: new_id("task"))
    trace_id: str
    session_id: str
    text: str


class Run(Model):
    """One execution of a task by one agent (a turn): model calls and tool calls."""

    id: str = Field(default_factory=lambda: new_id("run"))
    task_id: str
    trace_id: str
    agent: str
    started: float = Field(default_factory=time.time)


class Step(Model):
    """One unit inside a run: a model call or a tool call."""

    id: str = Field(default_factory=lambda: new_id("step"))
    run_id: str
    kind: Literal["llm", "tool"]
    name: str = ""


class SessionClassification(Model):
    """What a session is about; prompt contributors are selected by it."""

    label: str = Field(default="", max_length=79)
    topic: str = "other"
    complexity: str = "simple"
    domain: list[str] = Field(default_factory=list, max_length=3)
    flags: list[str] = Field(default_factory=list, max_length=2)
