"""Secret redaction for the audit ledger and tool results.

Three kinds of secret are replaced with ``[REDACTED]``: the *values* of
environment variables whose names look like secrets (``OPENAI_API_KEY``,
``GITHUB_TOKEN``, ``DB_PASSWORD``…), well-known credential formats (OpenAI and
Anthropic keys, GitHub/GitLab/Slack/npm/Hugging Face tokens, AWS access key ids,
Google API keys, JWTs, bearer tokens, PEM private keys) and the value in
``password=…`` / ``"api_key": "…"`` style assignments. In structured data, the
value of any key named like a secret is replaced whole.

All of it is one alternation compiled once per set of secret values and run in a
single pass with google-re2 (a DFA, linear time) over the UTF-8 bytes of the text
(:mod:`re` only if re2 is missing: over this alternation it is slower even on a
20-character text). A text without a match is returned as is, without a copy; a
text shorter than any secret (:data:`SHORTEST`) is not scanned, nor the very string
object the last scan found clean (a tool result is redacted, then stored); a text seen recently
found clean is answered from a bounded memo (:data:`MEMO_SIZE`), dropped whenever the secret values change.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import time
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Iterable

from clawkit.secrets import is_secret_name as kernel_is_secret_name
from clawkit.secrets import registered



def _re2() -> Any:
    """google-re2, imported when the first pattern is built (``clawkit --help`` must not pay for it)."""
    try:
        import re2
    except ImportError:  # pragma: no cover - google-re2 is a dependency; ``re`` is a slower safety net
        return None
    return re2


MARK = "[REDACTED]"
_MARK_BYTES = MARK.encode()
#: No secret is shorter: env values count from 6 characters (:func:`secret_values`), every token
#: format and assignment from 8 (tests/test_policy_redact.py checks the patterns' minimum widths)
SHORTEST = 6

SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|PRIVATE|SIGNATURE|DSN|DATABASE_URL|WEBHOOK"
    r"|CONN(ECTION)?_?STR|_PASS$|_PWD$|_PW$|^PASS$)",
    re.IGNORECASE,
)
#: a URL carrying a password (``postgres://user:pw@host``, ``redis://:pw@host`` with no user name) or a webhook
#: URL (its path is the secret)
CREDENTIAL_URL = (
    r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@\"'<>]*:[^\s@/\"'<>]+@"
    r"|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{8,}"
    r"|https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_\-]+"
    r"|https://[A-Za-z0-9\-]+\.webhook\.office\.com/[^\s\"'<>]+"
    r"|https://outlook\.office\.com/webhook/[^\s\"'<>]+"
    r"|https?://[^\s\"'<>/]+/(?:[^\s\"'<>]*/)?webhooks?/[A-Za-z0-9_\-/]{16,}"
)
_CREDENTIAL_URL = re.compile(CREDENTIAL_URL)
_NOT_SECRET = frozenset({"PATH", "HOME", "LANG", "TERM", "USER", "SHELL", "PWD", "TZ", "TMPDIR"})
_KEY_NAME = re.compile(
    r"^(.*[_-])?(api[_-]?key|apikey|access[_-]?key|secret|token|password|passwd|passphrase|authorization|"
    r"cookie|credentials?|private[_-]?key|client[_-]?secret|auth)([_-].*)?$",
    re.IGNORECASE,
)
#: The same words as the last word of a camelCase name (``accessToken``, ``githubToken``, ``userPassword``,
#: ``sessionCookie``): a lower-case letter or digit, then the capitalised word, then the end or ``_``/``-``.
#: Not "Key" or "Auth" alone (``primaryKey``, ``useAuth``), nor a word the name goes on from (``tokenCount``,
#: ``maxTokens``): those name no secret.
_CAMEL_KEY_NAME = re.compile(
    r"^.*[a-z0-9](ApiKey|APIKey|AccessKey|PrivateKey|Secret|Token|Password|Passwd|Passphrase|Authorization|Cookie|"
    r"Credentials?)([_-].*)?$"
)
#: Well-known credential formats.
TOKENS: tuple[str, ...] = (
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
    CREDENTIAL_URL,
)
#: ``password = value``, ``"api_key": "value"``: only the value (group 1, the only capturing group) is replaced.
ASSIGNMENT = (
    r"(?i:api[_-]?key|apikey|secret|token|passw(?:or)?d|passphrase|client[_-]?secret|[A-Za-z0-9]+_(?:pass|pwd|pw)\b)[A-Za-z0-9_\-]*"
    r"(?:\\?[\"'])?\s*[:=]\s*(?:\\?[\"'])?([^\s\"',;]{4,})"
)

_cache: dict[str, Any] = {"at": 0.0, "values": (), "extra": ()}


def is_secret_name(name: str, extra: Iterable[str] = ()) -> bool:
    """Does an environment variable name suggest a secret value?"""
    if name.upper() in _NOT_SECRET:
        return False
    return (SECRET_NAME.search(name) is not None or kernel_is_secret_name(name)
            or any(fnmatch.fnmatchcase(name, p) for p in extra))


def secret_values(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The secrets to redact by value (longest first), refreshed every few seconds: values of the
    environment's secrets — by name, known format or entropy (:mod:`clawkit.secrets`), a credential
    URL —, the agent's own model keys (:func:`clawkit.secrets.register_secret`), and the reversed,
    hex and base64 forms of each (:func:`clawkit.secrets.variants`): a command that prints a key
    encoded does not get it past redaction."""
    if extra.__class__ is not tuple:
        extra = tuple(extra)
    known = registered()
    last = _answer  # the usual call: the same names and registered secrets, within the 5 s
    if (last[0] is extra or last[0] == extra) and last[1] is known and time.monotonic() < last[2]:
        return last[3]
    return _judge(extra, known)


#: (extra names, registered secrets, monotonic deadline, values): :func:`secret_values`' last answer, good until
#: the deadline (one tuple, replaced whole: a thread reading it sees one consistent answer)
_answer: tuple[Any, Any, float, tuple[str, ...]] = ((), None, 0.0, ())


def _judge(extra: tuple[str, ...], known: Any) -> tuple[str, ...]:
    global _answer
    now = time.monotonic()
    if now - _cache["at"] > 5.0 or _cache["extra"] != extra or _cache.get("registered") is not known:
        env = tuple(os.environ.items())
        if env == _cache.get("env") and _cache["extra"] == extra and _cache.get("registered") is known:
            _cache["at"] = now  # the environment has not changed: nothing to judge again
        else:
            _cache["env"] = env
            from clawkit.secrets import secret_env_values, variants
            vals = {v for k, v in os.environ.items()
                    if len(v) >= 6 and (is_secret_name(k, extra) or _CREDENTIAL_URL.search(v))}
            vals |= secret_env_values(extra=extra)
            for v in list(vals):
                vals.update(variants(v))
            _cache.update(at=now, values=tuple(sorted(vals, key=lambda v: (-len(v), v))), extra=extra,
                          registered=known)
    _answer = (extra, known, _cache["at"] + 5.0, _cache["values"])
    return _cache["values"]


def refresh() -> None:
    """Forget the cached environment (after changing os.environ in-process)."""
    global _answer
    _answer = ((), None, 0.0, ())
    _cache["at"] = 0.0
    _cache.pop("env", None)


@lru_cache(maxsize=8)
def _patterns(values: tuple[str, ...]) -> tuple[Any, Any]:
    """(``re`` pattern over str, re2 pattern over UTF-8 bytes or None) for these secret values.

    Leftmost-first alternation: at one position a longer secret value wins over a shorter one.
    """
    literal = "|".join(re.escape(v) for v in values)
    body = "|".join(((f"(?:{literal})",) if literal else ()) + TOKENS + (ASSIGNMENT,))
    small = re.compile(body)
    big = None
    re2 = _re2()
    if re2 is not None:
        options = re2.Options()
        options.max_mem = 64 << 20  # room for the DFA (the default falls back to a slow NFA)
        try:
            quoted = "|".join(re2.escape(v) for v in values)
            source = "|".join(((f"(?:{quoted})",) if quoted else ()) + TOKENS + (ASSIGNMENT,))
            big = re2.compile(source.encode(), options)
        except Exception:  # pragma: no cover - a value re2 cannot take: stay with ``re``
            big = None
    return small, big


#: Words at least one of which occurs wherever a secret-named key or an assignment/bearer secret could be.
#: (:func:`may_hold_secrets` searches them as the literals of _SCREEN_LITERALS.)
_SCREEN_WORDS = r"(?i:key|secret|token|passw|passphrase|auth|cookie|credential|bearer|_pass|_pwd|_pw\b|://[^\s/@]*:[^\s/@]+@|webhook|hooks\.slack)"


# A prefilter in front of the regex passes, made of C-level byte searches that hold the GIL. re2 releases the
# GIL for every match: with any other thread busy (a memory indexer, a tool, the audit writer) each call waited
# ~50 us to get it back, for a search worth 1 us. The prefilter is a sound over-approximation: whatever the
# full pattern (or the screen) could match contains one of its literals, so "no literal" proves "no match".

#: an ASSIGNMENT's keyword ends in one of these (lower case); then what ASSIGNMENT requires up to its value
#: (every part but the value is forced, so the one match below is the only candidate)
_ASSIGNMENT_WORDS = ("key", "secret", "token", "passw", "passphrase", "_pass", "_pw")
_ASSIGNMENT_TAIL = re.compile(r"[A-Za-z0-9_\-]*(?:\\?[\"'])?[\t\n\f\r ]*[:=][\t\n\f\r ]*(?:\\?[\"'])?([^\t\n\f\r \"',;]*)")
#: the same with a value of at least four characters: in an ASCII text (one byte a character) the only test needed,
#: and a short value (``"prompt_tokens":137``) fails inside the regex instead of in Python code after it
_ASSIGNMENT_TAIL4 = re.compile(r"[A-Za-z0-9_\-]*(?:\\?[\"'])?[\t\n\f\r ]*[:=][\t\n\f\r ]*(?:\\?[\"'])?[^\t\n\f\r \"',;]{4}")
#: the screen's words (lower case), as in _SCREEN_WORDS
_SCREEN_LITERALS = ("key", "secret", "token", "passw", "passphrase", "auth", "cookie", "credential", "bearer", "_pass",
                    "_pw", "webhook", "hooks.slack")
#: _FOLDS: non-ASCII letters a case-insensitive match may fold onto ASCII ones (U+017F long s, U+212A Kelvin
#: sign for re2; U+0130/U+0131 dotted/dotless i for ``re``, which matches key names; U+0130 is also the one
#: letter whose lower case is longer): a text holding one gets the full pass


def _has_literal(text: str, values: tuple[str, ...]) -> bool:
    """Does ``text`` hold a literal every match of a token format contains (:data:`TOKENS`, case-sensitive;
    for a credential or webhook URL, "://" with what :func:`_url_may_match` looks for), a secret value, or a
    letter of _FOLDS? Spelt out: a loop over a table cost twice as much."""
    if "eyJ" in text or ("://" in text and _url_may_match(text)):
        return True
    if "-" in text and ("sk-" in text or "glpat-" in text or "xox" in text or "-----BEGIN" in text):
        return True
    if "_" in text and (("gh" in text and ("ghp_" in text or "gho_" in text or "ghu_" in text or "ghs_" in text
                                           or "ghr_" in text)) or "github_pat_" in text or "npm_" in text or "hf_" in text):
        return True
    if "A" in text and ("AKIA" in text or "ASIA" in text or "AIza" in text):
        return True
    for value in values:
        if value in text:
            return True
    return not text.isascii() and ("\u017f" in text or "\u212a" in text or "\u0130" in text or "\u0131" in text)


#: what every credential URL (:data:`CREDENTIAL_URL`'s first form) has right after its "://": a user part, ":", a
#: password and "@" (spelt with re2's ``\s``, which is narrower than ``re``'s)
_URL_AUTH = re.compile(r"[^\t\n\f\r :/@\"'<>]*:[^\t\n\f\r @/\"'<>]+@")


def _url_may_match(text: str) -> bool:
    """Could :data:`CREDENTIAL_URL` match in ``text`` (which holds "://")? A credential URL has a password and
    "@" right after one of its "://"; every webhook form holds "webhook" or "hooks.slack" (case-sensitive, as the
    pattern is). A URL without either — an endpoint in every ``llm.call`` event — no longer sends the text to
    re2: re2 gives the GIL back for every search, and getting it back in a busy server cost ~100 us of wall time
    (20 us of CPU) for a search worth 1.5 us."""
    if "webhook" in text or "hooks.slack" in text:
        return True
    at = text.find("://")
    while at >= 0:
        if _URL_AUTH.match(text, at + 3) is not None:
            return True
        at = text.find("://", at + 1)
    return False


def _may_match(text: str, values: tuple[str, ...]) -> bool:
    """False only if the full pattern of :func:`_patterns` (for these secret ``values``) finds nothing in
    ``text`` (scanned as UTF-8 by re2: a value of at least 4 bytes, ASCII case folding apart from _FOLDS)."""
    if _has_literal(text, values):
        return True
    low = text.lower()  # offsets unchanged: no letter of a text without _FOLDS lowers to more than one
    if "bearer" in low:
        return True
    ascii_ = text.isascii()  # then a value's characters are its bytes: four of them, or no assignment
    tail = _ASSIGNMENT_TAIL4 if ascii_ else _ASSIGNMENT_TAIL
    for word in _ASSIGNMENT_WORDS:
        at = low.find(word)
        while at >= 0:
            m = tail.match(text, at + len(word))
            if m is not None and (ascii_ or len(m[1]) >= 4 or len(m[1].encode("utf-8", "surrogatepass")) >= 4):
                return True
            at = low.find(word, at + 1)
    return False


@lru_cache(maxsize=8)
def _escaped(values: tuple[str, ...]) -> tuple[str, ...]:
    """Secret values and their JSON-escaped forms (as a canonical JSON text holds them)."""
    return tuple(dict.fromkeys(values + tuple(json.dumps(v, ensure_ascii=False)[1:-1] for v in values)))


#: (secret values, :func:`_escaped` of them) for the values of the last call: found by identity (the lru cache
#: hashes the tuple of values, every value, for every record)
_last_escaped: tuple[Any, tuple[str, ...]] = (None, ())


def _escaped_now(values: tuple[str, ...]) -> tuple[str, ...]:
    global _last_escaped
    last = _last_escaped
    if last[0] is values:
        return last[1]
    found = _escaped(values)
    _last_escaped = (values, found)
    return found


def may_hold_secrets(json_text: str, extra_names: Iterable[str] = ()) -> bool:
    """False when :func:`redact` would leave every value whose canonical JSON text (or plain
    string, for a string value) is in ``json_text`` unchanged: one pass to skip the structural walk.

    Byte searches for a literal of every secret kind (see :func:`_may_match`): a secret value raw
    or JSON-escaped, a token format's prefix, a word of every key name, bearer token and assignment.
    Like the pattern it replaced, it finds something in the canonical JSON text of a value whenever :func:`redact`
    would change that value (it may also find things that :func:`redact` leaves alone).

    JSON escaping works character by character, so a secret inside a string shows up in its JSON text
    escaped the same way: secret values are searched raw and JSON-escaped, token formats are made of
    characters JSON never escapes, and key names, bearer tokens and assignments all contain a word
    of :data:`_SCREEN_WORDS`.
    """
    return _screen(json_text, _escaped_now(secret_values(extra_names)))


def _screen(text: str, escaped: tuple[str, ...]) -> bool:
    """:func:`may_hold_secrets` for the JSON-escaped secret values ``escaped`` (spelt out: a loop over
    :data:`_SCREEN_LITERALS` cost twice as much)."""
    if _has_literal(text, escaped):
        return True
    low = text.lower()
    return ("key" in low or "secret" in low or "token" in low or "passw" in low or "passphrase" in low or "auth" in low
            or "cookie" in low or "credential" in low or "bearer" in low or "_pass" in low or "_pw" in low
            or "webhook" in low or "hooks.slack" in low)


#: (escaped secret values, {text: None}): the last MEMO_SIZE texts of at most MEMO_MAX_LEN characters
#: :func:`screened_clean` found nothing in, bound to the secret values that screened them (as :data:`_memo`)
_screened: tuple[Any, "OrderedDict[str, None]"] = (None, OrderedDict())


def screened_clean(texts: Iterable[str], extra_names: Iterable[str] = ()) -> bool:
    """True when :func:`may_hold_secrets` is False for every text: an audit record's JSON and text columns
    (``"{}"``, a decision's reason, the resources a call asked for) repeat from record to record, so a text
    recently screened clean under the same secret values is not screened again. Only clean texts are kept."""
    global _screened
    escaped = _escaped_now(secret_values(extra_names))
    bound, memo = _screened
    if bound is not escaped:
        memo = OrderedDict()
        _screened = (escaped, memo)
    for text in texts:
        if text in memo:
            _touch(memo, text)
            continue
        if _screen(text, escaped):
            return False
        if len(text) <= MEMO_MAX_LEN:
            memo[text] = None
            _trim(memo)
    return True


def _touch(memo: "OrderedDict[str, None]", text: str) -> None:
    try:
        memo.move_to_end(text)  # most recently used: evicted last
    except KeyError:  # another thread evicted it meanwhile
        pass


def _trim(memo: "OrderedDict[str, None]") -> None:
    """Evict the least recently used texts beyond :data:`MEMO_SIZE` (an OrderedDict: a plain dict's first key,
    behind the slots its evictions left, took a scan to find)."""
    while len(memo) > MEMO_SIZE:  # (a loop: other threads insert too)
        try:
            memo.popitem(last=False)
        except KeyError:  # another thread got there first
            break


#: (text, pattern): the last string found clean and the pattern that scanned it
_last_clean: tuple[Any, Any] = (None, None)

#: Redaction is a pure function of (text, secret patterns), and the texts a server stores repeat across
#: sessions (tool results, model replies, event payloads, metadata): the last MEMO_SIZE texts of at most
#: MEMO_MAX_LEN characters found clean by one pattern set — (the ``re`` pattern of :func:`_patterns`, {text:
#: None}), replaced whole (never cleared in place: a thread still holding the old pair writes into the old
#: dict) when the secret values, hence the patterns, change. Only clean texts are kept: the memo never holds
#: a secret after the message that carried it is gone (a text with one is scanned every time).
MEMO_SIZE = 1024
MEMO_MAX_LEN = 4096
_memo: tuple[Any, "OrderedDict[str, None]"] = (None, OrderedDict())


def clear_memo() -> None:
    """Forget every text the memo remembers (a deleted conversation's texts leave the process with it)."""
    global _memo, _last_clean, _screened
    _memo = (None, OrderedDict())
    _screened = (None, OrderedDict())
    _last_clean = (None, None)


def redact_text(text: str, extra_names: Iterable[str] = ()) -> str:
    """``text`` with every recognisable secret replaced by ``[REDACTED]`` (the same object when clean)."""
    if not text or len(text) < SHORTEST:
        return text
    return _redact_with(text, secret_values(extra_names))


#: (secret values, their patterns): :func:`_patterns` for the values of the last call (an identity check instead
#: of hashing the tuple of values again for every text)
_current: tuple[Any, Any] = (None, None)


def _redact_with(text: str, values: tuple[str, ...]) -> str:
    """:func:`redact_text` for a text of at least :data:`SHORTEST` characters and these secret ``values``."""
    global _last_clean, _memo, _current
    current = _current
    if current[0] is values:
        small, big = current[1]
    else:
        small, big = patterns = _patterns(values)
        _current = (values, patterns)
    last = _last_clean
    if last[0] is text and last[1] is small:  # this very string, scanned by these very patterns
        return text
    memo = None
    if len(text) <= MEMO_MAX_LEN:
        scanned_by, memo = _memo
        if scanned_by is not small:  # other secret values: nothing remembered holds
            memo = OrderedDict()
            _memo = (small, memo)
        if text in memo:
            _touch(memo, text)
            return text
    if big is None:
        out = _splice(text, small.finditer(text), MARK)
    elif not _may_match(text, values):
        out = text  # the common case: no literal of any secret kind, and no regex pass (see _may_match)
    else:
        data = text.encode("utf-8", "surrogatepass")
        if big.search(data) is None:
            out = text
        else:
            out = _splice(data, big.finditer(data), _MARK_BYTES).decode("utf-8", "surrogatepass")
    if out is text:
        _last_clean = (text, small)
    if memo is not None and out is text:
        memo[text] = None
        _trim(memo)
    return out


def _splice(text, matches, mark):
    """``text`` with each match (or its group 1: an assignment's value) replaced by ``mark``."""
    out, last = [], 0
    for m in matches:
        a, b = m.span(1)
        if a < 0:
            a, b = m.span()
        if a < last:
            continue
        out.append(text[last:a])
        out.append(mark)
        last = b
    if not out:
        return text
    out.append(text[last:])
    return text[:0].join(out)


#: key name -> does it name a secret (:data:`_KEY_NAME`)? Event, metadata and record keys come from a small
#: vocabulary ("prompt_tokens", "call_id"...): the regex runs once per name, not once per stored value
_secret_keys: dict[str, bool] = {}
_SCALARS = frozenset((int, float, bool, type(None)))
_BLANK = (None, "", [], {})  # values a secret-named key keeps (nothing to hide)


def secret_key(name: str) -> bool:
    """Does the key ``name`` name a secret (its value is replaced whole)? Remembered per name."""
    found = _secret_keys.get(name)
    if found is None:
        if len(_secret_keys) >= 4096:  # bounded: keys a tool made up one by one do not grow it for ever
            _secret_keys.clear()
        found = _secret_keys[name] = _KEY_NAME.match(name) is not None or _CAMEL_KEY_NAME.match(name) is not None
    return found


def redact(value: Any, extra_names: Iterable[str] = (), *, strict: bool = False) -> Any:
    """``value`` (JSON-like) with secrets removed: every string redacted (:func:`redact_text`), and the value of
    every key named like a secret replaced whole. Nothing is copied when nothing changes: the result is
    ``value`` itself (a caller that changes the result must copy it first); else a copy of each container
    on the way to a change (a tuple becomes a list), the rest shared. Anything else (bytes, a set, a path, a
    model) is left as it is — or, with ``strict``, raises TypeError: the session store redacts an event's data
    this way and scans its dumped text instead when the data holds something the walk cannot see into."""
    if value.__class__ in _SCALARS:
        return value
    return _walk(value, secret_values(extra_names), strict)


def _walk(value: Any, values: tuple[str, ...], strict: bool = False) -> Any:
    cls = value.__class__
    if cls is str:
        return value if len(value) < SHORTEST else _redact_with(value, values)
    if cls is dict:
        out = None
        keys = _secret_keys
        for k, v in value.items():
            secret = keys.get(k)
            if secret is None:
                secret = isinstance(k, str) and secret_key(k)
            if secret and v not in _BLANK:
                new = MARK
            elif v.__class__ is str:  # (the usual value: no call of _walk for it)
                if len(v) < SHORTEST:
                    continue
                new = _redact_with(v, values)
            elif v.__class__ in _SCALARS:
                continue
            else:
                new = _walk(v, values, strict)
            if new is not v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    if cls in _SCALARS:
        return value
    if cls is list or cls is tuple:
        out = None
        for i, v in enumerate(value):
            new = _walk(v, values, strict)
            if new is not v:
                if out is None:
                    out = list(value)
                out[i] = new
        return value if out is None else out
    if isinstance(value, str):  # subclasses (a Canonical column text, an enum's value)
        return value if len(value) < SHORTEST else _redact_with(value, values)
    if isinstance(value, dict):
        return _walk(dict(value), values, strict)
    if isinstance(value, (list, tuple)):
        return _walk(list(value), values, strict)
    if strict:
        raise TypeError(f"not a JSON value: {type(value).__name__}")
    return value
