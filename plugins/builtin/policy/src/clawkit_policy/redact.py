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
#: (literal that must occur, pattern): a pattern runs only on text containing its literal,
#: so a clean 100 KB result costs a few substring searches, not a dozen regex scans.
TOKENS: list[tuple[str, re.Pattern[str]]] = [
    (lit, re.compile(rx))
    for lit, rx in [
        ("sk-", r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"),
        ("ghp_", r"ghp_[A-Za-z0-9]{20,}"),
        ("gho_", r"gho_[A-Za-z0-9]{20,}"),
        ("ghu_", r"ghu_[A-Za-z0-9]{20,}"),
        ("ghs_", r"ghs_[A-Za-z0-9]{20,}"),
        ("ghr_", r"ghr_[A-Za-z0-9]{20,}"),
        ("github_pat_", r"github_pat_[A-Za-z0-9_]{20,}"),
        ("glpat-", r"glpat-[A-Za-z0-9_\-]{20,}"),
        ("xox", r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
        ("AKIA", r"AKIA[0-9A-Z]{16}"),
        ("ASIA", r"ASIA[0-9A-Z]{16}"),
        ("AIza", r"AIza[0-9A-Za-z_\-]{35}"),
        ("npm_", r"npm_[A-Za-z0-9]{36}"),
        ("hf_", r"hf_[A-Za-z0-9]{30,}"),
        ("eyJ", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        ("PRIVATE KEY-----", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    ]
]
BEARER = re.compile(r"(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*")
#: ``password = value``, ``"api_key": "value"``: matched only where a keyword was found.
ASSIGNMENT = re.compile(
    r"((?:api[_-]?key|apikey|secret|token|passw(?:or)?d|passphrase|client[_-]?secret)[A-Za-z0-9_\-]*"
    r"[\"']?\s*[:=]\s*[\"']?)([^\s\"',;]{4,})",
    re.IGNORECASE,
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
    for literal, pattern in TOKENS:
        if literal in text:
            text = pattern.sub(MARK, text)
    return _anchored(text)


def _variants(word: str) -> tuple[str, ...]:
    return (word, word.capitalize(), word.upper())


_ANCHORS: list[tuple[str, re.Pattern[str]]] = [
    (v, pattern)
    for word, pattern in [("bearer", BEARER), ("api", ASSIGNMENT), ("secret", ASSIGNMENT), ("token", ASSIGNMENT),
                          ("passw", ASSIGNMENT), ("passphrase", ASSIGNMENT), ("client", ASSIGNMENT)]
    for v in _variants(word)
]


def _anchored(text: str) -> str:
    """Bearer tokens and ``keyword = value`` assignments, matched only where a keyword occurs
    (a few substring searches instead of a case-insensitive scan of the whole text)."""
    spans: list[tuple[int, int]] = []
    for word, pattern in _ANCHORS:
        start = text.find(word)
        while start != -1:
            m = pattern.match(text, start)
            if m is not None:
                span = m.span(2) if pattern is ASSIGNMENT else m.span()
                if text[span[0]:span[1]] != MARK:
                    spans.append(span)
            start = text.find(word, start + 1)
    if not spans:
        return text
    out, last = [], 0
    for a, b in sorted(set(spans)):
        if a < last:
            continue
        out.append(text[last:a])
        out.append(MARK)
        last = b
    out.append(text[last:])
    return "".join(out)


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
