"""A chat-completions body, checked: every field either works or is refused with a JSON 400
that says why (docs/serve.md lists them). OpenAI itself refuses unknown fields; so does this.

* sampling fields (``temperature``, ``top_p``, ``max_tokens``…, ``response_format``) go to the
  agent's model for this turn's calls, within the agent's own limits (``max_tokens`` is capped
  at the agent's ``model.max_tokens`` when it sets one);
* metadata fields the agent has no use for (``user``, ``metadata``, ``store``…) are accepted
  and have no effect;
* what the agent cannot honour — client-side ``tools`` (tools run inside the agent), ``n`` > 1,
  ``logprobs``, ``logit_bias``, audio — is refused;
* ``image_url`` parts (a ``data:`` URL or an ``https://`` URL) and ``file`` parts (``file_data``) are
  attachments (docs/attachments.md): typed from their bytes, bounded, an https URL fetched through the
  agent's ``web_fetch`` gates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from clawkit.types import Message, ToolCall, ToolResult

from .httperror import HttpError

#: fields of our own (the session to continue, waiting for a busy one)
OWN = {"session_id", "wait"}
#: accepted, no effect on the agent
IGNORED = {"user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier", "stream_options",
           "parallel_tool_calls"}
#: passed to the model: name -> (kind, low, high)
SAMPLING: dict[str, tuple[type | tuple[type, ...], float | None, float | None]] = {
    "temperature": ((int, float), 0, 2), "top_p": ((int, float), 0, 1),
    "presence_penalty": ((int, float), -2, 2), "frequency_penalty": ((int, float), -2, 2),
    "seed": (int, None, None), "max_tokens": (int, 1, None), "max_completion_tokens": (int, 1, None),
}
REFUSED = {
    "tools": "client-side tools are not supported: the agent's own tools run inside the server (the client sees the reply)",
    "functions": "client-side functions are not supported: the agent's own tools run inside the server",
    "function_call": "client-side functions are not supported: the agent's own tools run inside the server",
    "logit_bias": "'logit_bias' is not supported: the agent's model settings are its own",
    "top_logprobs": "'top_logprobs' is not supported: the reply of an agent turn has no log probabilities",
    "audio": "audio output is not supported: an agent replies with text",
    "prediction": "'prediction' (predicted outputs) is not supported",
    "web_search_options": "'web_search_options' is not supported: web access is one of the agent's own tools, if it has it",
}
RESPONSE_FORMATS = ("text", "json_object", "json_schema")


@dataclass
class ChatRequest:
    agent: str
    text: str  # the new user message
    earlier: list[Message] = field(default_factory=list)  # seeds a new session
    settings: dict[str, Any] = field(default_factory=dict)  # model settings for this turn
    stream: bool = False
    attachments: list[Any] = field(default_factory=list)  # the new message's image/file parts


def bad(message: str, code: str = "invalid_request") -> HttpError:
    return HttpError(400, message, code=code)


def parse(body: dict[str, Any]) -> ChatRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("'model' is required: the name of a served agent", "missing_model")
    settings = _settings(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise bad("'messages' must be a non-empty list of message objects", "bad_messages")
    last = messages[-1]
    at = len(messages) - 1
    text = text_of(last.get("content"), at) if last.get("role") == "user" else ""
    parts = attachments_of(last.get("content"), at) if last.get("role") == "user" else []
    if not text.strip() and not parts:
        raise bad("the last message must be a user message with text content (or image/file parts)", "bad_messages")
    return ChatRequest(model, text, history(messages[:-1]), settings, bool(body.get("stream")), parts)


def _settings(body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in body.items():
        if name in ("model", "messages", "stream") or name in OWN or name in IGNORED or value is None:
            continue
        if name in REFUSED:
            if name == "tools" and value == []:
                continue
            raise bad(REFUSED[name], "unsupported_parameter")
        if name in SAMPLING:
            kind, low, high = SAMPLING[name]
            if isinstance(value, bool) or not isinstance(value, kind) or (low is not None and value < low) \
                    or (high is not None and value > high):
                span = f" from {low} to {high}" if high is not None else (f" of at least {low}" if low is not None else "")
                raise bad(f"'{name}' must be a number{span}", "invalid_parameter")
            out["max_tokens" if name == "max_completion_tokens" else name] = value
        elif name == "stop":
            stops = [value] if isinstance(value, str) else value
            if not isinstance(stops, list) or not 0 < len(stops) <= 4 or not all(isinstance(s, str) and s for s in stops):
                raise bad("'stop' must be a string or a list of up to 4 strings", "invalid_parameter")
            out["stop"] = stops
        elif name == "response_format":
            if not isinstance(value, dict) or value.get("type") not in RESPONSE_FORMATS:
                raise bad(f"'response_format.type' must be one of {', '.join(RESPONSE_FORMATS)}", "invalid_parameter")
            if value["type"] == "json_schema" and not isinstance(value.get("json_schema"), dict):
                raise bad("'response_format' of type json_schema needs a 'json_schema' object", "invalid_parameter")
            if value["type"] != "text":
                out["response_format"] = value
        elif name == "reasoning_effort":
            if value not in ("minimal", "low", "medium", "high"):
                raise bad("'reasoning_effort' must be minimal, low, medium or high", "invalid_parameter")
            out["reasoning_effort"] = value
        elif name == "n":
            if value != 1:
                raise bad("'n' must be 1: an agent turn has one reply (its tools run once)", "unsupported_parameter")
        elif name == "logprobs":
            if value is not False:
                raise bad("'logprobs' is not supported: the reply of an agent turn has no log probabilities",
                          "unsupported_parameter")
        elif name == "tool_choice":
            if value not in ("none", "auto"):
                raise bad("'tool_choice' is not supported: the agent chooses among its own tools", "unsupported_parameter")
        elif name == "modalities":
            if value != ["text"]:
                raise bad("'modalities' other than [\"text\"] are not supported: an agent replies with text",
                          "unsupported_parameter")
        else:
            raise bad(f"unrecognized request argument supplied: {name!r} (docs/serve.md lists the supported fields)",
                      "unknown_parameter")
    return out


def text_of(content: Any, index: int) -> str:
    """The text of a message's content: a string, or text parts joined by newlines. Image and file
    parts are attachments (:func:`attachments_of`); a part the agent cannot take (audio) is refused,
    not dropped."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise bad(f"messages[{index}].content must be a string or a list of content parts", "bad_messages")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "refusal") and isinstance(part.get(kind), str):
            texts.append(part[kind])
        elif kind not in ("image_url", "file"):
            raise bad(f"messages[{index}].content: {kind or 'a malformed'} parts are not supported: "
                      "the agent takes text, images (image_url) and files (file)", "unsupported_content")
    return "\n".join(texts)


def history(messages: list[dict[str, Any]]) -> list[Message]:
    """Earlier messages, as the session keeps them: user and assistant text, assistant tool
    calls and their ``tool`` results (system and developer messages are the agent's own
    instructions' business: skipped). Tool messages must answer a call of the assistant
    message before them, and every call needs its answer, as the model requires."""
    out: list[Message] = []
    open_calls: dict[str, str] = {}  # call id -> tool name, unanswered
    for i, m in enumerate(messages):
        role = m.get("role")
        if role != "tool" and open_calls:
            raise bad(f"messages[{i}]: tool call(s) {', '.join(open_calls)} of an earlier assistant message "
                      "have no 'tool' message answering them", "bad_messages")
        if role in ("system", "developer"):
            text_of(m.get("content"), i)
            continue
        if role == "user":
            text = text_of(m.get("content"), i)
            parts = attachments_of(m.get("content"), i)
            if text or parts:
                out.append(Message(role="user", content=text, blocks=_blocks(parts, i)))
        elif role == "assistant":
            calls = [_call(c, i) for c in (m.get("tool_calls") or [])]
            text = text_of(m.get("content"), i)
            if text or calls:
                out.append(Message(role="assistant", content=text, tool_calls=calls))
            open_calls = {c.id: c.name for c in calls}
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if call_id not in open_calls:
                raise bad(f"messages[{i}]: a 'tool' message must answer a tool call of the assistant message before it "
                          f"(tool_call_id {call_id!r} is not one)", "bad_messages")
            name = open_calls.pop(call_id)
            text = text_of(m.get("content"), i)
            out.append(Message(role="tool", content=text, tool_result=ToolResult(call_id=call_id, name=name, content=text)))
        else:
            raise bad(f"messages[{i}]: role {role!r} is not supported (system, developer, user, assistant, tool)",
                      "bad_messages")
    if open_calls:
        raise bad(f"tool call(s) {', '.join(open_calls)} of an earlier assistant message have no 'tool' message "
                  "answering them", "bad_messages")
    return out


def _call(raw: Any, index: int) -> ToolCall:
    fn = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(fn, dict) or not isinstance(raw.get("id"), str) or not isinstance(fn.get("name"), str):
        raise bad(f"messages[{index}].tool_calls: each needs an 'id' and a 'function' with a 'name'", "bad_messages")
    args = fn.get("arguments") or "{}"
    try:
        parsed = json.loads(args) if isinstance(args, str) else args
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(id=raw["id"], name=fn["name"], arguments=parsed)
    return ToolCall(id=raw["id"], name=fn["name"], raw_arguments=str(args), argument_error="arguments are not a JSON object")


def attachments_of(content: Any, index: int) -> list[Any]:
    """The ``image_url`` and ``file`` parts of a message's content, as attachments: a ``data:`` URL
    decoded to :class:`clawkit.attachments.Attachment`, an ``https://`` URL kept (fetched in the turn)."""
    from clawkit.attachments import Attachment

    out: list[Any] = []
    for j, part in enumerate(content if isinstance(content, list) else ()):
        kind = part.get("type") if isinstance(part, dict) else None
        where = f"messages[{index}].content[{j}]"
        if kind == "image_url":
            inner = part.get("image_url")
            url = inner.get("url") if isinstance(inner, dict) else inner
            name = f"image-{index}-{j}"
        elif kind == "file":
            inner = part.get("file") if isinstance(part.get("file"), dict) else {}
            if inner.get("file_id") and not inner.get("file_data"):
                raise bad(f"{where}: file parts need 'file_data' (a data: URL); uploaded file ids are not supported",
                          "unsupported_content")
            url, name = inner.get("file_data"), str(inner.get("filename") or f"file-{index}-{j}")
        else:
            continue
        if not isinstance(url, str) or not url:
            raise bad(f"{where}: a {kind} part needs a URL (data: or https://)", "bad_attachment")
        if url.startswith("data:"):
            head, sep, payload = url.partition(",")
            if not sep or not head.endswith(";base64"):
                raise bad(f"{where}: a data: URL must be base64 (data:<type>;base64,<data>)", "bad_attachment")
            import binascii
            from base64 import b64decode

            try:
                out.append(Attachment(b64decode(payload, validate=True), name, "upload"))
            except (binascii.Error, ValueError):
                raise bad(f"{where}: the data: URL's base64 does not decode", "bad_attachment") from None
        elif url.lower().startswith("https://"):
            out.append(url)
        else:
            raise bad(f"{where}: {kind} URLs must be data: or https:// URLs", "bad_attachment")
    return out


def _blocks(parts: list[Any], index: int) -> list[Any]:
    """Earlier messages' attachments as blocks (typed and bounded like the new message's); their
    bytes are stored when the session is seeded. An https URL in an earlier message is refused:
    only the new message's URLs are fetched (through the gates)."""
    if not parts:
        return []
    from clawkit.attachments import DEFAULT_MAX_BYTES, AttachmentError, to_block

    blocks = []
    for part in parts:
        if isinstance(part, str):
            raise bad(f"messages[{index}]: an https:// attachment is fetched only in the last message; send earlier "
                      "ones as data: URLs, or continue the session (session_id)", "bad_attachment")
        try:
            blocks.append(to_block(part, DEFAULT_MAX_BYTES))
        except AttachmentError as exc:
            raise bad(f"messages[{index}]: {exc}", "bad_attachment") from None
    return blocks
