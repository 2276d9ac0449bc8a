"""CT/1: the line-oriented agent-to-agent message format.

::

    CT/1 VERB [action] (key=value | flag)* [\\n---\\n<JSON payload>]

Values are typed: ``"quoted strings"`` (JSON string syntax, so spaces, quotes,
commas, newlines and ``->`` survive), bare tokens (``30s``, ``a3f``), integers,
finite floats, ``true``/``false``, ``null`` and arrays ``[a,"b c",3]``. A bare
token is read as a number/bool/null when it looks like one, so the writer quotes
any string that would not read back as itself: ``parse(serialize(m)) == m`` for
every valid message. Flags (a bare name) are distinct from ``name=true``.

When a message has no action but starts with a flag, the writer puts ``-`` in the
action slot (``CT/1 NOOP - verbose``) so the flag is not read as the action.
Reading is liberal: lower-case verbs, single-quoted strings, spaces after commas
in arrays and a pretty-printed payload are accepted.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

VERBS = ("REQ", "RES", "TASK", "STATUS", "NOOP", "ERR", "ACK", "MULTI")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
BARE_RE = re.compile(r"[^\s\"'\[\],=\x00-\x1f\x7f][^\s\"\[\],=\x00-\x1f\x7f]*")
INT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)")
FLOAT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
KEYWORDS = {"true": True, "false": False, "null": None}


class CT1Error(ValueError):
    """A CT/1 or ClawDense text that cannot be read, or a message that cannot be written."""


class _Flag:
    """Marks a parameter that is a bare flag (``urgent``), not ``urgent=true``."""

    _instance: "_Flag | None" = None

    def __new__(cls) -> "_Flag":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "FLAG"


class _NoPayload:
    _instance: "_NoPayload | None" = None

    def __new__(cls) -> "_NoPayload":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_PAYLOAD"

    def __bool__(self) -> bool:
        return False


FLAG = _Flag()
NO_PAYLOAD = _NoPayload()


@dataclass(frozen=True)
class CT1Message:
    """One CT/1 message: ``verb``, optional ``action``, ordered ``params`` and a payload.

    ``params`` is a tuple of ``(name, value)`` pairs in order (duplicates allowed);
    a flag is ``(name, FLAG)``. ``payload`` is any JSON value, or ``NO_PAYLOAD``.
    """

    verb: str
    action: str | None = None
    params: tuple[tuple[str, Any], ...] = ()
    payload: Any = NO_PAYLOAD

    def __post_init__(self) -> None:
        if self.verb not in VERBS:
            raise CT1Error(f"unknown CT/1 verb {self.verb!r} (expected one of {', '.join(VERBS)})")
        if self.action is not None and not NAME_RE.fullmatch(self.action):
            raise CT1Error(f"invalid action name {self.action!r}")
        object.__setattr__(self, "params", tuple((k, _freeze(v)) for k, v in self.params))
        for key, value in self.params:
            if not isinstance(key, str) or not NAME_RE.fullmatch(key):
                raise CT1Error(f"invalid parameter name {key!r}")
            _check_value(value, key)

    @classmethod
    def build(cls, verb: str, action: str | None = None, *flags: str, payload: Any = NO_PAYLOAD, **params: Any) -> "CT1Message":
        """``CT1Message.build("REQ", "web_search", "urgent", q="nodejs vuln", limit=5)``."""
        items = [(k, v) for k, v in params.items()] + [(f, FLAG) for f in flags]
        return cls(verb, action, tuple(items), payload)

    @property
    def flags(self) -> list[str]:
        return [k for k, v in self.params if v is FLAG]

    def get(self, key: str, default: Any = None) -> Any:
        """The first value of parameter ``key`` (lists come back as lists)."""
        for k, v in self.params:
            if k == key and v is not FLAG:
                return _thaw(v)
        return default

    def to_dict(self) -> dict[str, Any]:
        """The compact-JSON shape of a message (what a JSON protocol would send)."""
        out: dict[str, Any] = {"verb": self.verb}
        if self.action is not None:
            out["action"] = self.action
        kv = {k: _thaw(v) for k, v in self.params if v is not FLAG}
        if kv:
            out["params"] = kv
        if self.flags:
            out["flags"] = self.flags
        if self.payload is not NO_PAYLOAD:
            out["payload"] = self.payload
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))


def _freeze(value: Any) -> Any:
    # lists become tuples so messages stay hashable and comparable; thawed on the way out
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _check_value(value: Any, key: str) -> None:
    if value is FLAG or value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CT1Error(f"parameter {key!r}: non-finite float {value!r} cannot be written")
        return
    if isinstance(value, tuple):
        for v in value:
            if v is FLAG:
                raise CT1Error(f"parameter {key!r}: a flag cannot be an array element")
            _check_value(v, key)
        return
    raise CT1Error(f"parameter {key!r}: unsupported value type {type(value).__name__}")


# --- values ---------------------------------------------------------------------------------


def read_bare(token: str) -> Any:
    """The typed value of a bare token."""
    if token in KEYWORDS:
        return KEYWORDS[token]
    if INT_RE.fullmatch(token):
        return int(token)
    if FLOAT_RE.fullmatch(token):
        return float(token)
    return token


def same(a: Any, b: Any) -> bool:
    """Type-strict equality (``1 != True != 1.0``), element-wise for tuples."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def quote(text: str) -> str:
    """A JSON string literal that stays on one line even for U+2028/U+2029/U+0085."""
    out = json.dumps(text, ensure_ascii=False)
    return out.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")


def write_value(value: Any, text=None) -> str:
    """Serialise one value. ``text(s)`` writes a string (ClawDense passes its lexicon
    writer); by default a string is bare when it reads back as itself, else quoted."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CT1Error(f"non-finite float {value!r} cannot be written")
        return repr(value)
    if isinstance(value, tuple):
        return "[" + ",".join(write_value(v, text) for v in value) + "]"
    if isinstance(value, str):
        return text(value) if text else bare_or_quoted(value)
    raise CT1Error(f"unsupported value type {type(value).__name__}")


def bare_or_quoted(text: str) -> str:
    """``text`` bare when it reads back as the same string, else quoted."""
    if text and BARE_RE.fullmatch(text) and same(read_bare(text), text):
        return text
    return quote(text)


class Scanner:
    """A cursor over one line of tokens (shared by the CT/1 and ClawDense readers)."""

    def __init__(self, text: str, reader=read_bare):
        self.text = text
        self.pos = 0
        self.reader = reader

    def error(self, msg: str) -> CT1Error:
        return CT1Error(f"{msg} at column {self.pos + 1}: {self.text!r}")

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def skip_spaces(self) -> bool:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1
        return self.pos > start

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def quoted(self) -> str:
        q = self.peek()
        if q == '"':
            try:
                value, end = json.JSONDecoder().raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                raise self.error("unterminated or invalid quoted string") from None
            self.pos = end
            return value
        if q == "'":  # liberal: 'single quoted', backslash escapes the next char
            out, i = [], self.pos + 1
            while i < len(self.text):
                c = self.text[i]
                if c == "\\" and i + 1 < len(self.text):
                    out.append(self.text[i + 1])
                    i += 2
                    continue
                if c == "'":
                    self.pos = i + 1
                    return "".join(out)
                out.append(c)
                i += 1
            raise self.error("unterminated quoted string")
        raise self.error("expected a quoted string")

    def bare(self) -> str:
        m = BARE_RE.match(self.text, self.pos)
        if not m:
            raise self.error("expected a value")
        self.pos = m.end()
        return m.group()

    def value(self) -> Any:
        c = self.peek()
        if c in "\"'":
            return self.quoted()
        if c == "[":
            self.pos += 1
            items: list[Any] = []
            self.skip_spaces()
            if self.peek() == "]":
                self.pos += 1
                return tuple(items)
            while True:
                self.skip_spaces()
                items.append(self.value())
                self.skip_spaces()
                c = self.peek()
                self.pos += 1
                if c == "]":
                    return tuple(items)
                if c != ",":
                    self.pos -= 1
                    raise self.error("expected ',' or ']' in array")
        return self.reader(self.bare())


# --- CT/1 text ------------------------------------------------------------------------------

_HEADER_RE = re.compile(r"[ \t]*(?i:ct)/1[ \t]+([A-Za-z]+)(?=[ \t]|$)")


def serialize(message: CT1Message) -> str:
    """The strict CT/1 text of ``message``."""
    parts = ["CT/1", message.verb]
    if message.action is not None:
        parts.append(message.action)
    elif message.params and message.params[0][1] is FLAG:
        parts.append("-")
    for key, value in message.params:
        parts.append(key if value is FLAG else f"{key}={write_value(value)}")
    text = " ".join(parts)
    if message.payload is not NO_PAYLOAD:
        text += "\n---\n" + json.dumps(message.payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text


def parse(text: str) -> CT1Message:
    """Read one CT/1 message (header line, optional ``---`` and JSON payload)."""
    header, sep, rest = text.partition("\n")
    header = header.rstrip("\r")
    m = _HEADER_RE.match(header)
    if not m:
        raise CT1Error(f"not a CT/1 header: {header[:80]!r}")
    verb = m.group(1).upper()
    if verb not in VERBS:
        raise CT1Error(f"unknown CT/1 verb {m.group(1)!r}")
    sc = Scanner(header)
    sc.pos = m.end()
    action: str | None = None
    params: list[tuple[str, Any]] = []
    first = True
    while True:
        sc.skip_spaces()
        if sc.at_end():
            break
        name_m = NAME_RE.match(header, sc.pos)
        if first and header.startswith("-", sc.pos) and (sc.pos + 1 == len(header) or header[sc.pos + 1] in " \t"):
            sc.pos += 1
            first = False
            continue
        if not name_m:
            raise sc.error("expected a parameter name")
        sc.pos = name_m.end()
        if sc.peek() == "=":
            sc.pos += 1
            params.append((name_m.group(), sc.value()))
        elif first:
            action = name_m.group()
        else:
            params.append((name_m.group(), FLAG))
        first = False
        if not sc.at_end() and not sc.skip_spaces():
            raise sc.error("expected a space between parameters")
    payload: Any = NO_PAYLOAD
    if sep:
        body_lines = rest.split("\n")
        if body_lines[0].strip() != "---":
            raise CT1Error(f"line 2: expected '---' before the payload, got {body_lines[0][:40]!r}")
        body = "\n".join(body_lines[1:])
        try:
            payload = json.loads(body)
        except json.JSONDecodeError as exc:
            raise CT1Error(f"payload: invalid JSON at line {exc.lineno + 2}, column {exc.colno}: {exc.msg}") from None
    return CT1Message(verb, action, tuple(params), payload)
