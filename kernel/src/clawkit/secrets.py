"""Which environment values are secrets — by name, by known format and by entropy — and the
agent's own model keys. Shared by the tools plugin (what a command's environment may hold) and
the policy plugin (what is redacted from results, storage, export and the ledger), which may not
import each other.

A value is a secret when its variable's name says so (``*KEY*``, ``*TOKEN*``, ``*PAT``,
``*CREDS``, ``*PWD*``, ``*PASSPHRASE*``…), when it has a known credential format (``ghp_``,
``github_pat_``, ``sk-``, ``AKIA``, ``xox*``, a JWT, a PEM key, a URL with a password) or when it
is a long token of high entropy (a random string of letters and digits, whatever its name).
Paths, lists and sentences never count as tokens. :func:`register_secret` adds a value the
process knows to be secret (the model's ``api_key`` from the agent's YAML), and
:func:`variants` gives the encoded forms of a value (reversed, base64, hex) worth redacting too.
"""

from __future__ import annotations

import base64
import math
import os
import re
import threading
from collections import Counter
from functools import lru_cache
from typing import Any, Iterable

#: names whose values are never secrets (``PWD`` is the working directory)
NOT_SECRET = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "PWD",
                        "OLDPWD", "TMPDIR", "PS1", "PS2", "PS4", "LS_COLORS", "LSCOLORS", "CLAWKIT_IDEMPOTENCY_KEY"})
SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|PASSCODE|CREDENTIAL|CREDS?(_|$)|AUTH|COOKIE|PRIVATE|SIGNATURE|DSN"
    r"|DATABASE_URL|WEBHOOK|CONN(ECTION)?_?STR|SESSION_?ID|(^|_)PAT(_|$)|PWD|(^|_)PASS(_|$)|_PW$|^PW_|(^|_)PIN$"
    r"|(^|_)OTP(_|$)|(^|_)SALT$)",
    re.IGNORECASE,
)
#: known credential formats (anywhere in the value)
FORMAT = re.compile(
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}|xox[abposre]-[A-Za-z0-9\-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35}"
    r"|npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,}|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----|[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:[^\s@/]+@"
)
_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-.~]{20,}")
#: a public identifier however random it looks: a commit or content hash, a UUID, by its name
_ID_NAME = re.compile(r"(SHA|COMMIT|REV(ISION)?|HASH|DIGEST|_ID|UUID|VERSION)$", re.IGNORECASE)
_HEX_OR_UUID = re.compile(r"[0-9a-fA-F]{7,64}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
#: values shorter than this are never treated as secrets (nor redacted)
MIN_LEN = 6

_registered: frozenset[str] = frozenset()
_lock = threading.Lock()


def entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def looks_like_token(value: str) -> bool:
    """A long string of letters and digits with the entropy of a random key (not a path, a list or words)."""
    if len(value) < 20 or len(value) > 8192 or not _TOKEN.fullmatch(value) or value[0] in "/.~":
        return False
    classes = sum((any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value)))
    if classes < 2 or sum(not c.isalnum() for c in value) > len(value) // 5:
        return False  # one kind of character, or a version, a file name, a dotted name: not a key
    # a random key of n characters over 36-64 symbols has close to log2(min(n, alphabet)) bits per character
    need = min(4.0, 0.85 * math.log2(min(len(value), 62)))
    return entropy(value) >= need


def is_secret_name(name: str) -> bool:
    """Does an environment variable's name suggest it holds a secret?"""
    return name.upper() not in NOT_SECRET and SECRET_NAME.search(name) is not None


def is_secret_value(value: str, name: str = "") -> bool:
    """Is ``value`` a credential by its form: a known format, or a high-entropy token (a hex id or UUID
    under a name like ``*_SHA``/``*_ID`` excepted)?"""
    if len(value) < MIN_LEN:
        return False
    if FORMAT.search(value):
        return True
    if not looks_like_token(value):
        return False
    return not (name and _ID_NAME.search(name) and _HEX_OR_UUID.fullmatch(value))


def is_secret(name: str, value: str) -> bool:
    """Is the environment variable ``name=value`` a secret (by its name or its value)?"""
    if name.upper() in NOT_SECRET or not value:
        return False
    return _judged(name, value) or value in _registered


@lru_cache(maxsize=4096)
def _judged(name: str, value: str) -> bool:
    """By name or form (the environment is judged again every few seconds: remembered)."""
    return is_secret_name(name) or is_secret_value(value, name)


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret of this process (a model ``api_key`` written in the YAML):
    it is redacted wherever it shows up and never passed to a command."""
    global _registered
    if value and len(value) >= MIN_LEN and value not in _registered:
        with _lock:
            _registered = _registered | {value}


def registered() -> frozenset[str]:
    """The registered secrets (the same object until one is added)."""
    return _registered


def secret_env_values(environ: dict[str, str] | None = None, extra: Iterable = ()) -> set[str]:
    """Values of the environment's secrets (:func:`is_secret`, or a name matching an ``extra`` glob),
    plus every registered secret."""
    import fnmatch

    env = os.environ if environ is None else environ
    extra = tuple(extra)
    out = {v for k, v in env.items() if len(v) >= MIN_LEN
           and (is_secret(k, v) or any(fnmatch.fnmatchcase(k, p) for p in extra))}
    return out | _registered


@lru_cache(maxsize=1024)
def variants(value: str) -> tuple[str, ...]:
    """Encoded forms of a secret an agent's command could print to get it past redaction: reversed,
    hex (lower and upper case) and base64 (standard and URL-safe, at each of the three alignments a
    value can have inside a longer encoded text: the characters that only depend on the value)."""
    if len(value) < 8:
        return ()
    raw = value.encode("utf-8", "surrogatepass")
    out = [value[::-1], raw.hex(), raw.hex().upper()]
    for shift in range(3):
        enc = base64.b64encode(b"\0" * shift + raw).decode()
        # skip the characters that mix in the prefix, and the last ones that mix in what follows
        start = (shift * 8 + 5) // 6 if shift else 0
        stable = (len(raw) + shift) * 8 // 6
        part = enc[start:stable]
        if len(part) >= 8:
            out += [part, part.replace("+", "-").replace("/", "_")]
    return tuple(v for v in dict.fromkeys(out) if v != value and len(v) >= 8)


def scrub(value: Any, mark: str = "[REDACTED]") -> Any:
    """A copy of JSON-like ``value`` with every known secret value (:func:`secret_env_values` and
    their :func:`variants`) replaced by ``mark``: what the kernel itself prints (``run --json``) when
    no plugin gave the session store a fuller redactor."""
    values = secret_env_values()
    values = sorted(values | {v for s in values for v in variants(s)}, key=len, reverse=True)

    def text(s: str) -> str:
        for v in values:
            if v in s:
                s = s.replace(v, mark)
        return s

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)
