"""Where to cut an over-budget text: a head, and a tail when the end carries the signal.

Cost is bounded by the budget, not the text: only ``budget * MAX_CHARS_PER_TOKEN``
characters at each end are ever tokenized; the size of the removed middle is
estimated from the density of the head.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clawkit.tokens import CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN, TokenCounter

SIGNAL_WINDOW = 4000  # chars at the end searched for errors, summaries, closing braces
_SIGNAL = re.compile(
    r"Traceback \(most recent call last\)|\b(?:error|errors|exception|fatal|panic(?:ked)?|failed|failure|"
    r"segmentation fault|aborted|denied)\b|exit (?:code|status)|\b\d+ (?:passed|failed|errors?|warnings?|tests?)\b|"
    r"^\s*(?:total|summary|result|done|finished|ok)\b",
    re.IGNORECASE | re.MULTILINE,
)


def tail_has_signal(text: str) -> bool:
    """Does the end of ``text`` carry what matters: an error, a traceback, a summary, a closing brace?"""
    end = text[-SIGNAL_WINDOW:]
    stripped = end.rstrip()
    if stripped.endswith(("}", "]")) and text.lstrip()[:1] in ("{", "["):
        return True
    return _SIGNAL.search(end) is not None


@dataclass
class CutPlan:
    """``text[:head_end]`` and ``text[tail_start:]`` are kept; token figures may be estimates."""

    head_end: int
    tail_start: int
    total_chars: int
    kept_tokens: int
    total_tokens: int
    exact: bool
    note: str = ""

    @property
    def removed_tokens(self) -> int:
        return max(0, self.total_tokens - self.kept_tokens)

    @property
    def removed_chars(self) -> int:
        return self.tail_start - self.head_end


def _line_floor(text: str, pos: int, lo: int) -> int:
    """Move a head cut back to just after a newline, if one is near."""
    slack = min(2000, max(80, (pos - lo) // 5))
    nl = text.rfind("\n", max(lo, pos - slack), pos)
    return nl + 1 if nl > lo else pos


def _line_ceil(text: str, pos: int, hi: int) -> int:
    """Move a tail cut forward to the start of a line, if one is near."""
    slack = min(2000, max(80, (hi - pos) // 5))
    nl = text.find("\n", pos, min(hi, pos + slack))
    return nl + 1 if nl != -1 and nl + 1 < hi else pos


def _head(text: str, tokens: int, counter: TokenCounter) -> tuple[int, int, int, int] | None:
    """(chars kept, tokens kept, chars sampled, tokens in the sample) or None if the tokenizer failed."""
    sample = text[: tokens * MAX_CHARS_PER_TOKEN]
    ids = counter.encode(sample)
    if ids is None:
        return None
    if len(ids) <= tokens:
        return len(sample), len(ids), len(sample), len(ids)
    kept = counter.decode(ids[:tokens])
    if not sample.startswith(kept):
        return None
    return len(kept), tokens, len(sample), len(ids)


def _tail(text: str, tokens: int, counter: TokenCounter) -> tuple[int, int] | None:
    """(chars kept from the end, tokens kept) or None if the tokenizer failed."""
    if tokens <= 0:
        return 0, 0
    sample = text[-tokens * MAX_CHARS_PER_TOKEN :]
    ids = counter.encode(sample)
    if ids is None:
        return None
    if len(ids) <= tokens:
        return len(sample), len(ids)
    kept = counter.decode(ids[-tokens:]).lstrip("\ufffd")
    if not sample.endswith(kept):
        return None
    return len(kept), tokens


def plan_cut(text: str, budget: int, counter: TokenCounter, *, keep_tail: str = "auto", tail_share: float = 0.3,
             marker_tokens: int = 160) -> CutPlan | None:
    """None when ``text`` fits ``budget`` tokens; else where to cut it.

    ``keep_tail``: ``auto`` keeps a tail only when :func:`tail_has_signal`, ``always``
    or ``never``. Raises nothing the caller should not expect: a tokenizer failure
    falls back to a character budget and says so in ``note``.
    """
    n = len(text)
    if n * 4 <= budget:  # no char is more than four byte-level tokens
        return None
    if n <= budget * MAX_CHARS_PER_TOKEN and counter.exact:
        ids = counter.encode(text)
        if ids is not None and len(ids) <= budget:
            return None
    room = max(16, budget - marker_tokens)
    want_tail = keep_tail == "always" or (keep_tail == "auto" and tail_has_signal(text))
    tail_tokens = int(room * tail_share) if want_tail else 0
    head_tokens = room - tail_tokens
    head = _head(text, head_tokens, counter) if counter.exact else None
    tail = _tail(text, tail_tokens, counter) if counter.exact and head is not None else None
    if head is None or tail is None:
        return char_plan(text, budget, tail_tokens / room if room else 0.0, note=_why(counter))
    head_chars, head_kept, sample_chars, sample_tokens = head
    tail_chars, tail_kept = tail
    if head_chars + tail_chars >= n:  # it fits after all (dense text near the estimate's edge)
        return None
    head_end = _line_floor(text, head_chars, 0)
    tail_start = _line_ceil(text, n - tail_chars, n) if tail_chars else n
    density = sample_chars / max(1, sample_tokens)
    middle = tail_start - head_end
    exact_total = sample_chars >= n
    total = sample_tokens if exact_total else head_kept + tail_kept + round(middle / density)
    return CutPlan(head_end, tail_start, n, head_kept + tail_kept, total, exact=exact_total)


def _why(counter: TokenCounter) -> str:
    if not counter.exact:
        return f"token counts estimated from characters: no tokenizer ({counter.reason or 'unavailable'})"
    return "token counts estimated from characters: the tokenizer failed on this text"


def char_plan(text: str, budget: int, tail_share: float = 0.0, *, note: str = "") -> CutPlan | None:
    """The fallback: a budget of ``CHARS_PER_TOKEN`` characters per token, no tokenizer needed."""
    n = len(text)
    limit = int(max(16, budget - 160) * CHARS_PER_TOKEN)
    if n <= limit:
        return None
    tail_chars = int(limit * tail_share)
    head_end = _line_floor(text, limit - tail_chars, 0)
    tail_start = _line_ceil(text, n - tail_chars, n) if tail_chars else n
    kept = head_end + (n - tail_start)
    return CutPlan(head_end, tail_start, n, int(kept / CHARS_PER_TOKEN), int(n / CHARS_PER_TOKEN), exact=False,
                   note=note or "token counts estimated from characters")
