"""A JSONL transcript per session, written as the turn progresses (``sessions.transcript: jsonl``).

Each session gets ``<workspace>/.clawkit/transcripts/<session id>.jsonl`` (or
``sessions.transcript_dir``): a ``{"type": "session", ...}`` header when the file is
created, then one line per message (``{"type": "message", ...}``) and event
(``{"type": "event", "event": ..., "data": ..., "ts": ...}``) in the order they happen —
the records of ``clawkit sessions export``, in the same redacted form: the session store
writes the line from the row it stores, after the redaction a security plugin installed
(``SessionStore.redact``/``redact_value``; the policy plugin does), so a secret that never
reaches the database never reaches the transcript either. Each line is flushed as it is
written; the files are created owner-only (0600, in a 0700 directory). A history rewrite
(compaction) is not re-logged: the transcript is the record of what happened, in order.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _dump(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)


class Transcript:
    """Appends records to one ``<session id>.jsonl`` file per session under ``directory``."""

    def __init__(self, directory: Path, agent: str = "") -> None:
        self.directory = Path(directory)
        self.agent = agent

    def path(self, session_id: str) -> Path:
        name = _UNSAFE.sub("_", session_id).lstrip(".") or "session"
        return self.directory / f"{name}.jsonl"

    def write(self, session_id: str | None, record: dict[str, Any]) -> None:
        if not session_id:
            return
        path = self.path(session_id)
        if not path.exists():
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            header = {"type": "session", "id": session_id, "agent": self.agent, "created": time.time()}
            self._append(path, _dump(header))
        self._append(path, _dump(record))

    @staticmethod
    def _append(path: Path, line: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode("utf-8", "replace"))
        finally:
            os.close(fd)
