"""Images and files in prompts (docs/attachments.md).

An attachment is a local path, an ``https://`` URL, raw ``bytes`` or an :class:`Attachment`.
Its type is found from its bytes (PNG, JPEG, GIF, WebP, PDF, else UTF-8 text), never from
its name; its size is bounded by ``limits.attachment_max_bytes``; an image for a model known
not to accept images is refused before any call. Each becomes a :class:`~clawkit.types.ContentBlock`
on the user message: the block carries a reference (``sha256``, type, name, size), and the
bytes live once per content hash under ``<state dir>/attachments/<sha[:2]>/<sha>`` — the
session database and its exports hold the reference only, never base64.

Why a table of magic numbers and not ``filetype``/``puremagic``: the five formats the model
APIs accept have fixed, documented signatures (six byte comparisons below); a library that
knows hundreds of formats would only name more types to refuse, and would be a dependency
on the path of every turn.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .content_parts import anthropic_part, attached, block_tokens, missing, openai_part, text_of  # noqa: F401  (the wire forms)
from .errors import UsageError
from .types import ContentBlock, Message

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
IMAGE_TOKENS = 1600  # an upper bound: Anthropic bills (w*h)/750 up to ~1600; OpenAI's high detail stays below
PDF_PAGE_TOKENS = 2000  # text plus the page image, per page, as both APIs count it (roughly)
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_NAME = 200


class AttachmentError(UsageError):
    """An attachment that cannot be sent: unreadable, an unsupported type, too large, or an image
    for a model that takes none. The message names the attachment (exit code 2 on the CLI)."""


@dataclass
class Attachment:
    """Bytes to attach, with the name shown for them (``Agent.run(attachments=[Attachment(data, "x.png")])``)."""

    data: bytes
    name: str = "attachment"
    source: str = ""  # where it came from: a path, a URL, "upload"


def sniff(data: bytes) -> str | None:
    """The media type of ``data`` from its first bytes; None when it is none of the accepted ones."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:1024].lstrip(b"\r\n\t \x00\xef\xbb\xbf")[:5] == b"%PDF-":
        return "application/pdf"
    if b"\x00" not in data[:8192]:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return "text/plain"
    return None


def kind_of(media_type: str) -> str:
    return "image" if media_type in IMAGE_TYPES else "file"


def max_bytes(config: Any) -> int:
    return int(getattr(getattr(config, "limits", None), "attachment_max_bytes", 0) or DEFAULT_MAX_BYTES)


def is_url(item: Any) -> bool:
    return isinstance(item, str) and item.lower().startswith(("https://", "http://"))


def read_local(item: Any, limit: int) -> Attachment:
    """A path, ``bytes`` or :class:`Attachment` as an Attachment, its size checked before reading."""
    if isinstance(item, Attachment):
        return item
    if isinstance(item, (bytes, bytearray, memoryview)):
        return Attachment(bytes(item), "attachment", "bytes")
    path = Path(os.path.expanduser(str(item)))
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise AttachmentError(f"attachment {item}: not a file")
        if size > limit:
            raise AttachmentError(f"attachment {item}: {size:,} bytes is over the limit of {limit:,} "
                                  "(limits.attachment_max_bytes)")
        return Attachment(path.read_bytes(), path.name, str(path))
    except OSError as exc:
        raise AttachmentError(f"attachment {item}: cannot read it ({exc.strerror or exc})") from None


def to_block(att: Attachment, limit: int) -> ContentBlock:
    """The checked block for ``att``: type from the bytes, size bounded, data base64 (in memory only)."""
    data = att.data
    name = (att.name or "attachment")[:MAX_NAME]
    if len(data) > limit:
        raise AttachmentError(f"attachment {name}: {len(data):,} bytes is over the limit of {limit:,} "
                              "(limits.attachment_max_bytes)")
    if not data:
        raise AttachmentError(f"attachment {name}: it is empty")
    media_type = sniff(data)
    if media_type is None:
        head = data[:8].hex(" ")
        raise AttachmentError(f"attachment {name}: unsupported type (first bytes {head}); accepted: PNG, JPEG, GIF, "
                              "WebP images, PDF documents and UTF-8 text files")
    if media_type == "application/pdf":
        tokens = PDF_PAGE_TOKENS * max(1, len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", data)))
    elif media_type == "text/plain":
        tokens = len(data) // 3 + 10
    else:
        tokens = IMAGE_TOKENS
    return ContentBlock(type=kind_of(media_type), media_type=media_type, name=name, size=len(data),
                        sha256=hashlib.sha256(data).hexdigest(), tokens=tokens, source=att.source[:500] or None,
                        data=base64.b64encode(data).decode("ascii"))


def vision_refusal(model_config: Any, model: str | None = None) -> str | None:
    """Why ``model`` is known not to take images, or None. Known means: ``model.supports_vision: false``
    in the agent's YAML, or an entry in litellm's model table that does not say ``supports_vision: true``
    (litellm's own reading). A model neither knows (a local server's) is let through: its server answers."""
    name = model or str(getattr(model_config, "name", "") or "")
    configured = getattr(model_config, "supports_vision", None)
    if configured is not None:
        return None if configured else f"model {name} does not accept images (model.supports_vision: false)"
    from .capabilities import table_entry

    entry = table_entry(name)
    if entry is not None and entry.get("supports_vision") is not True:
        return (f"model {name} does not accept images (litellm's model table); use a vision model, or set "
                "model.supports_vision: true if the table is wrong")
    return None


def check_vision(model_config: Any, blocks: Iterable[ContentBlock]) -> None:
    images = [b for b in blocks if b.type == "image"]
    if images:
        why = vision_refusal(model_config)
        if why:
            raise AttachmentError(f"attachment {images[0].name}: {why}")


def prepare(items: Iterable[Any], config: Any) -> list[Any]:
    """Local attachments read and checked (type, size, vision) before the turn touches anything;
    URLs are left as strings, fetched inside the turn through the gates (:func:`fetch_urls`)."""
    limit = max_bytes(config)
    out: list[Any] = []
    for item in items:
        if isinstance(item, ContentBlock):
            out.append(item)
        elif is_url(item):  # http too, as web_fetch takes it: the content is marked untrusted either way
            out.append(item)
        else:
            out.append(to_block(read_local(item, limit), limit))
    check_vision(config.model, [b for b in out if isinstance(b, ContentBlock)])
    return out


# storage ----------------------------------------------------------------------------------

class BlobStore:
    """Attachment bytes, one file per SHA-256 (written once, atomically; never rewritten)."""

    def __init__(self, root: Path | None):
        self.root = root

    def path(self, sha: str) -> Path | None:
        if self.root is None or not re.fullmatch(r"[0-9a-f]{64}", sha or ""):
            return None
        return self.root / sha[:2] / sha

    def put(self, block: ContentBlock) -> None:
        where = self.path(block.sha256 or "")
        if where is None or block.data is None or where.exists():
            return
        where.parent.mkdir(parents=True, exist_ok=True)
        tmp = where.with_name(f".{where.name}.{os.getpid()}.tmp")
        tmp.write_bytes(base64.b64decode(block.data))
        os.replace(tmp, where)

    def get(self, sha: str) -> bytes | None:
        where = self.path(sha)
        try:
            return where.read_bytes() if where is not None else None
        except OSError:
            return None


def blob_store(agent: Any) -> BlobStore:
    """Next to the SQLite session file (``.clawkit/attachments``); the workspace's ``.clawkit`` for
    another backend; none for an in-memory store (the bytes then live in the messages in memory).
    An agent given its own (``agent.attachment_store``: an object with ``put(block)`` and ``get(sha)``,
    e.g. the workers' table in the PostgreSQL database several machines share) uses that one."""
    own = getattr(agent, "attachment_store", None)
    if own is not None:
        return own
    path = getattr(agent.store, "path", None)
    if isinstance(path, Path):
        return BlobStore(None if str(path) == ":memory:" else path.parent / "attachments")
    return BlobStore(Path(agent.config.workspace) / ".clawkit" / "attachments")


def hydrate(messages: Iterable[Message], blobs: BlobStore) -> None:
    """Put the bytes back into blocks that came from the store (a resumed session) before a call."""
    for m in messages:
        for b in m.blocks:
            if b.sha256 and b.data is None and b.type in ("image", "file"):
                raw = blobs.get(b.sha256)
                if raw is not None:
                    b.data = base64.b64encode(raw).decode("ascii")


# what the model gets ----------------------------------------------------------------------

def describe(block: ContentBlock) -> str:
    """One line for people: name, type, size (``sessions show``, chat)."""
    size = block.size or 0
    human = f"{size / 1048576:.1f} MB" if size >= 1048576 else f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} B"
    return f"{block.name} ({block.media_type}, {human}, sha256 {str(block.sha256)[:12]})"


# in the turn ------------------------------------------------------------------------------

async def fetch_url(agent: Any, ctx: Any, url: str, limit: int) -> ContentBlock:
    """A URL attachment: gated as a ``web_fetch`` call, fetched by ``fetch_attachment``, marked untrusted."""
    from .hooks import HookFailure
    from .provenance import mark_untrusted
    from .types import ToolCall

    call = ToolCall(name="web_fetch", arguments={"url": url})
    decision = await agent.executor.gate(ctx, call)
    if decision is not None and decision.action == "block":
        ctx.emit("tool.blocked", tool="web_fetch", call_id=call.id, reason=decision.reason, plugin=decision.plugin,
                 attachment=True)
        raise AttachmentError(f"attachment {url}: blocked by {decision.plugin or 'policy'}: {decision.reason}")
    if decision is not None and decision.action == "require_approval":
        answer = await agent.executor.answer(ctx, call, decision.reason)
        ctx.emit("tool.approval", tool="web_fetch", call_id=call.id, reason=decision.reason, approved=answer.approved,
                 by=answer.by, attachment=True)
        if not answer.approved:
            raise AttachmentError(f"attachment {url}: not approved ({decision.reason}); denied by {answer.by}")
    if not agent.hooks.has("fetch_attachment"):
        raise AttachmentError(f"attachment {url}: no installed plugin fetches URLs (clawkit-tools does); "
                              "download it and attach the file")
    try:
        got = await agent.hooks.call_first("fetch_attachment", fail_closed=True, ctx=ctx, url=url, max_bytes=limit)
    except HookFailure as exc:
        raise AttachmentError(f"attachment {url}: {exc.error}") from None
    if got is None:
        raise AttachmentError(f"attachment {url}: no plugin fetched it")
    data = bytes(got[0])
    mark_untrusted(ctx.session, "attachment", url, kind="web")
    name = url.rsplit("/", 1)[-1].split("?", 1)[0] or url
    return to_block(Attachment(data, name, url), limit)


async def attach(agent: Any, ctx: Any, pending: list[Any]) -> list[ContentBlock]:
    """The blocks of this turn's message: URLs fetched (gated), bytes stored once per hash, an event each."""
    limit = max_bytes(agent.config)
    blobs = blob_store(agent)
    blocks: list[ContentBlock] = []
    for item in pending:
        block = item if isinstance(item, ContentBlock) else await fetch_url(agent, ctx, item, limit)
        blocks.append(block)
    check_vision(agent.config.model, blocks)
    for block in blocks:
        blobs.put(block)
        ctx.emit("attachment.added", name=block.name, media_type=block.media_type, size=block.size,
                 sha256=block.sha256, url=block.source if is_url(block.source) else None)
    return blocks


# the request body ---------------------------------------------------------------------------

SPLICE_MIN = 65536  # payloads at least this long are spliced in, not escaped by the JSON encoder
_PAYLOAD_KEYS = (("image_url", "url"), ("file", "file_data"), ("source", "data"))


def json_bytes(body: dict[str, Any], dumps: Any) -> bytes:
    """``dumps(body)`` (a str) as UTF-8 bytes, with the attachment payloads of ``body["messages"]``
    (``data:`` URLs, base64 — characters JSON never escapes) put in after encoding the rest: the
    JSON encoder's scan of several megabytes was most of what an attachment cost a turn. ``body``
    is left as it was. A body without attachments costs one look at each message's content."""
    found: list[tuple[dict[str, Any], str, str]] = []
    for m in body.get("messages") or ():
        content = m.get("content") if isinstance(m, dict) else None
        if type(content) is not list:
            continue
        for part in content:
            if not isinstance(part, dict):
                continue
            for outer, inner in _PAYLOAD_KEYS:
                holder = part.get(outer)
                value = holder.get(inner) if isinstance(holder, dict) else None
                if isinstance(value, str) and len(value) >= SPLICE_MIN:
                    found.append((holder, inner, value))
    if not found:
        return dumps(body).encode()
    token = "clawkit-payload-" + os.urandom(12).hex()
    try:
        for i, (holder, key, _) in enumerate(found):
            holder[key] = f"{token}-{i}"
        text = dumps(body).encode()
    finally:
        for holder, key, value in found:
            holder[key] = value
    pieces = text.split(f'"{token}-'.encode())
    out = [pieces[0]]
    for piece in pieces[1:]:  # one copy of each payload (its bytes) and one of the whole (the join)
        index, rest = piece.split(b'"', 1)
        out += (b'"', found[int(index)][2].encode("ascii"), b'"', rest)
    return b"".join(out)
