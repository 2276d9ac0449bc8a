"""Attachments in the wire forms providers send: OpenAI content parts and Anthropic content blocks.

Read from a :class:`clawkit.types.ContentBlock`'s fields only, so :mod:`clawkit.types` can use them
without importing :mod:`clawkit.attachments` (which imports the types).
"""

from __future__ import annotations

import base64
from typing import Any


def text_of(block: Any) -> str:
    raw = base64.b64decode(block.data or "")
    return f"[attached file {block.name}]\n" + raw.decode("utf-8", errors="replace")


def missing(block: Any) -> str:
    return f"[attachment {block.name} ({block.media_type}, {block.size} bytes) is no longer available]"


def openai_part(block: Any) -> dict[str, Any]:
    """The OpenAI chat-completions content part (litellm translates it for every other provider)."""
    if block.data is None:
        return {"type": "text", "text": missing(block)}
    if block.media_type == "text/plain":
        return {"type": "text", "text": text_of(block)}
    url = f"data:{block.media_type};base64,{block.data}"
    if block.type == "image":
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"filename": block.name, "file_data": url}}


def anthropic_part(block: Any) -> dict[str, Any]:
    """The Anthropic Messages content block: ``image`` or ``document`` (base64 source)."""
    if block.data is None:
        return {"type": "text", "text": missing(block)}
    if block.media_type == "text/plain":
        return {"type": "text", "text": text_of(block)}
    source = {"type": "base64", "media_type": block.media_type, "data": block.data}
    if block.type == "image":
        return {"type": "image", "source": source}
    return {"type": "document", "source": source, "title": block.name}


def attached(message: Any) -> list[Any]:
    return [b for b in message.blocks if b.type in ("image", "file") and b.sha256]


def block_tokens(message: Any) -> int:
    """The tokens a message's attachments add (estimates: see IMAGE_TOKENS, PDF_PAGE_TOKENS)."""
    return sum(int(b.tokens or 0) for b in message.blocks if b.type in ("image", "file"))
