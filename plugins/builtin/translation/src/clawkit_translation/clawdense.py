"""ClawDense: the compact, lossless transport encoding of CT/1 messages.

A message is one head token, then its parameters, then (optionally) raw text blocks
and a newline with the payload, written as a dense value (objects ``{key=value
key2=[a,b]}``, the top-level one without braces; arrays of same-key records as
tables ``[{k1 k2} a 1,b 2]``; strings bare where they read back as themselves; raw
JSON is accepted when reading)::

    ?web:s "nodejs vuln" 5              CT/1 REQ web_search query="nodejs vuln" limit=5
    !! code=timeout t=web_search        CT/1 ERR code=timeout tool=web_search
    >>$sub(researcher) t42 "…"          CT/1 TASK subagent agent=researcher task=t42 goal="…"

The head is a verb sigil (REQ none, RES ``<=``, TASK ``>>``, STATUS ``~``, NOOP
``.``, ERR ``!!``, ACK ``ok``, MULTI ``[]``) followed by an action code: an opcode
(``?`` query, ``@`` effect, ``!`` auth/trigger), ``$sub(name)`` for a sub-agent
hand-off, ``:action`` for an action without an opcode, or nothing. A request with
no action is written ``:``. After an opcode or hand-off head, parameters that
follow the action's signature are written by position (values only; ``-`` ends
them before a flag). ``0.4`` is ``.4``; a string with newlines is ``<<N``, its N
characters raw after the head line.

A :class:`Lexicon` abbreviates parameter names, flags, bare word values and path
prefixes. Every abbreviation is checked by reading it back: a value that would
not decode to itself (say the literal text ``q`` when ``q`` abbreviates
``query``) is written quoted, and quoted text is never rewritten. That check is
what makes ``decode(encode(m)) == m`` hold for every message.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .ct1 import (
    BARE_RE,
    FLAG,
    NAME_RE,
    NO_PAYLOAD,
    CT1Error,
    CT1Message,
    Scanner,
    quote,
    read_bare,
    same,
    write_value,
)

SIGILS = {"REQ": "", "RES": "<=", "TASK": ">>", "STATUS": "~", "NOOP": ".", "ERR": "!!", "ACK": "ok", "MULTI": "[]"}
SIGIL_VERBS = {v: k for k, v in SIGILS.items()}
OPCODE_RE = re.compile(r"[?@!][a-z]+:[a-z0-9]+")
HEAD_RE = re.compile(
    r"(?P<sigil><=|>>|~|\.|!!|ok|\[\])?"
    r"(?:(?P<op>[?@!][a-z]+:[a-z0-9]+)|\$sub\((?P<sub>[A-Za-z0-9_.\-]+)\)|:(?P<raw>[A-Za-z_][A-Za-z0-9_.\-]*)?)?"
)
_NAME_TOKEN_RE = re.compile(r"[^\s\"'\[\],=]+")
HANDOFF_ACTION, HANDOFF_KEY = "subagent", "agent"
SUB_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")

#: action → opcode. ``?`` reads/queries, ``@`` changes something, ``!`` authorises or triggers.
DEFAULT_OPCODES: dict[str, str] = {
    "web_search": "?web:s", "web_fetch": "?web:f", "http_request": "?net:h",
    "read_file": "@fs:r", "write_file": "@fs:w", "edit_file": "@fs:e", "delete_file": "@fs:d",
    "list_files": "?fs:l", "search_files": "?fs:g", "grep": "?fs:f",
    "exec": "!sh:x", "run_command": "!sh:r", "run_tests": "!ci:t",
    "memory_search": "?mem:s", "memory_store": "@mem:w", "memory_get": "?mem:g", "memory_forget": "@mem:d",
    "browser_open": "@br:o", "browser_click": "@br:c", "browser_type": "@br:t", "browser_snapshot": "?br:v",
    "send_message": "@msg:s", "schedule_task": "!cron:a", "cancel_task": "!cron:d",
    "get_weather": "?wx:g", "summarize": "?ai:s", "translate": "?ai:t", "classify": "?ai:c",
    "git_diff": "?git:d", "git_commit": "@git:c", "git_status": "?git:s",
    "authenticate": "!auth:l", "approve": "!auth:a", "load_skill": "?sk:l",
}

#: short → full, for parameter names and bare word values shared by every agent.
DEFAULT_WORDS: dict[str, str] = {
    "q": "query", "n": "limit", "p": "path", "c": "content", "u": "url", "st": "status", "msg": "message",
    "err": "error", "pg": "progress", "ph": "phase", "r": "result", "ids": "results", "src": "source",
    "dst": "destination", "ms": "elapsed_ms", "t": "tool", "why": "reason", "ttl": "timeout",
    "cmd": "command", "k": "key", "v": "value", "lang": "language", "rt": "retry", "ag": "agent",
    "tk": "task", "conf": "confidence", "sess": "session", "tg": "tags", "cap": "capability",
    "impl": "implementation", "cfg": "config", "dl": "deadline", "pr": "priority",
}

#: action → its leading parameters in the tool's usual order. After an opcode or hand-off
#: head, a message whose parameters start with these names writes just their values
#: (``@fs:r src/a.py`` is ``read_file path=src/a.py``), the way a call passes arguments
#: by position; the other parameters keep their names.
DEFAULT_SIGNATURES: dict[str, tuple[str, ...]] = {
    "web_search": ("query", "limit"), "web_fetch": ("url",), "http_request": ("url",),
    "read_file": ("path", "offset", "limit"), "write_file": ("path", "content"), "edit_file": ("path", "old", "new"),
    "delete_file": ("path",), "list_files": ("path",), "search_files": ("pattern", "path"), "grep": ("pattern", "path"),
    "exec": ("command", "cwd", "timeout"), "run_command": ("command", "cwd", "timeout"), "run_tests": ("path",),
    "memory_search": ("query", "limit"), "memory_store": ("key", "value"), "memory_get": ("key",), "memory_forget": ("key",),
    "browser_open": ("url",), "browser_click": ("selector",), "browser_type": ("selector", "text"),
    "send_message": ("agent", "message"), "schedule_task": ("command", "cron"), "cancel_task": ("task",),
    "get_weather": ("location", "units"), "summarize": ("content", "limit"), "translate": ("text", "target"),
    "classify": ("text", "labels"), "git_diff": ("path",), "git_commit": ("message", "path"), "git_status": ("path",),
    "load_skill": ("name",), HANDOFF_ACTION: ("task", "goal"),
}
#: the leading parameters of the other verbs, when the head carries an opcode or hand-off
VERB_SIGNATURES: dict[str, tuple[str, ...]] = {"RES": ("status",), "ERR": ("code",), "STATUS": ("task", "progress", "phase"), "ACK": ("task",)}
_BLOCK_RE = re.compile(r"<<(?:0|[1-9][0-9]*)")  # a multi-line text, raw after the head line
_SHORT_FLOAT_RE = re.compile(r"-?(?:\.[0-9]+|(?:0|[1-9][0-9]*)\.)")


def read_dense(token: str) -> Any:
    """The typed value of a bare ClawDense token: CT/1's reading plus ``.5`` and ``3.`` floats."""
    if _SHORT_FLOAT_RE.fullmatch(token):
        return float(token)
    return read_bare(token)


@dataclass
class Lexicon:
    """Abbreviations for one transport link (a skill's Lexicon block, merged on defaults).

    ``mappings`` is ``{short: full}`` for names, flags and whole bare values; shorts
    that look like opcodes (``?x:y``) map actions instead. ``path_compressions`` is
    ``{short_prefix: full_prefix}``; ``priority_markers`` ``{short: flag}``.
    """

    mappings: dict[str, str] = field(default_factory=dict)
    path_compressions: dict[str, str] = field(default_factory=dict)
    priority_markers: dict[str, str] = field(default_factory=dict)
    opcodes: dict[str, str] = field(default_factory=dict)  # action → opcode
    signatures: dict[str, tuple[str, ...]] = field(default_factory=dict)  # action → positional parameter names

    def __post_init__(self) -> None:
        words = {}
        for short, full in {**self.mappings, **self.priority_markers}.items():
            if OPCODE_RE.fullmatch(short):
                self.opcodes[full] = short
                continue
            if not BARE_RE.fullmatch(short) or not same(read_dense(short), short):
                raise CT1Error(f"lexicon: {short!r} cannot be an abbreviation (it must be a bare word, not a number or keyword)")
            words[short] = full
        self.words = words
        self.shorten_word = {full: short for short, full in words.items()}
        paths = {}
        for short, full in self.path_compressions.items():
            if "/" in short and "/" not in full:  # written the other way round ({full: short})
                short, full = full, short
            if not BARE_RE.fullmatch(short):
                raise CT1Error(f"lexicon: path abbreviation {short!r} must be a bare token")
            paths[short] = full.rstrip("/") if full not in ("/",) else full
        self.paths = sorted(paths.items(), key=lambda kv: -len(kv[0]))  # longest short first
        self.paths_by_full = sorted(paths.items(), key=lambda kv: -len(kv[1]))
        self.op_to_action = {op: a for a, op in self.opcodes.items()}
        self.signatures = {a: tuple(names) for a, names in self.signatures.items()}
        for action, names in self.signatures.items():
            if not all(isinstance(n, str) and NAME_RE.fullmatch(n) for n in names):
                raise CT1Error(f"lexicon: signature of {action!r} must list parameter names")
        if len(self.op_to_action) != len(self.opcodes):
            raise CT1Error("lexicon: two actions share one opcode")

    @classmethod
    def from_block(cls, data: Mapping[str, Any] | None) -> "Lexicon":
        """From a ``.claws`` LEXICON block (``mappings``, ``path_compressions``, ``priority_markers``)."""
        data = dict(data or {})

        def table(*names: str) -> dict[str, str]:
            for n in names:
                v = data.get(n)
                if isinstance(v, Mapping):
                    return {str(k): str(x) for k, x in v.items()}
            return {}

        sigs = data.get("signatures")
        signatures = {str(a): tuple(str(n) for n in names) for a, names in sigs.items() if isinstance(names, (list, tuple))} if isinstance(sigs, Mapping) else {}
        return cls(table("mappings"), table("path_compressions", "pathCompressions"), table("priority_markers", "priorityMarkers"), signatures=signatures)

    def merged(self, other: "Lexicon | None") -> "Lexicon":
        """This lexicon with ``other``'s entries on top (a skill's lexicon over the defaults)."""
        if other is None:
            return self
        words = {s: f for s, f in self.words.items() if f not in other.shorten_word and s not in other.words}
        words.update(other.words)
        ops = {a: o for a, o in self.opcodes.items() if a not in other.opcodes and o not in other.op_to_action}
        ops.update(other.opcodes)
        paths = dict(self.paths)
        paths.update(dict(other.paths))
        return Lexicon(mappings=words, path_compressions=paths, opcodes=ops, signatures={**self.signatures, **other.signatures})

    # reading and writing bare tokens --------------------------------------------------

    def expand(self, token: str) -> Any:
        """The typed value of a bare token, abbreviations expanded."""
        if token in self.words:
            return self.words[token]
        for short, full in self.paths:
            if token.startswith(short) and (len(token) == len(short) or token[len(short)] == "/"):
                return full + token[len(short):]
        return read_dense(token)

    def shorten(self, text: str) -> str:
        """A candidate bare spelling of ``text`` (checked by the caller)."""
        if text in self.shorten_word:
            return self.shorten_word[text]
        for short, full in self.paths_by_full:
            if text.startswith(full) and (len(text) == len(full) or text[len(full)] == "/"):
                return short + text[len(full):]
        return text


DEFAULT_LEXICON = Lexicon(mappings=dict(DEFAULT_WORDS), opcodes=dict(DEFAULT_OPCODES), signatures=dict(DEFAULT_SIGNATURES))


class ClawDense:
    """The codec for one link. ``encode(CT1Message) -> str``; ``decode(str) -> CT1Message``."""

    def __init__(self, lexicon: Lexicon | None = None, *, defaults: bool = True):
        self.lexicon = DEFAULT_LEXICON.merged(lexicon) if defaults else (lexicon or Lexicon())

    def signature(self, verb: str, action: str | None, coded: bool) -> tuple[str, ...]:
        """The names whose values a message may write positionally (only after an opcode or hand-off head)."""
        if not coded:
            return ()
        if verb in ("REQ", "TASK"):
            return self.lexicon.signatures.get(action or "", ())
        return VERB_SIGNATURES.get(verb, ())

    # encode --------------------------------------------------------------------------

    def encode(self, message: CT1Message) -> str:
        lex = self.lexicon
        params = list(message.params)
        head = SIGILS[message.verb]
        coded = False
        if (
            message.action == HANDOFF_ACTION
            and params
            and params[0][0] == HANDOFF_KEY
            and isinstance(params[0][1], str)
            and SUB_NAME_RE.fullmatch(params[0][1])
        ):
            head += f"$sub({params.pop(0)[1]})"
            coded = True
        elif message.action is not None:
            op = lex.opcodes.get(message.action)
            head += op if op else ":" + message.action
            coded = op is not None
        elif message.verb == "REQ":
            head = ":"
        parts = [head]
        blocks: list[str] = []
        sig = self.signature(message.verb, message.action, coded)
        k = 0
        while k < len(sig) and k < len(params) and params[k][0] == sig[k] and params[k][1] is not FLAG:
            written = self._value(params[k][1], blocks)
            parts.append(quote("-") if written == "-" else written)  # a bare '-' ends positional values
            k += 1
        if k < len(sig) and k < len(params) and params[k][1] is FLAG:
            parts.append("-")  # a flag here would read as a positional value
        for key, value in params[k:]:
            name = self._word(key)
            parts.append(name if value is FLAG else f"{name}={self._value(value, blocks)}")
        text = " ".join(parts) + "".join("\n" + b for b in blocks)
        if message.payload is not NO_PAYLOAD:
            text += "\n" + self._payload(message.payload, top=True)
        return text

    def _value(self, value: Any, blocks: list[str] | None = None) -> str:
        # a multi-line string (code, logs, diffs) goes raw after the head line as a block
        # of known length: no escapes, and indentation merges with the newline into tokens
        if blocks is not None and isinstance(value, str) and "\n" in value:
            blocks.append(value)
            return f"<<{len(value)}"
        if isinstance(value, float):
            return self._float(value)
        if isinstance(value, tuple):
            return "[" + ",".join(self._value(v) for v in value) + "]"
        return write_value(value, self._text)

    def _float(self, value: float) -> str:
        # 0.4 -> .4 and 3.0 -> 3. (one token fewer each), when that reads back as the same float
        if value != value or value in (float("inf"), float("-inf")):
            raise CT1Error(f"non-finite float {value!r} cannot be written")
        text = repr(value)
        if "e" not in text:
            sign, body = ("-", text[1:]) if text.startswith("-") else ("", text)
            if body.startswith("0.") and body != "0.0":
                body = body[1:]
            elif body.endswith(".0"):
                body = body[:-1]
            short = sign + body
            if same(self.lexicon.expand(short), value):
                return short
        return text

    def _payload(self, value: Any, top: bool = False) -> str:
        # like a parameter value, plus objects; '{' and '}' end bare tokens here. The
        # top-level object goes without braces; an array of records with the same keys
        # is a table: its keys once, then one row of values per record
        if isinstance(value, dict):
            body = " ".join(f"{self._key(k)}={self._payload(v)}" for k, v in value.items())
            return body if top and value else "{" + body + "}"
        if isinstance(value, list):
            keys = _table_keys(value)
            if keys:
                rows = (" ".join(self._payload(row[k]) for k in keys) for row in value)
                return "[{" + " ".join(self._key(k) for k in keys) + "} " + ",".join(rows) + "]"
            return "[" + ",".join(self._payload(v) for v in value) + "]"
        if isinstance(value, str):
            candidate = self.lexicon.shorten(value)
            if candidate and _PAYLOAD_BARE_RE.fullmatch(candidate) and same(self.lexicon.expand(candidate), value):
                return candidate
            return quote(value)
        if isinstance(value, float):
            return self._float(value)
        return write_value(value)

    def _key(self, key: str) -> str:
        short = self.lexicon.shorten_word.get(key)
        if short is not None and _PAYLOAD_BARE_RE.fullmatch(short):
            return short
        if _PAYLOAD_BARE_RE.fullmatch(key) and self.lexicon.words.get(key, key) == key:
            return key
        return quote(key)

    def _read_payload(self, text: str) -> Any:
        sc = _PayloadScanner(text, self.lexicon)
        value = sc.members("") if sc.key_ahead() else sc.payload()
        sc.skip_spaces()
        if not sc.at_end():
            raise sc.error("unexpected text after the payload")
        return value

    def _text(self, value: str) -> str:
        lex = self.lexicon
        candidate = lex.shorten(value)
        if candidate and BARE_RE.fullmatch(candidate) and not _BLOCK_RE.fullmatch(candidate) and same(lex.expand(candidate), value):
            return candidate
        return quote(value)

    def _word(self, name: str) -> str:
        # names and flags: abbreviated, kept bare, or quoted when the bare spelling would
        # read back as something else
        lex = self.lexicon
        short = lex.shorten_word.get(name)
        if short is not None and lex.expand(short) == name:
            return short
        if lex.expand(name) == name:
            return name
        return quote(name)

    # decode --------------------------------------------------------------------------

    def decode(self, text: str) -> CT1Message:
        lex = self.lexicon
        line = text.partition("\n")[0]
        head, _, args = line.partition(" ")
        m = HEAD_RE.fullmatch(head)
        if not m or head == "":
            raise CT1Error(f"not a ClawDense head: {head[:40]!r}")
        verb = SIGIL_VERBS[m.group("sigil") or ""]
        params: list[tuple[str, Any]] = []
        action: str | None = None
        if m.group("op"):
            action = lex.op_to_action.get(m.group("op"))
            if action is None:
                raise CT1Error(f"unknown opcode {m.group('op')!r}")
        elif m.group("sub"):
            action = HANDOFF_ACTION
            params.append((HANDOFF_KEY, m.group("sub")))
        elif m.group("raw"):
            action = m.group("raw")
        sig = self.signature(verb, action, bool(m.group("op") or m.group("sub")))
        slot = 0
        sc = Scanner(args, reader=lambda token: _Block(int(token[2:])) if _BLOCK_RE.fullmatch(token) else lex.expand(token))
        sc.skip_spaces()
        while not sc.at_end():
            if slot < len(sig):
                if args.startswith("-", sc.pos) and (sc.pos + 1 == len(args) or args[sc.pos + 1] in " \t"):
                    sc.pos += 1  # the end of positional values
                    slot = len(sig)
                elif _keyword_ahead(args, sc.pos):
                    slot = len(sig)
                    continue
                else:
                    params.append((sig[slot], sc.value()))
                    slot += 1
                if not sc.at_end() and not sc.skip_spaces():
                    raise sc.error("expected a space between parameters")
                continue
            if sc.peek() in "\"'":
                name = sc.quoted()
            else:
                nm = _NAME_TOKEN_RE.match(args, sc.pos)
                if not nm:
                    raise sc.error("expected a parameter")
                sc.pos = nm.end()
                name = lex.words.get(nm.group(), nm.group())
            if sc.peek() == "=":
                sc.pos += 1
                params.append((name, sc.value()))
            else:
                params.append((name, FLAG))
            if not sc.at_end() and not sc.skip_spaces():
                raise sc.error("expected a space between parameters")
        tail = text[len(line):]
        for i, (name, value) in enumerate(params):
            if isinstance(value, _Block):
                if not tail.startswith("\n") or len(tail) <= value.length:
                    raise CT1Error(f"parameter {name!r}: its {value.length}-character text block is cut short")
                params[i] = (name, tail[1:value.length + 1])
                tail = tail[value.length + 1:]
            elif isinstance(value, tuple) and _has_block(value):
                raise CT1Error(f"parameter {name!r}: a text block cannot be an array element")
        payload: Any = NO_PAYLOAD
        if tail:
            if not tail.startswith("\n"):
                raise CT1Error("expected a newline before the payload")
            payload_text = tail[1:]
            try:
                payload = self._read_payload(payload_text)
            except CT1Error as dense_error:
                try:  # liberal: a plain JSON payload
                    payload = json.loads(payload_text)
                except json.JSONDecodeError:
                    raise CT1Error(f"payload: {dense_error}") from None
        return CT1Message(verb, action, tuple(params), payload)


class _Block:
    """A ``<<N`` reference in the head line: the next N characters after it are the value."""

    def __init__(self, length: int):
        self.length = length


def _has_block(values: tuple) -> bool:
    return any(isinstance(v, _Block) or (isinstance(v, tuple) and _has_block(v)) for v in values)


def _keyword_ahead(text: str, pos: int) -> bool:
    """Does a ``name=value`` parameter start at ``pos`` (rather than a positional value)?"""
    if pos < len(text) and text[pos] in "\"'":
        sc = Scanner(text)
        sc.pos = pos
        try:
            sc.quoted()
        except CT1Error:
            return False
        return sc.peek() == "="
    m = _NAME_TOKEN_RE.match(text, pos)
    return bool(m) and text.startswith("=", m.end())


def _table_keys(items: list[Any]) -> list[str] | None:
    """The shared keys when ``items`` are two or more records with the same keys in the same order."""
    if len(items) < 2 or not all(isinstance(i, dict) for i in items):
        return None
    keys = list(items[0])
    if not keys or any(list(i) != keys for i in items[1:]):
        return None
    return keys


_PAYLOAD_BARE_RE = re.compile(r"[^\s\"'\[\]{},=\x00-\x1f\x7f][^\s\"\[\]{},=\x00-\x1f\x7f]*")


class _PayloadScanner(Scanner):
    """Reads a dense payload: parameter values plus ``{key=value ...}`` objects and ``[{k1 k2} v1 v2,...]`` tables."""

    def __init__(self, text: str, lexicon: Lexicon):
        super().__init__(text, reader=lexicon.expand)
        self.lexicon = lexicon

    def bare(self) -> str:
        m = _PAYLOAD_BARE_RE.match(self.text, self.pos)
        if not m:
            raise self.error("expected a value")
        self.pos = m.end()
        return m.group()

    def key(self) -> str:
        if self.peek() in "\"'":
            return self.quoted()
        token = self.bare()
        return self.lexicon.words.get(token, token)

    def key_ahead(self) -> bool:
        """Is the next thing an object key followed by ``=``?"""
        start = self.pos
        try:
            if self.peek() in "\"'" or _PAYLOAD_BARE_RE.match(self.text, self.pos):
                self.key()
                return self.peek() == "="
            return False
        except CT1Error:
            return False
        finally:
            self.pos = start

    def members(self, close: str) -> dict[str, Any]:
        """``key=value`` members up to ``close`` (``"}"``, or ``""`` for the end of the text)."""
        obj: dict[str, Any] = {}
        self.skip_spaces()
        while True:
            if self.peek() == close:  # peek() is "" only at the end
                self.pos += len(close)
                return obj
            if self.at_end():
                raise self.error("unterminated object")
            key = self.key()
            if self.peek() != "=":
                raise self.error("expected '=' after an object key")
            self.pos += 1
            obj[key] = self.payload()
            if not self.skip_spaces() and self.peek() != close:
                raise self.error("expected a space or the end of an object")

    def header(self) -> list[str] | None:
        """A table header ``{k1 k2 ...}`` at the cursor (consumed), or None (cursor unchanged)."""
        start = self.pos
        if self.peek() != "{":
            return None
        self.pos += 1
        self.skip_spaces()
        if self.peek() == "}":
            self.pos = start
            return None
        keys: list[str] = []
        try:
            while self.peek() != "}":
                if self.at_end():
                    raise self.error("unterminated table header")
                keys.append(self.key())
                if self.peek() == "=":  # an object, not a header
                    self.pos = start
                    return None
                self.skip_spaces()
        except CT1Error:
            self.pos = start
            return None
        if len(set(keys)) != len(keys):
            raise self.error("a table header repeats a key")
        self.pos += 1
        return keys

    def payload(self) -> Any:
        c = self.peek()
        if c == "{":
            self.pos += 1
            return self.members("}")
        if c == "[":
            self.pos += 1
            items: list[Any] = []
            self.skip_spaces()
            keys = self.header()
            if keys is not None:
                return self.rows(keys)
            if self.peek() == "]":
                self.pos += 1
                return items
            while True:
                self.skip_spaces()
                items.append(self.payload())
                self.skip_spaces()
                c = self.peek()
                self.pos += 1
                if c == "]":
                    return items
                if c != ",":
                    self.pos -= 1
                    raise self.error("expected ',' or ']' in an array")
        if c in "\"'":
            return self.quoted()
        return self.reader(self.bare())

    def rows(self, keys: list[str]) -> list[dict[str, Any]]:
        """Table rows after the header: values separated by spaces, rows by ``,``, up to ``]``."""
        out: list[dict[str, Any]] = []
        while True:
            row: dict[str, Any] = {}
            for i, key in enumerate(keys):
                if not self.skip_spaces() and i:
                    raise self.error("expected a space between the values of a table row")
                row[key] = self.payload()
            out.append(row)
            self.skip_spaces()
            c = self.peek()
            self.pos += 1
            if c == "]":
                return out
            if c != ",":
                self.pos -= 1
                raise self.error("expected ',' or ']' after a table row")


def encode(message: CT1Message, lexicon: Lexicon | None = None) -> str:
    """Encode with the default lexicon (plus ``lexicon`` on top)."""
    return ClawDense(lexicon).encode(message)


def decode(text: str, lexicon: Lexicon | None = None) -> CT1Message:
    """Decode with the default lexicon (plus ``lexicon`` on top)."""
    return ClawDense(lexicon).decode(text)


def known_opcodes(lexicons: Iterable[Lexicon] = ()) -> set[str]:
    """Every opcode the defaults and ``lexicons`` define (the outbound scrubber's list)."""
    ops = set(DEFAULT_LEXICON.op_to_action)
    for lex in lexicons:
        ops.update(lex.op_to_action)
    return ops
