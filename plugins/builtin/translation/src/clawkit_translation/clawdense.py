"""ClawDense: the compact, lossless transport encoding of CT/1 messages.

A message is one head token, then its parameters, then (optionally) a newline and
the payload, written as a dense value (objects ``{key=value key2=[a,b]}``, strings
bare where they read back as themselves; raw JSON is accepted when reading)::

    ?web:s q="nodejs vuln" n=5          CT/1 REQ web_search q="nodejs vuln" limit=5
    !! code=timeout t=web_search        CT/1 ERR code=timeout tool=web_search
    >>$sub(researcher) goal="…"         CT/1 TASK subagent agent=researcher goal="…"

The head is a verb sigil (REQ none, RES ``<=``, TASK ``>>``, STATUS ``~``, NOOP
``.``, ERR ``!!``, ACK ``ok``, MULTI ``[]``) followed by an action code: an opcode
(``?`` query, ``@`` effect, ``!`` auth/trigger), ``$sub(name)`` for a sub-agent
hand-off, ``:action`` for an action without an opcode, or nothing. A request with
no action is written ``:``.

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
    "list_files": "?fs:ls", "search_files": "?fs:g", "grep": "?fs:q",
    "exec": "!sh:x", "run_command": "!sh:r", "run_tests": "!ci:t",
    "memory_search": "?mem:s", "memory_store": "@mem:w", "memory_get": "?mem:g", "memory_forget": "@mem:d",
    "browser_open": "@br:o", "browser_click": "@br:c", "browser_type": "@br:t", "browser_snapshot": "?br:v",
    "send_message": "@msg:s", "schedule_task": "!cron:a", "cancel_task": "!cron:d",
    "get_weather": "?wx:g", "summarize": "?llm:s", "translate": "?llm:t", "classify": "?llm:c",
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

    def __post_init__(self) -> None:
        words = {}
        for short, full in {**self.mappings, **self.priority_markers}.items():
            if OPCODE_RE.fullmatch(short):
                self.opcodes[full] = short
                continue
            if not BARE_RE.fullmatch(short) or not same(read_bare(short), short):
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

        return cls(table("mappings"), table("path_compressions", "pathCompressions"), table("priority_markers", "priorityMarkers"))

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
        return Lexicon(mappings=words, path_compressions=paths, opcodes=ops)

    # reading and writing bare tokens --------------------------------------------------

    def expand(self, token: str) -> Any:
        """The typed value of a bare token, abbreviations expanded."""
        if token in self.words:
            return self.words[token]
        for short, full in self.paths:
            if token.startswith(short) and (len(token) == len(short) or token[len(short)] == "/"):
                return full + token[len(short):]
        return read_bare(token)

    def shorten(self, text: str) -> str:
        """A candidate bare spelling of ``text`` (checked by the caller)."""
        if text in self.shorten_word:
            return self.shorten_word[text]
        for short, full in self.paths_by_full:
            if text.startswith(full) and (len(text) == len(full) or text[len(full)] == "/"):
                return short + text[len(full):]
        return text


DEFAULT_LEXICON = Lexicon(mappings=dict(DEFAULT_WORDS), opcodes=dict(DEFAULT_OPCODES))


class ClawDense:
    """The codec for one link. ``encode(CT1Message) -> str``; ``decode(str) -> CT1Message``."""

    def __init__(self, lexicon: Lexicon | None = None, *, defaults: bool = True):
        self.lexicon = DEFAULT_LEXICON.merged(lexicon) if defaults else (lexicon or Lexicon())

    # encode --------------------------------------------------------------------------

    def encode(self, message: CT1Message) -> str:
        lex = self.lexicon
        params = list(message.params)
        head = SIGILS[message.verb]
        if (
            message.action == HANDOFF_ACTION
            and params
            and params[0][0] == HANDOFF_KEY
            and isinstance(params[0][1], str)
            and SUB_NAME_RE.fullmatch(params[0][1])
        ):
            head += f"$sub({params.pop(0)[1]})"
        elif message.action is not None:
            op = lex.opcodes.get(message.action)
            head += op if op else ":" + message.action
        elif message.verb == "REQ":
            head = ":"
        parts = [head]
        for key, value in params:
            name = self._word(key)
            parts.append(name if value is FLAG else f"{name}={write_value(value, self._text)}")
        text = " ".join(parts)
        if message.payload is not NO_PAYLOAD:
            text += "\n" + self._payload(message.payload)
        return text

    def _payload(self, value: Any) -> str:
        # like a parameter value, plus objects; '{' and '}' end bare tokens here
        if isinstance(value, dict):
            return "{" + " ".join(f"{self._key(k)}={self._payload(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ",".join(self._payload(v) for v in value) + "]"
        if isinstance(value, str):
            candidate = self.lexicon.shorten(value)
            if candidate and _PAYLOAD_BARE_RE.fullmatch(candidate) and same(self.lexicon.expand(candidate), value):
                return candidate
            return quote(value)
        if isinstance(value, float) and value != value:
            raise CT1Error("payload: NaN cannot be written")
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
        value = sc.payload()
        sc.skip_spaces()
        if not sc.at_end():
            raise sc.error("unexpected text after the payload")
        return value

    def _text(self, value: str) -> str:
        lex = self.lexicon
        candidate = lex.shorten(value)
        if candidate and BARE_RE.fullmatch(candidate) and same(lex.expand(candidate), value):
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
        line, sep, payload_text = text.partition("\n")
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
        sc = Scanner(args, reader=lex.expand)
        sc.skip_spaces()
        while not sc.at_end():
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
        payload: Any = NO_PAYLOAD
        if sep:
            try:
                payload = self._read_payload(payload_text)
            except CT1Error as dense_error:
                try:  # liberal: a plain JSON payload
                    payload = json.loads(payload_text)
                except json.JSONDecodeError:
                    raise CT1Error(f"payload: {dense_error}") from None
        return CT1Message(verb, action, tuple(params), payload)


_PAYLOAD_BARE_RE = re.compile(r"[^\s\"'\[\]{},=\x00-\x1f\x7f][^\s\"\[\]{},=\x00-\x1f\x7f]*")


class _PayloadScanner(Scanner):
    """Reads a dense payload: parameter values plus ``{key=value ...}`` objects."""

    def __init__(self, text: str, lexicon: Lexicon):
        super().__init__(text, reader=lexicon.expand)
        self.lexicon = lexicon

    def bare(self) -> str:
        m = _PAYLOAD_BARE_RE.match(self.text, self.pos)
        if not m:
            raise self.error("expected a value")
        self.pos = m.end()
        return m.group()

    def payload(self) -> Any:
        c = self.peek()
        if c == "{":
            self.pos += 1
            obj: dict[str, Any] = {}
            self.skip_spaces()
            while self.peek() != "}":
                if self.at_end():
                    raise self.error("unterminated object")
                if self.peek() in "\"'":
                    key = self.quoted()
                else:
                    token = self.bare()
                    key = self.lexicon.words.get(token, token)
                if self.peek() != "=":
                    raise self.error("expected '=' after an object key")
                self.pos += 1
                obj[key] = self.payload()
                if self.peek() not in " }":
                    raise self.error("expected a space or '}' in an object")
                self.skip_spaces()
            self.pos += 1
            return obj
        if c == "[":
            self.pos += 1
            items: list[Any] = []
            self.skip_spaces()
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
