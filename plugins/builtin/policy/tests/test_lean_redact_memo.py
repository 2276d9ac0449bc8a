"""Stored-text redaction answers a repeated text from a bounded memo (issue 29, goal 5); the memo must never
return a result computed under other secret values, and must not grow without bound. Also the
credential URL with an empty user name (``redis://:pw@host``), which the patterns missed."""

from __future__ import annotations

import importlib

import pytest

from clawkit.secrets import FORMAT
from clawkit_policy import redact, redact_text

MARK = "[REDACTED]"
redact_mod = importlib.import_module("clawkit_policy.redact")


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("LEAN_MEMO_TOKEN", raising=False)
    redact_mod.refresh()
    yield
    redact_mod.refresh()


def test_a_repeated_text_is_answered_from_the_memo_and_still_redacted():
    text = "the key is sk-proj-ABCDEFGHIJKLMNOPQRSTUV0123 and more"
    first = redact_text(text)
    assert "sk-proj-" not in first and MARK in first
    pattern, memo = redact_mod._memo
    assert text not in memo  # a text holding a secret is never kept: scanned again every time
    assert pattern is redact_mod._patterns(redact_mod.secret_values(()))[0]
    again = redact_text("".join(["the key is sk-proj-ABCDEFGHIJKLMNOPQRSTUV0123", " and more"]))  # an equal, new str
    assert again == first
    clean = "an ordinary reply with nothing secret"
    assert redact_text(clean) is clean and memo[clean] is None
    assert redact_text("".join(["an ordinary reply", " with nothing secret"])) == clean
    copy = "".join(["an ordinary reply", " with nothing secret"])
    assert redact_text(copy) is copy  # clean: the caller's own object back


def test_changing_the_secret_values_invalidates_the_memo(monkeypatch):
    text = "deploy with swordfish-0123456789 now"
    assert redact_text(text) is text  # not a secret yet
    assert redact_mod._memo[1].get(text, "absent") is None
    monkeypatch.setenv("LEAN_MEMO_TOKEN", "swordfish-0123456789")
    redact_mod.refresh()  # what the 5-second environment refresh does
    out = redact_text(text)
    assert out == f"deploy with {MARK} now"  # not the memo's stale "clean"
    assert text not in redact_mod._memo[1]
    monkeypatch.delenv("LEAN_MEMO_TOKEN")
    redact_mod.refresh()
    assert redact_text(text) is text  # the secret is gone from the environment: the text is clean again


def test_the_memo_is_bounded_and_skips_long_texts(monkeypatch):
    monkeypatch.setattr(redact_mod, "MEMO_SIZE", 16)
    # whatever earlier tests (and their background threads) left in this process's memo counts too:
    # it is trimmed to the bound on the next insertion
    for i in range(100):
        redact_text(f"message number {i} with nothing secret")
    memo = redact_mod._memo[1]
    assert len(memo) <= 17 and "message number 99 with nothing secret" in memo
    assert "message number 0 with nothing secret" not in memo
    long = "x" * (redact_mod.MEMO_MAX_LEN + 1)
    redact_text(long)
    assert long not in redact_mod._memo[1]


@pytest.mark.parametrize("url,secret", [
    ("redis://:hunter22@cache:6379", "hunter22"),
    ("postgres://:pw123456@host/db", "pw123456"),
    ("rediss://:s3cr3t-pass@cache.example.com:6380/1", "s3cr3t-pass"),
    ("mysql://root:toor9876@db:3306", "toor9876"),
])
def test_credential_urls_with_or_without_a_user_name_are_redacted(url, secret):
    for text in (url, f"connect with {url} please", f'{{"url": "{url}"}}'):
        assert secret not in redact_text(text), text
    assert secret not in str(redact({"config": {"cache": url}}))
    assert redact_mod.may_hold_secrets(f'{{"c": "{url}"}}')
    assert FORMAT.search(url)  # the kernel's own recognition of a secret value (environment, `run --json`)


def test_an_empty_password_leaves_the_url_alone():
    for text in ("amqp://user:@host/vhost", "http://example.com:8080/path", "see https://docs.example.com/a:b@c"):
        assert redact_text(text) == text, text


def test_forgetting_a_session_empties_the_memo(tmp_path):
    """docs/forget.md: the texts redaction found clean may be a deleted conversation's; policy's
    forget_sessions drops them with the rest of what the process holds about it."""
    import clawkit_policy
    from clawkit.sessions import SessionStore

    text = "a perfectly ordinary sentence from a conversation that will be deleted"
    assert redact_text(text) is text
    assert text in redact_mod._memo[1]
    store = SessionStore(tmp_path / "state.db")
    try:
        clawkit_policy.forget_sessions(store=store, session_ids=["ses_x"])
    finally:
        store.close()
    assert text not in redact_mod._memo[1] and redact_mod._last_clean == (None, None)
