"""clawkit.toolargs: what every provider does with a model's argument text."""

from __future__ import annotations

from clawkit.retry import parse_retry_after
from clawkit.toolargs import MAX_ARGUMENT_DEPTH, parse_arguments, tool_call


def test_arguments_are_checked_never_raised():
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("  ") == ({}, None)
    assert parse_arguments('"{\\"a\\": 1}"') == ({"a": 1}, None)  # double-encoded
    assert parse_arguments("[1]")[1] == "arguments must be a JSON object, got list"
    assert parse_arguments("{oops")[1].startswith("arguments are not valid JSON")
    assert parse_arguments('{"n": 1' + "0" * 5000 + "}")[1].startswith("arguments are not usable JSON")
    at_limit = '{"a": ' + "[" * (MAX_ARGUMENT_DEPTH - 1) + "]" * (MAX_ARGUMENT_DEPTH - 1) + "}"
    assert parse_arguments(at_limit)[1] is None
    past = '{"a": ' + "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH + "}"
    assert parse_arguments(past) == ({}, f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels")
    assert parse_arguments("[" * 100_000 + "]" * 100_000)[1]  # past the parser's own stack: an error too


def test_tool_call_keeps_the_raw_text_and_the_error():
    call = tool_call("c1", "read_file", "{bad")
    assert call.id == "c1" and call.name == "read_file" and call.raw_arguments == "{bad" and call.argument_error
    assert tool_call(None, None, None).name == "" and tool_call(None, "x", None).arguments == {}


def test_retry_after_in_every_spelling():
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert 28 <= parse_retry_after({"retry-after": "Thu, 01 Jan 2026 00:00:30 GMT"}, now=1767225600.0) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after(None) is None
