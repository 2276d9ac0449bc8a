"""Offline token counting, and the pure helpers: retry classification and stream assembly."""

from __future__ import annotations

import email.utils
import subprocess
import sys
import time

from clawkit_litellm import count_tokens, encoding_name_for, truncate_to_tokens
from clawkit.toolargs import parse_arguments
from clawkit.openai_wire import StreamAssembler
from clawkit.retry import parse_retry_after
from clawkit_litellm.errors import classify


def test_counts_offline_with_bundled_encodings():
    code = (
        "import os, socket\n"
        "def deny(*a, **k): raise AssertionError('network used')\n"
        "socket.getaddrinfo = deny; socket.socket.connect = deny\n"
        "os.environ.pop('TIKTOKEN_CACHE_DIR', None); os.environ.pop('CUSTOM_TIKTOKEN_CACHE_DIR', None)\n"
        "from clawkit_litellm import count_tokens\n"
        "print(count_tokens('hello world', 'openai/gpt-4o'), count_tokens('hello world', 'anthropic/claude-3'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "2"]


def test_encoding_choice():
    assert encoding_name_for("openai/gpt-4o-mini") == "o200k_base"
    assert encoding_name_for("gpt-5") == "o200k_base"
    assert encoding_name_for("anthropic/claude-sonnet-4-5") == "cl100k_base"
    assert encoding_name_for(None) == "cl100k_base"


def test_huge_whitespace_run_does_not_crash():
    text = "word " + " " * 1_500_000 + "end"
    n = count_tokens(text, "gpt-4o")  # o200k's regex gives up on ~1M spaces in one piece
    assert 1_000 < n < 1_500_000


def test_long_text_is_estimated_from_a_prefix(monkeypatch):
    from clawkit.tokens import TokenCounter

    text = "the quick brown fox jumps over the lazy dog. " * 200_000  # 9 MB
    encoded: list[int] = []
    encode = TokenCounter.encode
    monkeypatch.setattr(TokenCounter, "encode", lambda self, t: encoded.append(len(t)) or encode(self, t))
    n = count_tokens(text, "gpt-4o", max_exact_chars=200_000)
    assert encoded == [200_000]  # only the prefix is tokenized (the cost does not grow with the text)
    monkeypatch.undo()
    exact_rate = count_tokens(text[:45_000], "gpt-4o") / 45_000
    assert abs(n - exact_rate * len(text)) / n < 0.01


def test_truncate_to_tokens():
    text = "alpha beta gamma delta " * 1000
    cut = truncate_to_tokens(text, 10, "gpt-4o")
    assert text.startswith(cut) and count_tokens(cut, "gpt-4o") <= 10 and len(cut) > 20
    assert truncate_to_tokens("short", 100) == "short"
    assert truncate_to_tokens("anything", 0) == ""


def test_parse_arguments():
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("") == ({}, None)
    assert parse_arguments('"{\\"a\\": 1}"') == ({"a": 1}, None)  # double-encoded
    args, err = parse_arguments("[1, 2]")
    assert args == {} and "JSON object" in err
    args, err = parse_arguments("{oops")
    assert args == {} and "not valid JSON" in err


def test_stream_fragments_without_index_are_grouped_by_id():
    asm = StreamAssembler()
    for frag in (
        {"id": "a", "function": {"name": "f", "arguments": '{"x"'}},
        {"function": {"arguments": ": 1}"}},
        {"id": "b", "function": {"name": "g", "arguments": "{}"}},
    ):
        asm.add({"choices": [{"delta": {"tool_calls": [frag]}}]})
    asm.add({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    resp = asm.response()
    assert [(c.id, c.name, c.arguments) for c in resp.tool_calls] == [("a", "f", {"x": 1}), ("b", "g", {})]
    assert resp.usage.total_tokens == 5


class _StatusError(Exception):
    def __init__(self, status, headers=None, message="boom"):
        super().__init__(message)
        self.status_code = status
        self.litellm_response_headers = headers or {}


def test_classification():
    assert classify(_StatusError(429, {"retry-after": "2"})).retry_after == 2.0
    assert classify(_StatusError(429, {"retry-after-ms": "250"})).retry_after == 0.25
    assert classify(_StatusError(503)).retryable and classify(_StatusError(503)).kind == "http"
    assert (classify(_StatusError(400)).kind, classify(_StatusError(400)).retryable) == ("bad_request", False)
    assert (classify(_StatusError(401)).kind, classify(_StatusError(401)).retryable) == ("auth", False)
    assert (classify(_StatusError(404)).kind, classify(_StatusError(404)).retryable) == ("not_found", False)
    assert classify(_StatusError(408)).retryable and classify(_StatusError(409)).retryable
    overflow = classify(_StatusError(400, message="This model's maximum context length is 8192 tokens"))
    assert overflow.context_overflow and overflow.kind == "context_overflow" and not overflow.retryable
    tpm = classify(_StatusError(429, message="Rate limit on tokens per min; maximum context length"))
    assert tpm.retryable and tpm.kind == "rate_limit" and not tpm.context_overflow
    assert classify(TimeoutError()).kind == "timeout" and classify(TimeoutError()).retryable
    assert classify(ConnectionRefusedError()).kind == "connection" and classify(ConnectionRefusedError()).retryable
    assert (classify(ValueError("bug")).kind, classify(ValueError("bug")).retryable) == ("config", False)


def _wrapped(cause: BaseException, status: int = 500) -> Exception:
    """How litellm reports transport failures: an HTTP-500-looking error whose cause is the real one."""
    try:
        try:
            raise cause
        except BaseException as inner:
            raise _StatusError(status, message="InternalServerError: OpenAIException - Connection error.") from inner
    except _StatusError as outer:
        return outer


def test_transport_causes_win_over_litellms_500():
    import socket
    import ssl

    refused = classify(_wrapped(ConnectionRefusedError(111, "Connect call failed")), endpoint="http://h/v1")
    assert (refused.kind, refused.retryable, refused.status) == ("connection", True, None)
    assert "connection refused" in str(refused) and "http://h/v1" in str(refused) and "HTTP 500" not in str(refused)
    dns = classify(_wrapped(socket.gaierror(socket.EAI_NONAME, "Name or service not known")))
    assert (dns.kind, dns.retryable) == ("dns", False) and "does not resolve" in str(dns)
    assert classify(_wrapped(socket.gaierror(socket.EAI_AGAIN, "Temporary failure"))).retryable
    tls = classify(_wrapped(ssl.SSLCertVerificationError(1, "certificate verify failed")))
    assert (tls.kind, tls.retryable) == ("tls", False)
    missing = classify(_StatusError(500, message="OpenAIException - Missing credentials. Please pass an `api_key`"))
    assert (missing.kind, missing.retryable) == ("auth", False) and "no API key" in str(missing)


def test_retry_after_http_date():
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= parse_retry_after({"retry-after": date}, now=now) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


