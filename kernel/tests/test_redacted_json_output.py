"""``--json`` output goes through the store's structural redactor; one that cannot see into a value (bytes, an
object: a strict redactor raises TypeError) gets the value's JSON form instead of being skipped."""

from __future__ import annotations

from types import SimpleNamespace

from clawkit.commands.core import redacted


def _strict(value):
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    if isinstance(value, str):
        return value.replace("hunter22", "[REDACTED]")
    if value is None or isinstance(value, (int, float, bool)):
        return value
    raise TypeError(type(value).__name__)


def test_a_value_the_redactor_cannot_see_into_is_redacted_in_its_json_form():
    agent = SimpleNamespace(store=SimpleNamespace(redact_value=_strict))
    out = redacted(agent, {"reply": "pw hunter22", "blob": b"hunter22", "n": 3})
    assert out == {"reply": "pw [REDACTED]", "blob": "b'[REDACTED]'", "n": 3}
    assert redacted(agent, {"reply": "hunter22"}) == {"reply": "[REDACTED]"}
