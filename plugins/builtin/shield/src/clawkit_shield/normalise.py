"""Text as a model would read it, before the injection scanner looks at it.

Evasions that leave the meaning intact for a model but break a pattern match:

* invisible and formatting characters inside words (zero-width spaces and joiners,
  soft hyphens, bidi controls, variation selectors, Unicode tags) — removed;
* compatibility forms (fullwidth, mathematical alphabets, circled letters) — NFKC;
* combining marks piled onto letters ("zalgo", accents) — removed;
* look-alike letters from other scripts (Cyrillic ``а``, Greek ``ο``) — folded to the
  Latin letter they imitate, using the Unicode confusables table
  (``confusable-homoglyphs``, Unicode TR39 data);
* encodings (base64, hex, percent-encoding, HTML entities) — long runs that decode to
  readable text are decoded and scanned too (:func:`decoded_payloads`).
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
from functools import lru_cache
from urllib.parse import unquote

_DROP_CATEGORIES = frozenset({"Cf", "Mn", "Me", "Cc"})
_KEEP_CONTROLS = frozenset("\n\t\r")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){8,}")
_PERCENT = re.compile(r"(?:%[0-9a-fA-F]{2}){3,}")
MAX_PAYLOADS = 32
_ODD = re.compile(r"[^\x20-\x7e\n\t\r]")  # only these characters are looked at one by one


def _drop(m: "re.Match[str]") -> str:
    c = m.group()
    return "" if unicodedata.category(c) in _DROP_CATEGORIES else c
MAX_DEPTH = 2


@lru_cache(maxsize=1)
def _fold_table() -> dict[int, str]:
    """Non-ASCII character -> the ASCII letter or digit it imitates (from Unicode's confusables)."""
    try:
        from confusable_homoglyphs.confusables import confusables_data
    except ImportError:  # pragma: no cover - a dependency; NFKC still handles compatibility forms
        return {}
    table: dict[int, str] = {}
    for char, glyphs in confusables_data.items():
        if len(char) != 1 or ord(char) < 128:
            continue
        ascii_forms = [g["c"] for g in glyphs if len(g["c"]) == 1 and g["c"].isascii() and g["c"].isalnum()]
        if ascii_forms:
            table[ord(char)] = ascii_forms[0]
    # the table lists pairs in one direction only: upper-case Cyrillic/Greek capitals fold via lower case
    return table


def normalise(text: str) -> str:
    """``text`` with invisible characters and marks removed, compatibility forms and look-alike
    letters folded to ASCII. Pure ASCII text without control characters is returned as is."""
    if text.isascii() and text.isprintable():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    kept = _ODD.sub(_drop, decomposed)
    if kept.isascii():
        return kept
    folded = kept.translate(_fold_table())
    return unicodedata.normalize("NFC", folded)


def _readable(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text:
        return None
    printable = sum(1 for c in text if c.isprintable() or c in "\n\t\r")
    letters = sum(1 for c in text if c.isalpha() or c == " ")
    if printable / len(text) < 0.95 or letters / len(text) < 0.6:
        return None
    return text


def decoded_payloads(text: str, depth: int = 0) -> list[tuple[int, int, str]]:
    """``(start, end, decoded text)`` for runs in ``text`` that look encoded and decode to
    readable text: base64 (standard and URL-safe), hex, percent-encoding, HTML entities.
    Nested encodings are followed up to :data:`MAX_DEPTH` levels."""
    out: list[tuple[int, int, str]] = []
    for m in _BASE64.finditer(text):
        run = m.group()
        if run.isalpha() or run.isdigit():  # a long word or number, not an encoding
            continue
        padded = run + "=" * (-len(run.rstrip("=")) % 4)
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                got = _readable(decode(padded.encode()))
            except (binascii.Error, ValueError):
                got = None
            if got:
                out.append((m.start(), m.end(), got))
                break
        if len(out) >= MAX_PAYLOADS:
            break
    for m in _HEX.finditer(text):
        got = _readable(bytes.fromhex(m.group()))
        if got:
            out.append((m.start(), m.end(), got))
    if _PERCENT.search(text):
        decoded = unquote(text)
        if decoded != text:
            out.append((0, len(text), decoded))
    if "&#" in text or "&" in text and ";" in text:
        unescaped = html.unescape(text)
        if unescaped != text:
            out.append((0, len(text), unescaped))
    if depth < MAX_DEPTH:
        nested = []
        for start, end, inner in out[:MAX_PAYLOADS]:
            nested.extend((start, end, deeper) for _, _, deeper in decoded_payloads(inner, depth + 1))
        out.extend(nested)
    return out[:MAX_PAYLOADS * 2]
