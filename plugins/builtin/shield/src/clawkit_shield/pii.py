"""Personal data in tool traffic, for skills whose manifest asks ``pii_scan: true``.

A permission item with ``pii_scan: true`` (``- capability: net.http … pii_scan: true``)
makes the shield scan the values of every call under that capability while the skill
is active: a call whose arguments carry personal data is refused (the data would
leave through the tool), and personal data in its result is replaced by
``[redacted <kind>]`` before the model sees it. Events name kinds and counts, never
values.

Detectors are deliberately narrow, each checked beyond its shape so that ids and
hashes are not taken for personal data: e-mail addresses; payment-card numbers
(13–19 digits, Luhn check); IBANs (ISO 13616 mod-97 check); US social-security
numbers (area/group/serial rules); phone numbers written as phone numbers (a leading
``+`` with 8–15 digits, or a ``(NNN) NNN-NNNN`` / ``NNN-NNN-NNNN`` grouping). Names
and street addresses are not detected: that needs a language model or a gazetteer,
which this layer does not load (documented in docs/plugins/shield.md).

Hand-written rather than a library: the candidates (Microsoft Presidio, scrubadub)
pull in spaCy models or NLTK data that cannot be downloaded offline, for detectors
that are a few regular expressions plus checksums here.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

MAX_SCAN = 1_000_000  # characters scanned per value: bounded time on huge results

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}(?![\w-])")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?(?![A-Za-z0-9])")
_SSN = re.compile(r"(?<![\d-])(\d{3})-(\d{2})-(\d{4})(?![\d-])")
_PHONE = re.compile(r"(?<![\w+])(?:\+\d[\d ()./-]{7,20}\d|\(\d{3}\) ?\d{3}-\d{4}|\d{3}-\d{3}-\d{4})(?![\w-])")


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _iban_ok(text: str) -> bool:
    s = text.replace(" ", "")
    if not 15 <= len(s) <= 34:
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _ssn_ok(m: re.Match) -> bool:
    area, group, serial = m.group(1), m.group(2), m.group(3)
    return area not in ("000", "666") and not area.startswith("9") and group != "00" and serial != "0000"


def _phone_ok(text: str) -> bool:
    digits = sum(c.isdigit() for c in text)
    return 8 <= digits <= 15 if text.startswith("+") else digits == 10


def find(text: str) -> list[Finding]:
    """Personal data in ``text`` (at most :data:`MAX_SCAN` characters read), non-overlapping, in order."""
    text = text[:MAX_SCAN]
    found: list[Finding] = []
    for m in _EMAIL.finditer(text):
        found.append(Finding("email", m.start(), m.end()))
    for m in _IBAN.finditer(text):
        if _iban_ok(m.group()):
            found.append(Finding("iban", m.start(), m.end()))
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and _luhn(digits) and len(set(digits)) > 1:
            found.append(Finding("card", m.start(), m.end()))
    for m in _SSN.finditer(text):
        if _ssn_ok(m):
            found.append(Finding("ssn", m.start(), m.end()))
    for m in _PHONE.finditer(text):
        if _phone_ok(m.group()):
            found.append(Finding("phone", m.start(), m.end()))
    found.sort(key=lambda f: (f.start, -(f.end - f.start)))
    kept: list[Finding] = []
    for f in found:  # the first (longest) finding at a place wins: a card is not also a phone
        if not kept or f.start >= kept[-1].end:
            kept.append(f)
    return kept


def kinds(findings: list[Finding]) -> dict[str, int]:
    return dict(Counter(f.kind for f in findings))


def redact(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with each finding replaced by ``[redacted <kind>]``, and the counts by kind."""
    findings = find(text)
    if not findings:
        return text, {}
    out, at = [], 0
    for f in findings:
        out.append(text[at:f.start])
        out.append(f"[redacted {f.kind}]")
        at = f.end
    out.append(text[at:])
    return "".join(out), kinds(findings)


def values(arguments: object) -> list[str]:
    """Every string (and number) inside a call's arguments, flattened without recursion."""
    out: list[str] = []
    stack = [arguments]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str):
            out.append(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            out.append(str(item))
    return out
