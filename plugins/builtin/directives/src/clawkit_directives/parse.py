"""Finding directives (``/think high``, ``/verbose``, ``/elevated on``, ``/status``) in a message.

A directive is a known name after a ``/`` that starts a word (so ``/usr/bin`` or
``a/think`` are text), optionally followed by one of its values. Text inside
backtick code spans and fenced blocks is never parsed, nor text a terminal marked as
pasted (``skip``: the pasted pieces, found in the text). Unknown names and invalid values are left
as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

VALUES: dict[str, tuple[str, ...]] = {
    "think": ("off", "minimal", "low", "medium", "high"),
    "verbose": ("off", "on", "full"),
    "elevated": ("off", "on"),
    "status": (),
}
DEFAULTS = {"think": "medium", "verbose": "on", "elevated": "on"}
ALIASES = {"reasoning": "think", "v": "verbose"}

_NAME = re.compile(r"(?<![\w/])/(" + "|".join(list(VALUES) + list(ALIASES)) + r")(?![\w/\-]|\.\w|:\S*/)", re.IGNORECASE)
_ARG = re.compile(r"(?:[ \t]*:[ \t]*|[ \t]+)([A-Za-z]+)\b")
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)


@dataclass
class Parsed:
    """The message without its directives, and the directives in order as (name, value)."""

    text: str
    directives: list[tuple[str, str]] = field(default_factory=list)

    @property
    def only_directives(self) -> bool:
        return bool(self.directives) and not self.text.strip()


def _spans(text: str, pieces: list[str] | tuple[str, ...]) -> list[tuple[int, int]]:
    """Where each of ``pieces`` sits in ``text``; a piece not found makes all of ``text`` skipped (fail closed)."""
    out, pos = [], 0
    for piece in pieces:
        if not isinstance(piece, str) or not piece:
            continue
        at = text.find(piece, pos)
        if at < 0:
            at = text.find(piece)
        if at < 0:
            return [(0, len(text))]
        out.append((at, at + len(piece)))
        pos = at + len(piece)
    return out


def parse(text: str, skip: list[str] | tuple[str, ...] = ()) -> Parsed:
    """``skip``: pieces of ``text`` that are never parsed (what a person pasted into a terminal)."""
    if "/" not in text:  # most messages: no directive can be in them
        return Parsed(text)
    code = [m.span() for m in _CODE.finditer(text)] + _spans(text, skip)
    found: list[tuple[str, str]] = []
    cuts: list[tuple[int, int]] = []
    for m in _NAME.finditer(text):
        if any(a <= m.start() < b for a, b in code):
            continue
        name = m.group(1).lower()
        name = ALIASES.get(name, name)
        end = m.end()
        value = DEFAULTS.get(name, "")
        arg = _ARG.match(text, end)
        if arg and arg.group(1).lower() in VALUES[name]:
            value = arg.group(1).lower()
            end = arg.end()
        found.append((name, value))
        cuts.append((m.start(), end))
    if not cuts:
        return Parsed(text)
    pieces, pos = [], 0
    for start, end in cuts:
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    joined = pieces[0]
    for piece in pieces[1:]:
        if joined.endswith((" ", "\t")) and piece.startswith((" ", "\t")):
            piece = piece.lstrip(" \t")  # "please /think high do it" -> "please do it"
        joined += piece
    return Parsed(joined.strip(), found)
