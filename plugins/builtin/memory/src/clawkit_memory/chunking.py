"""Chunking that follows the document: Markdown headings first, then token windows.

Every chunk keeps its line range (1-based, inclusive) for ``path#L3-9`` citations.
Token counts are approximate (words and punctuation marks, which tracks BPE/WordPiece
counts of English prose closely) so chunking needs no tokenizer download.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterable, Iterator

_TOKEN = re.compile(r"\w+|[^\w\s]")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def count_tokens(text: str) -> int:
    """Approximate token count: words and punctuation marks."""
    return len(_TOKEN.findall(text))


@dataclass
class Chunk:
    text: str
    start_line: int
    end_line: int
    heading: str = ""

    def embed_text(self) -> str:
        """What gets embedded: the heading path gives a section its context."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


def _sections(lines: list[str]) -> Iterator[tuple[str, int, list[str]]]:
    """(heading path, first line number, lines) for each heading-delimited section."""
    stack: list[tuple[int, str]] = []
    start, body = 1, []
    in_fence = False
    for no, line in enumerate(lines, 1):
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            if body:
                yield " > ".join(t for _, t in stack), start, body
            level = len(m.group(1))
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, m.group(2))]
            start, body = no, [line]
        else:
            body.append(line)
    if body:
        yield " > ".join(t for _, t in stack), start, body


def _windows(lines: list[str], first: int, max_tokens: int, overlap: int) -> Iterator[tuple[int, int, str]]:
    """Split lines into windows of about ``max_tokens`` with ``overlap`` tokens shared."""
    units: list[tuple[int, str, int]] = []  # (line number, text, tokens); long lines cut into pieces
    for no, line in enumerate(lines, first):
        toks = count_tokens(line)
        if toks <= max_tokens:
            units.append((no, line, toks))
            continue
        words = line.split(" ")
        piece: list[str] = []
        for w in words:
            piece.append(w)
            if count_tokens(" ".join(piece)) >= max_tokens // 2:
                units.append((no, " ".join(piece), count_tokens(" ".join(piece))))
                piece = []
        if piece:
            units.append((no, " ".join(piece), count_tokens(" ".join(piece))))
    i = 0
    while i < len(units):
        j, total = i, 0
        while j < len(units) and (total + units[j][2] <= max_tokens or j == i):
            total += units[j][2]
            j += 1
        yield units[i][0], units[j - 1][0], "\n".join(u[1] for u in units[i:j])
        if j >= len(units):
            return
        # step back so the next window repeats about ``overlap`` tokens (whole lines) of this one
        k, back = j, 0
        while k - 1 > i and back < overlap:
            k -= 1
            back += units[k][2]
        i = k


def chunk_markdown(text: str, max_tokens: int = 400, overlap: int = 80) -> list[Chunk]:
    """Heading-aware chunks of a Markdown document; empty sections are skipped."""
    lines = text.splitlines()
    out: list[Chunk] = []
    for heading, start, body in _sections(lines):
        content = [ln for ln in body if ln.strip()]
        if not content or all(_HEADING.match(ln) for ln in content):
            continue  # a heading directly followed by a sub-heading: its title lives on in the path
        # trim blank lines at both ends so line ranges point at text
        lo, hi = 0, len(body)
        while lo < hi and not body[lo].strip():
            lo += 1
        while hi > lo and not body[hi - 1].strip():
            hi -= 1
        body, start = body[lo:hi], start + lo
        for a, b, chunk_text in _windows(body, start, max_tokens, min(overlap, max_tokens // 2)):
            out.append(Chunk(chunk_text, a, b, heading))
    return out


# --- episodes: finished turns of past sessions ---------------------------------------------


@dataclass
class Turn:
    first_id: int
    last_id: int
    created: float
    text: str


def finished_turns(rows: Iterable[tuple[int, str, str, str | None, float]]) -> list[Turn]:
    """Group ``(id, role, content, data, created)`` message rows into finished turns.

    A turn is a user message and the assistant messages after it; it is finished when
    its last assistant message has text and asks for no tool call. Tool traffic and
    kernel notes are left out: the episode is what was said.
    """
    turns: list[Turn] = []
    cur: list[tuple[int, str, str, float]] = []
    done = False

    def flush() -> None:
        if cur and done:
            text = "\n".join(f"{'User' if r == 'user' else 'Assistant'}: {c.strip()}" for _, r, c, _ in cur if c.strip())
            turns.append(Turn(cur[0][0], cur[-1][0], cur[0][3], text))

    for mid, role, content, data, created in rows:
        meta = json.loads(data) if data else {}
        if role == "user" and not (meta.get("metadata") or {}).get("kernel_note"):
            flush()
            cur, done = [(mid, role, content, created)], False
        elif role == "assistant" and cur:
            cur.append((mid, role, content, created))
            done = bool(content.strip()) and not meta.get("tool_calls")
    flush()
    return turns


def chunk_turn(turn: Turn, max_tokens: int = 400, overlap: int = 80) -> list[Chunk]:
    """An episode's chunks; line numbers are the turn's message ids."""
    pieces = list(_windows(turn.text.splitlines(), 1, max_tokens, min(overlap, max_tokens // 2)))
    return [Chunk(t, turn.first_id, turn.last_id, "") for _, _, t in pieces]
