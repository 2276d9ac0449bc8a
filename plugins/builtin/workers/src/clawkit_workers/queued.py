"""What a served request asks of its queued turn beyond the text (docs/scale-out.md):

* **model settings** (``temperature``, ``max_tokens``…, checked by serve as for an in-process turn)
  ride the queued record; the worker applies them to the model calls of that turn's session only
  (:class:`QueuedSettings`, the worker's twin of serve's ``TurnSettings``), ``max_tokens`` capped at
  the agent's ``model.max_tokens``. ``response_format`` makes the turn typed: the worker passes it as
  the turn's ``output_type`` (the spec an in-process turn builds from it), validated and retried.
* **attachments**: their bytes go once per SHA-256 into ``clawkit_attachments`` in the PostgreSQL
  database the queue lives in (every front-end and worker, on any machine, reaches it); the queued
  record carries only references (type, name, size, hash) and ``https://`` URLs, fetched by the
  worker through the agent's gates. Served and worker agents read and write attachment bytes there
  (``agent.attachment_store``), so a later turn on another machine still sends an earlier image.
"""

from __future__ import annotations

import base64
import contextvars
from typing import Any

from clawkit import hookimpl

from . import pg

#: (session id, settings) of the queued turn this worker task runs, or None
CURRENT: contextvars.ContextVar[tuple[str, dict[str, Any]] | None] = contextvars.ContextVar("clawkit_workers_turn_settings",
                                                                                           default=None)

#: the model settings a queued turn may carry (serve's openai_request checks their values; anything
#: else — an endpoint, a key — is never taken from a queued record)
ALLOWED = frozenset({"temperature", "top_p", "presence_penalty", "frequency_penalty", "seed", "max_tokens", "stop",
                     "response_format", "reasoning_effort"})


def check_settings(settings: dict[str, Any] | None) -> dict[str, Any]:
    """``settings`` if every key is one a queued turn may carry; else ``ValueError`` naming the others."""
    settings = dict(settings or {})
    unknown = sorted(set(settings) - ALLOWED)
    if unknown:
        raise ValueError(f"settings {', '.join(unknown)}: not model settings a queued turn takes "
                         f"({', '.join(sorted(ALLOWED))})")
    return settings


DDL = """
CREATE TABLE IF NOT EXISTS clawkit_attachments (
    sha256 TEXT PRIMARY KEY, data BYTEA NOT NULL,
    created DOUBLE PRECISION NOT NULL DEFAULT extract(epoch from clock_timestamp())
)"""


class QueuedSettings:
    """Registered on each worker agent: a queued turn's model settings into its session's requests."""

    @hookimpl
    def before_llm_call(self, ctx, request):
        current = CURRENT.get()
        if current is None or ctx.session is None or ctx.session.id != current[0]:
            return None
        settings = {k: v for k, v in current[1].items() if k in ALLOWED}
        settings.pop("response_format", None)  # the turn's output_type sends it
        effort = settings.pop("reasoning_effort", None)
        if effort is not None:
            request.reasoning_effort = effort
        cap = getattr(ctx.agent.model, "max_tokens", None)
        if cap is not None and "max_tokens" in settings:
            settings["max_tokens"] = min(int(settings["max_tokens"]), int(cap))
        request.settings = {**request.settings, **settings}
        return None


class PgBlobStore:
    """Attachment bytes in ``clawkit_attachments``, one row per SHA-256 (written once, never rewritten).
    The kernel's ``blob_store(agent)`` interface: ``put(block)``, ``get(sha)``."""

    def __init__(self, url: str):
        self.url = url
        pg.ensure(url, "clawkit_attachments", DDL)

    def put(self, block: Any) -> None:
        if not block.sha256 or block.data is None:
            return
        with pg.connect(self.url) as conn:
            conn.execute("INSERT INTO clawkit_attachments (sha256, data) VALUES (%s, %s) ON CONFLICT (sha256) DO NOTHING",
                         (block.sha256, base64.b64decode(block.data)))

    def get(self, sha: str) -> bytes | None:
        with pg.connect(self.url) as conn:
            row = conn.execute("SELECT data FROM clawkit_attachments WHERE sha256 = %s", (sha,)).fetchone()
        return bytes(row[0]) if row else None


def references(items: list[Any], agent: Any) -> list[Any]:
    """The front-end's side: a request's attachments checked as an in-process turn checks them
    (type, size, vision: ``AttachmentError`` before anything is queued), their bytes stored, and
    what the queued record carries: block references (JSON, no bytes) and URL strings."""
    from clawkit.attachments import prepare

    return stored(prepare(items, agent.config), agent.attachment_store)


def stored(items: list[Any], store: Any) -> list[Any]:
    """Checked attachments (blocks, URL strings) as a queued record carries them: each block's bytes
    put in ``store`` (``clawkit_attachments``), the block kept as a reference (JSON, no bytes)."""
    from clawkit.types import ContentBlock

    out: list[Any] = []
    for item in items:
        if isinstance(item, ContentBlock):
            store.put(item)
            out.append(item.model_dump(exclude={"data"}, exclude_none=True))
        else:
            out.append(item)
    return out


def blocks(refs: list[Any] | None, agent: Any) -> list[Any]:
    """The worker's side: the queued references as blocks with their bytes (from the table)."""
    from clawkit.attachments import AttachmentError
    from clawkit.types import ContentBlock

    out: list[Any] = []
    for ref in refs or ():
        if isinstance(ref, str):
            out.append(ref)
            continue
        block = ContentBlock.model_validate(ref)
        raw = agent.attachment_store.get(block.sha256 or "")
        if raw is None:
            raise AttachmentError(f"attachment {block.name}: its bytes (sha256 {block.sha256}) are not in clawkit_attachments")
        block.data = base64.b64encode(raw).decode("ascii")
        out.append(block)
    return out
