"""Secret redaction for the audit ledger and tool results.

Three kinds of secret are replaced with ``[REDACTED]``: the *values* of
environment variables whose names look like secrets (``OPENAI_API_KEY``,
``GITHUB_TOKEN``, ``DB_PASSWORD``…), well-known credential formats (OpenAI and
Anthropic keys, GitHub/GitLab/Slack/npm/Hugging Face tokens, AWS access key ids,
Google API keys, JWTs, bearer tokens, PEM private keys) and the value in
``password=…`` / ``"api_key": "…"`` style assignments. In structured data, the
value of any key named like a secret is replaced whole.
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from typing import Any, Iterable

MARK = "[REDACTED]"

SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|PRIVATE|SIGNATURE|DSN|DATABASE_URL)",
    re.IGNORECASE,
)
_NOT_SECRET = frozenset({"PATH", "HOME", "LANG", "TERM", "USER", "SHELL", "PWD", "TZ", "TMPDIR"})
_KEY_NAME = re.compile(
    r"^(.*[_-])?(api[_-]?key|apikey|access[_-]?key|secret|token|password|passwd|passphrase|authorization|"
    r"cookie|credentials?|private[_-]?key|client[_-]?secret|auth)([_-].*)?$",
    re.IGNORECASE,
)
TOKEN = re.compile(
    "|".join(
        [
            r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
            r"gh[pousr]_[A-Za-z0-9]{20,}",
            r"github_pat_[A-Za-z0-9_]{20,}",
            r"glpat-[A-Za-z0-9_\-]{20,}",
            r"xox[abposr]-[A-Za-z0-9\-]{10,}",
            r"(?:AKIA|ASIA)[0-9A-Z]{16}",
            r"AIza[0-9A-Za-z_\-]{35}",
            r"npm_[A-Za-z0-9]{36}",
            r"hf_[A-Za-z0-9]{30,}",
            r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
            r"(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*",
        ]
    )
)
ASSIGNMENT = re.compile(
    r"(?i)((?:api[_-]?key|apikey|secret|token|passw(?:or)?d|passphrase|client[_-]?secret)[A-Za-z0-9_\-]*"
    r"[\"']?\s*[:=]\s*[\"']?)([^\s\"',;]{4,})"
)

_cache: dict[str, Any] = {"at": 0.0, "values": (), "extra": ()}


def is_secret_name(name: str, extra: Iterable[str] = ()) -> bool:
    """Does an environment variable name suggest a secret value?"""
    if name.upper() in _NOT_SECRET:
        return False
    return SECRET_NAME.search(name) is not None or any(fnmatch.fnmatchcase(name, p) for p in extra)


def secret_values(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Values of secret-named environment variables (longest first), refreshed every few seconds."""
    extra = tuple(extra)
    now = time.monotonic()
    if now - _cache["at"] > 5.0 or _cache["extra"] != extra:
        vals = {v for k, v in os.environ.items() if len(v) >= 6 and is_secret_name(k, extra)}
        _cache.update(at=now, values=tuple(sorted(vals, key=len, reverse=True)), extra=extra)
    return _cache["values"]


def refresh() -> None:
    """Forget the cached environment (after changing os.environ in-process)."""
    _cache["at"] = 0.0


def redact_text(text: str, extra_names: Iterable[str] = ()) -> str:
    """``text`` with every recognisable secret replaced by ``[REDACTED]``."""
    if not text:
        return text
    for value in secret_values(extra_names):
        if value in text:
            text = text.replace(value, MARK)
    text = TOKEN.sub(MARK, text)
    return ASSIGNMENT.sub(lambda m: m.group(1) + MARK if m.group(2) != MARK else m.group(0), text)


def redact(value: Any, extra_names: Iterable[str] = ()) -> Any:
    """A copy of ``value`` (JSON-like) with secrets removed; keys named like secrets lose their values."""
    if isinstance(value, str):
        return redact_text(value, extra_names)
    if isinstance(value, dict):
        return {
            k: (MARK if isinstance(k, str) and _KEY_NAME.match(k) and v not in (None, "", [], {}) else redact(v, extra_names))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v, extra_names) for v in value]
    return value
