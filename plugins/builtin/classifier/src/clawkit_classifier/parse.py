"""Turning a classifier model's answer into a :class:`SessionClassification`, or None.

Small models wrap JSON in prose or code fences, leave it unterminated, or drift
from the vocabulary. ``json_repair`` recovers the object; pydantic then validates
it, repairing what has an obvious fix (case, a topic outside the list becomes
``other``, synonyms of the complexity levels, a string where a list belongs,
too many tags, a label over 79 characters). What stays invalid is rejected.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import json_repair
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from clawkit.types import SessionClassification

TOPICS = ("coding", "research", "ops", "conversation", "creative", "debugging", "config", "other")
COMPLEXITIES = ("trivial", "simple", "moderate", "hard", "complex")
_COMPLEXITY_SYNONYMS = {"easy": "simple", "basic": "simple", "medium": "moderate", "intermediate": "moderate",
                        "difficult": "hard", "very hard": "complex", "advanced": "hard"}
MAX_INPUT_CHARS = 20_000
_TAG = re.compile(r"[^a-z0-9+#./_-]+")


def _tags(value: Any, limit: int) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [v for v in re.split(r"[,;]", value)]
    if not isinstance(value, (list, tuple)):
        raise ValueError("expected a list of short tags")
    out: list[str] = []
    for item in value:
        if not isinstance(item, (str, int, float)):
            continue
        tag = _TAG.sub("-", str(item).strip().lower()).strip("-")[:32]
        if tag and tag not in out:
            out.append(tag)
    return out[:limit]


class ClassifierOutput(BaseModel):
    """The JSON a classifier model must produce (after repair)."""

    model_config = ConfigDict(extra="ignore")

    label: str = Field("", max_length=79)
    topic: Literal[TOPICS]  # type: ignore[valid-type]
    complexity: Literal[COMPLEXITIES]  # type: ignore[valid-type]
    domain: list[str] = Field(default_factory=list, max_length=3)
    flags: list[str] = Field(default_factory=list, max_length=2)

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, v: Any) -> str:
        text = " ".join(str(v or "").split())
        return text if len(text) <= 79 else text[:78].rstrip() + "…"

    @field_validator("topic", mode="before")
    @classmethod
    def _topic(cls, v: Any) -> str:
        if not isinstance(v, str) or not v.strip():
            raise ValueError("topic is missing")
        v = v.strip().lower()
        return v if v in TOPICS else "other"

    @field_validator("complexity", mode="before")
    @classmethod
    def _complexity(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip().lower()
            return _COMPLEXITY_SYNONYMS.get(v, v)
        return v

    @field_validator("domain", mode="before")
    @classmethod
    def _domain(cls, v: Any) -> list[str]:
        return _tags(v, 3)

    @field_validator("flags", mode="before")
    @classmethod
    def _flags(cls, v: Any) -> list[str]:
        return _tags(v, 2)


def parse_classification(text: str | None) -> tuple[SessionClassification | None, str]:
    """``(classification, "")`` or ``(None, why it was rejected)``; never raises."""
    if not text or not text.strip():
        return None, "empty answer"
    try:
        data = json_repair.loads(text[:MAX_INPUT_CHARS])
    except Exception as exc:  # json_repair is lenient, but a crash here must not reach the turn
        return None, f"unreadable JSON: {exc}"
    if isinstance(data, list):
        data = next((d for d in data if isinstance(d, dict)), None)
    if not isinstance(data, dict) or not data:
        return None, "no JSON object in the answer"
    try:
        out = ClassifierOutput.model_validate(data)
    except ValidationError as exc:
        why = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors())
        return None, f"invalid classification: {why}"
    return SessionClassification(**out.model_dump()), ""
