"""decode_outbound: strip transport artifacts a model echoes, without touching prose.

What is removed (outside fenced code blocks only):

* a line that is a CT/1 header (``CT/1 REQ …``), and the ``---`` + JSON payload
  right after it;
* a line of ClawDense whose head carries a known opcode or a hand-off
  (``?web:s q=…``, ``<=@fs:r …``, ``>>$sub(researcher) …``), or a symbolic verb
  sigil followed by ``key=value`` parameters only (``!! code=timeout``);
* a line that is ClawDense by the notation's grammar (:data:`_NOTATION`, from the public
  clawdense-notation document and docs/ct1-clawdense.md): one or more operations
  ``PREFIX name[:op](args)`` (prefixes ``!`` ``@`` ``?`` ``::`` ``>>`` ``<<`` ``!!``), each
  optionally followed by ``[state]`` or ``key=value`` parameters, then an optional
  ``-> result`` and ``# comment``; a verb sigil (``<=`` ``~`` ``ok`` ``[]``) may lead.
  ``@`` and ``?`` need a ``domain:op`` name (``@fs:r``), other prefixes a name with
  arguments or a ``domain:op`` — so ``@alice: hi``, ``?`` or ``!important: …`` stay prose;
* routing annotations ``[ClawTalk routing: …]`` / ``[CT/1 …]``, as a whole line
  or inline (with the spaces after them).

Streaming: :class:`OutboundScrubber` holds back only text that could still turn
into an artifact — a line start such as ``CT/1 R``, ``?web:``, ``>>`` or ``[Cl``,
an inline ``[ClawT…`` — and releases everything else at once. Its output never
depends on how the text was cut into chunks: ``scrub(text)`` is literally one
``feed`` plus ``flush``, and a property test checks every chunking against it.
"""

from __future__ import annotations

import json
import re
from typing import Iterable

import regex

from .clawdense import ClawDense, CT1Error

LIMIT = 4000  # longest line (and payload) we are willing to hold back

_CT1 = regex.compile(r"[ \t]{0,3}CT/1[ \t]+(?:REQ|RES|TASK|STATUS|NOOP|ERR|ACK|MULTI)(?:[ \t][^\n]*)?")
# "[ClawTalk routing: …]", "[ClawTalk: …]", "[CT/1 REQ …]" — a bare "[ClawTalk docs]" is prose
_ANN = r"\[(?:ClawTalk(?:[ \t]+[A-Za-z_\-]+)?[ \t]*:|CT/1[ \t]+(?:REQ|RES|TASK|STATUS|NOOP|ERR|ACK|MULTI)\b)[^\]\n]{0,400}\]"
_ANN_LINE = regex.compile(rf"[ \t]*(?:{_ANN}[ \t]*)+")
_ANN_INLINE = regex.compile(rf"{_ANN}[ \t]*")
_CODE = r"(?:[?@!][a-z]+:[a-z0-9]+|\$sub\([A-Za-z0-9_.\-]+\))"
# D1: an opcode or hand-off head, anything after it
_DENSE_OP = regex.compile(rf"[ \t]{{0,3}}(?P<sigil><=|>>|~|\.|!!|ok|\[\])?(?P<code>{_CODE})(?:[ \t][^\n]*)?")
# D2: a symbolic sigil (optionally with :action) followed by parameters
_DENSE_KV = regex.compile(r"[ \t]{0,3}(?:<=|>>|!!|~|\[\])(?::[A-Za-z_][\w.\-]*)?[ \t]+[^\n]*")
# The notation's grammar (a whole line). name = identifier, op = name(:name)*; strings in either
# quote; arguments nest; an operation needs arguments or a domain:op name (see the module doc).
_NOTATION = regex.compile(r"""
  (?(DEFINE)
    (?<str> "(?:[^"\\\n]|\\.)*" | '(?:[^'\\\n]|\\.)*' )
    (?<args> \( (?: [^()"'\n] | (?&str) | (?&args) )* \) )
    (?<id> \$?[A-Za-z_][\w\-]* )
    (?<qual> (?&id) (?: :[A-Za-z_][\w\-]* )+ )
    (?<op> (?: (?:!!|::|>>|<<|!) (?: (?&qual) | (?&id) ) (?&args)
             | [@?] (?&qual) (?&args)?
             | ! (?&qual)
             | !! [A-Za-z]\w*_\w* ) )
    (?<state> \[ [^\]\n]{0,64} \] )
    (?<kv> [A-Za-z_][\w.\-]*(?:=|:[ \t]*)(?: (?&str) | [^\s"',()]+ ),? )
    (?<result> (?&str) | (?&state) | \$?[\w.\-]+ )
  )
  [ \t]{0,3} (?: (?:<=|~|ok|\[\]) [ \t]* )?
  (?&op) (?: [ \t]+ (?: (?&op) | (?&state) | (?&kv) ) )*
  (?: [ \t]* -> [ \t]* (?&result) )?
  (?: [ \t]+ \# [^\n]* )?
  [ \t]*
""", regex.VERBOSE)
# Every artifact above needs one of these (a CT/1 header, a "[", an opcode or hand-off code, a
# symbolic sigil at a line start): text without any of them comes out of the scrubber unchanged.
# (the standard library's re: the pre-check runs on every reply, and re's search costs less per call than regex's)
_MAYBE = re.compile(r"CT/1|\[|\$sub\(|[?@!][a-z]+:[a-z0-9]|(?m:^[ \t]{0,3}(?:<=|>>|<<|!!|~|::|ok[?@!]|[!@?]\$?[A-Za-z_]))")
_SEP = regex.compile(r"[ \t\r]*---[ \t\r]*")
_FENCE = regex.compile(r" {0,3}(```+|~~~+)")


class OutboundScrubber:
    """A streaming scrubber: ``feed(chunk) -> text to deliver now``; ``flush()`` at the end.

    ``stripped`` counts the artifacts removed so far.
    """

    def __init__(self, codec: ClawDense | None = None):
        self.codec = codec or ClawDense()
        self.opcodes = set(self.codec.lexicon.op_to_action)
        self.buf = ""
        self.mode = "start"  # start | prose | fence | payload
        self.line = ""  # the current line's text so far (fence detection)
        self.in_fence = ""  # the open fence marker, or ""
        self.after_header = False
        self.held = ""  # the '---' line after a stripped CT/1 header, while deciding
        self.stripped = 0

    # public ------------------------------------------------------------------------

    def feed(self, text: str) -> str:
        self.buf += text
        return self._run(final=False)

    def flush(self) -> str:
        out = self._run(final=True)
        if self.mode == "payload":  # the stream ended right after '---'
            out += self.held
        self.mode, self.line, self.after_header, self.in_fence, self.held = "start", "", False, "", ""
        return out

    # line classification ----------------------------------------------------------

    def artifact(self, line: str) -> str | None:
        """What kind of artifact a complete line is (``ct1``, ``annotation``, ``dense``), or None."""
        if len(line) >= LIMIT:
            return None
        if _CT1.fullmatch(line):
            return "ct1"
        if _ANN_LINE.fullmatch(line):
            return "annotation"
        if _NOTATION.fullmatch(line):
            return "dense"
        m = _DENSE_OP.fullmatch(line)
        if m and (m.group("code").startswith("$sub(") or m.group("code") in self.opcodes):
            return "dense"
        if _DENSE_KV.fullmatch(line):
            try:
                msg = self.codec.decode(line.strip())
            except (CT1Error, ValueError):
                return None
            if msg.params and not any(_is_flag(v) for _, v in msg.params):
                return "dense"
        return None

    def _viable(self, partial: str) -> bool:
        """Could this start of a line still become an artifact line?"""
        if self.after_header and _SEP.fullmatch(partial, partial=True):
            return True
        return any(
            p.fullmatch(partial, partial=True) is not None for p in (_CT1, _ANN_LINE, _DENSE_OP, _DENSE_KV, _NOTATION)
        )

    # the state machine ----------------------------------------------------------------

    def _run(self, final: bool) -> str:
        out: list[str] = []
        while self.buf:
            if self.mode == "start":
                nl = self.buf.find("\n")
                if nl < 0 and not final:
                    if self.in_fence:
                        self.mode = "fence"
                    elif self._viable(self.buf) and len(self.buf) < LIMIT:
                        break  # wait: this may be the start of an artifact
                    else:
                        self._to_prose()
                    continue
                line = self.buf if nl < 0 else self.buf[:nl]
                if self.in_fence:
                    self.mode = "fence"
                    continue
                kind = self.artifact(line)
                if kind:
                    self.stripped += 1
                    self.after_header = kind == "ct1"
                    self.buf = "" if nl < 0 else self.buf[nl + 1 :]
                    continue
                if self.after_header and nl >= 0 and line.strip() == "---":
                    self.held, self.buf, self.mode = line + "\n", self.buf[nl + 1 :], "payload"
                    self.after_header = False
                    continue
                self._to_prose()
            elif self.mode == "fence":
                nl = self.buf.find("\n")
                chunk = self.buf if nl < 0 else self.buf[: nl + 1]
                out.append(chunk)
                self.line += chunk
                self.buf = self.buf[len(chunk) :]
                if nl >= 0:
                    if self.line.strip().startswith(self.in_fence) and not self.line.strip().lstrip(self.in_fence[0]):
                        self.in_fence = ""
                    self.mode, self.line = "start", ""
            elif self.mode == "prose":
                if not self._prose(out, final):
                    break
            elif self.mode == "payload":
                if not self._payload(out, final):
                    break
        return "".join(out)

    def _to_prose(self) -> None:
        self.mode, self.line, self.after_header = "prose", "", False

    def _prose(self, out: list[str], final: bool) -> bool:
        """Emit prose up to the end of the line, dropping inline annotations. False = wait."""
        buf = self.buf
        nl = buf.find("\n")
        end = len(buf) if nl < 0 else nl
        i = buf.find("[", 0, end)
        while i >= 0:
            m = _ANN_INLINE.match(buf, i, end)
            if m and (m.end() < end or nl >= 0 or final):
                out.append(buf[:i])
                self.line += buf[: m.end()]
                self.stripped += 1
                self.buf = buf[m.end() :]
                return True
            if not final and nl < 0 and _ANN_INLINE.fullmatch(buf, i, end, partial=True):
                out.append(buf[:i])
                self.line += buf[:i]
                self.buf = buf[i:]
                return False  # wait: an annotation may be arriving
            i = buf.find("[", i + 1, end)
        chunk = buf if nl < 0 else buf[: nl + 1]
        out.append(chunk)
        self.line += chunk
        self.buf = buf[len(chunk) :]
        if nl >= 0:
            fence = _FENCE.match(self.line)
            if fence:
                self.in_fence = fence.group(1)
            self.mode, self.line = "start", ""
        return True

    def _payload(self, out: list[str], final: bool) -> bool:
        """After ``CT/1 …`` + ``---``: drop a JSON object/array payload. False = wait."""
        s = self.buf
        i = len(s) - len(s.lstrip())
        if i == len(s) and not final:
            return False
        is_payload = False
        if i < len(s) and s[i] in "{[":
            try:
                _, e = json.JSONDecoder().raw_decode(s, i)
            except json.JSONDecodeError as exc:
                if not final and len(s) <= LIMIT and (exc.pos >= len(s) or exc.msg.startswith("Unterminated")):
                    return False
            else:
                j = e
                while j < len(s) and s[j] in " \t":
                    j += 1
                if j == len(s) and not final:
                    return False
                if e <= LIMIT and (j == len(s) or s[j] == "\n"):
                    self.buf = s[j + 1 :]
                    is_payload = True
        if not is_payload:
            out.append(self.held)
        self.held, self.mode = "", "start"
        return True


def _is_flag(value: object) -> bool:
    from .ct1 import FLAG

    return value is FLAG


def may_contain_artifacts(text: str) -> bool:
    """False when ``text`` certainly holds no transport artifact (a cheap pre-check)."""
    return _MAYBE.search(text) is not None


def scrub(text: str, codec: ClawDense | None = None) -> tuple[str, int]:
    """Scrub a complete text: ``(clean text, artifacts removed)``."""
    if not may_contain_artifacts(text):
        return text, 0
    s = OutboundScrubber(codec)
    out = s.feed(text) + s.flush()
    return out, s.stripped


def scrub_chunks(chunks: Iterable[str], codec: ClawDense | None = None) -> str:
    """Scrub a stream given as chunks (what a user would see, concatenated)."""
    s = OutboundScrubber(codec)
    return "".join(s.feed(c) for c in chunks) + s.flush()
