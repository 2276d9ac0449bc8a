"""Secret redaction: one pass over every secret kind, short and long texts alike."""

from __future__ import annotations

import importlib
import json

import pytest

from clawkit_policy import redact, redact_text

MARK = "[REDACTED]"
redact_mod = importlib.import_module("clawkit_policy.redact")

TOKENS = [
    "sk-abcdefghijklmnopqrstuv", "sk-ant-api03-abcdefghijklmnop", "ghp_abcdefghijklmnopqrstuvwx",
    "gho_abcdefghijklmnopqrstuvwx", "github_pat_abcdefghijklmnopqrstuvwx", "glpat-abcdefghijklmnopqrstuv",
    "xoxb-1234567890-abcdef", "AKIAABCDEFGHIJKLMNOP", "ASIAABCDEFGHIJKLMNOP", "AIza" + "a" * 35, "npm_" + "a" * 36,
    "hf_" + "a" * 30, "eyJhbGciOiJIUzI1.eyJzdWIiOiIx.SflKxwRJSMeKKF2QT4fw",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----",
]


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", "acme-live-0123456789")
    monkeypatch.setenv("UNICODE_TOKEN", "tök-ünïcode-987654")
    redact_mod.refresh()
    yield
    redact_mod.refresh()


@pytest.mark.parametrize("pad", [0, 5000], ids=["short", "long"])
@pytest.mark.parametrize("token", TOKENS)
def test_known_formats_are_redacted_in_short_and_long_texts(token, pad):
    filler = "é ordinary text, nothing secret here. " * (pad // 38)
    out = redact_text(f"{filler}before {token} after{filler}")
    assert token not in out and MARK in out
    assert out.startswith(filler + "before ") and out.endswith(" after" + filler)


@pytest.mark.parametrize("pad", [0, 5000], ids=["short", "long"])
def test_env_values_assignments_and_bearer(secret_env, pad):
    filler = "ü" * pad
    text = (f"{filler}x acme-live-0123456789 y tök-ünïcode-987654 z password=hunter22 "
            "Authorization: Bearer abcdefghijklmnop== {\"client_secret\": \"abcdefg\"}" + filler)
    out = redact_text(text)
    for secret in ("acme-live-0123456789", "tök-ünïcode-987654", "hunter22", "abcdefghijklmnop", "abcdefg\""):
        assert secret not in out
    assert "password=" + MARK in out and '"client_secret": "' + MARK in out
    assert out.count(MARK) == 5 and out.startswith(filler + "x ") and out.endswith(filler)


def test_longest_env_value_wins(monkeypatch):
    monkeypatch.setenv("A_TOKEN", "abcdef")
    monkeypatch.setenv("B_TOKEN", "abcdefghij")
    redact_mod.refresh()
    try:
        assert redact_text("v=abcdefghij.") == f"v={MARK}."
        assert redact_text("v=abcdef ") == f"v={MARK} "
    finally:
        redact_mod.refresh()


def test_clean_text_is_returned_unchanged_and_uncopied():
    text = "plain documentation about api design and tokens, 100% clean\n" * 2000
    assert redact_text(text) is text
    assert redact_text("short") == "short" and redact_text("") == ""


def test_no_secret_is_shorter_than_the_length_below_which_texts_are_not_scanned():
    """redact_text skips texts shorter than SHORTEST: every pattern needs at least that many characters."""
    import re._parser as sre_parse

    for pattern in redact_mod.TOKENS + (redact_mod.ASSIGNMENT,):
        assert sre_parse.parse(pattern).getwidth()[0] >= redact_mod.SHORTEST, pattern


def test_an_env_value_as_short_as_allowed_is_redacted_and_shorter_ones_are_not_secrets(monkeypatch):
    monkeypatch.setenv("TINY_TOKEN", "abcdef")
    monkeypatch.setenv("TINIER_TOKEN", "abcde")
    redact_mod.refresh()
    try:
        assert redact_text("abcdef") == MARK and redact_text("abcde") == "abcde"
        assert "abcde" not in redact_mod.secret_values()
    finally:
        redact_mod.refresh()


def test_the_same_clean_string_is_scanned_once_and_a_new_secret_is_still_found(monkeypatch):
    text = "an ordinary tool result, " * 10
    assert redact_text(text) is text and redact_text(text) is text
    monkeypatch.setenv("LATE_TOKEN", "ordinary tool")  # new patterns: the remembered scan no longer counts
    redact_mod.refresh()
    try:
        assert "ordinary tool" not in redact_text(text)
    finally:
        redact_mod.refresh()


def test_lone_surrogates_survive():
    text = "a\udcff " * 20 + "sk-abcdefghijklmnopqrstuv"
    assert redact_text(text) == "a\udcff " * 20 + MARK


def test_structured_values_lose_secret_named_keys():
    out = redact({"api_key": "x", "command": "curl -H 'Authorization: Bearer abcdefghijklmnop'", "n": [1, "ghp_" + "a" * 20]})
    assert out == {"api_key": MARK, "command": f"curl -H 'Authorization: {MARK}'", "n": [1, MARK]}


def _fragments():
    import random

    rng = random.Random(1313)
    parts = ["key", "KEY", "Key", "api_key", "apikey", "secret", "SeCrEt", "token", "TOKENS", "passwd", "password",
             "passphrase", "db_pass", "x_pwd", "a_pw", "bearer", "Bearer ", "auth", "cookie", "credential", "webhook",
             "hooks.slack.com", "ſecret", "\u212aey", "credentıals", "=", ":", "\": \"", "'", " ", "\t", "\v", "\u00a0",
             "\u2003", ",", ";", "\"", "-", "_", "abcd", "é", "ü", "12", "1234", "abcdefghijklmnop", "sk-", "ghp_",
             "github_pat_", "glpat-", "xoxb-", "AKIA", "ASIA", "AIza", "npm_", "hf_", "eyJ", ".", "-----BEGIN RSA PRIVATE KEY-----",
             "-----END RSA PRIVATE KEY-----", "\n", "https://", "u:p@", "postgres://", "/webhooks/", "A" * 16, "a" * 36,
             "acme-live-0123456789", "tök-ünïcode-987654", "://", "@", "/", ":", ":@", "<", "127.0.0.1:8080", "hooks.slack",
             "discord.com/api/webhooks/", "Webhook", ".webhook.office.com/", "/services/", "http://",
             "\\", "\\\"", "\\'", "\\n"]
    for _ in range(4000):
        yield "".join(rng.choice(parts) for _ in range(rng.randint(1, 12)))


def test_the_prefilter_never_hides_what_the_full_pattern_finds(secret_env):
    """_may_match is an over-approximation of the full re2 pattern: False must mean no match."""
    values = redact_mod.secret_values()
    _, big = redact_mod._patterns(values)
    samples = [f"x {t} y" for t in TOKENS] + ["password=hunter22", "Authorization: Bearer abcdefghijklmnop==",
                                                 '{"client_secret": "abcdefg"}', "ſecret=abcd", "\u212aEY: 'abcd'"]
    for text in [*samples, *_fragments()]:
        data = text.encode("utf-8", "surrogatepass")
        if big.search(data) is not None:
            assert redact_mod._may_match(text, values), text


def test_the_screen_never_hides_a_value_redact_would_change(secret_env):
    """may_hold_secrets(canonical JSON) is True whenever redact() changes the value: keys and strings alike."""
    from clawkit_policy.ledger import canonical

    for text in _fragments():
        for value in ({"v": text}, {text: "value1234"}, [text], text):
            if redact(value) != value:
                assert redact_mod.may_hold_secrets(canonical(value)), value


def test_clean_texts_pass_the_prefilter_without_a_regex_pass():
    for text in ('{"model":"fake/bench","usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"cost":null}}',
                 '{"model":"openai/scripted","endpoint":"http://127.0.0.1:41231/v1","started":1795831144.33,"usage":'
                 '{"prompt_tokens":141,"cost":null},"finish_reason":"tool_calls"}', "see https://example.com:8443/a/b?c=d and ftp://host/x",
                 "What is 2 + 3?", '{"tool_calls":[{"id":"call_1","name":"add","arguments":{"a":2,"b":3}}]}'):
        assert not redact_mod._may_match(text, ())


@pytest.mark.parametrize("text", [
    "connect to postgres://app:hunter22@db.internal:5432/x", "http://127.0.0.1:80/ then redis://:pw123456@cache:6379",
    "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX", "https://discord.com/api/webhooks/123/abcDEF_-",
    "https://acme.webhook.office.com/webhookb2/abc", "https://ci.example.com/hooks/webhooks/abcdefghijklmnopqrst",
])
def test_a_url_is_screened_by_its_credentials_not_by_its_scheme(text):
    """A URL without a password or a webhook path passes the prefilter (no re2 pass, see _url_may_match);
    one with either still reaches the full pattern, and is redacted."""
    assert redact_mod._may_match(text, ())
    assert redact_text(text) != text
    assert not redact_mod._may_match("GET http://127.0.0.1:8080/v1/models and https://example.com/a:b/c@d", ())


def _old_redact(value):
    """redact() as it was (a full copy every time): the reference the identity-keeping walk must equal."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: (MARK if isinstance(k, str) and redact_mod._KEY_NAME.match(k) and v not in (None, "", [], {})
                    else _old_redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_old_redact(v) for v in value]
    return value


def test_redact_keeps_what_it_does_not_change_and_matches_a_full_copy(secret_env):
    """redact() returns the very value (no copy) when nothing in it is secret, and otherwise the same result as
    a walk that copies everything: key names are judged from a memo, scalars are never copied."""
    usage = {"prompt_tokens": 1370, "completion_tokens": 3, "cache_read_tokens": 0, "cost": None, "estimated": False}
    clean = {"model": "openai/x", "usage": usage, "tools": ["ping", "read"], "pair": ("a", 1), "n": 2.5}
    assert redact(clean) is clean
    for text in _fragments():
        for value in ({"v": text, "keep": [1, "plain words"]}, {text: "value1234", "token": 5, "x": (text,)},
                      [text, {"api_key": 0, "ok": None}], {"nested": {"password": text, "list": [text]}}):
            out = redact(value)
            assert json.dumps(out) == json.dumps(_old_redact(value)), value  # (a tuple kept as such is the same JSON)
            assert (out is value) == (json.dumps(out) == json.dumps(value)), value


def test_a_token_count_is_an_assignment_in_plain_text_only_from_four_characters():
    """The ASCII fast path of the prefilter asks the regex for four value characters at once: what the full
    pattern redacts in plain text (a 4-digit value after a token-named key) still reaches it."""
    assert redact_mod._may_match('"usage":{"prompt_tokens":1370,"x":1}', ())
    assert redact_text('"prompt_tokens":1370,') == '"prompt_tokens":' + MARK + ","
    assert not redact_mod._may_match('"usage":{"prompt_tokens":137,"total_tokens":140,"cost":null}', ())
    assert redact_mod._may_match("password: ab€ é", ())  # non-ASCII: three characters of five bytes still go to re2


def test_an_assignment_quoted_inside_a_json_string_is_redacted_where_it_is_stored(tmp_path):
    """``password="hunter22"`` inside a string of an event's data (or ``{"token": "…"}`` inside a tool call's raw
    arguments) shows up JSON-escaped in the stored text: ``password=\\"hunter22\\"``. The assignment pattern takes
    an escaped quote where it takes a quote, so the store's one pass over the JSON text finds it and the value is
    redacted value by value (it was stored as is)."""
    from clawkit.sessions import SessionStore

    store = SessionStore(tmp_path / "s.db")
    store.redact, store.redact_value = redact_text, redact
    sid = store.create("a")
    store.event(sid, None, "x.test", {"note": 'password="hunter22y"', "raw": json.dumps({"token": "abcdefgh12"})}, 1.0)
    store.flush()
    (data,) = store.conn.execute("SELECT data FROM events").fetchone()
    assert "hunter22y" not in data and "abcdefgh12" not in data
    assert json.loads(data) == {"note": f'password="{MARK}"', "raw": json.dumps({"token": MARK})}
    assert redact_text('{"note":"password=\\"hunter22y\\""}') != '{"note":"password=\\"hunter22y\\""}'
    store.close()


def test_event_data_is_redacted_value_by_value_and_what_the_walk_cannot_see_into_by_its_text(tmp_path, secret_env):
    """The store redacts an event's data before dumping it (``redact_value``, as the policy installs it: strict):
    strings by pattern, secret-named keys whole, numbers never scanned (a 4-digit token count stays). Data the walk
    cannot see into (bytes, a set, a path) makes the strict walk raise, and the dumped text is scanned instead:
    nothing in it is stored in the clear."""
    from pathlib import PurePosixPath

    from clawkit.sessions import SessionStore

    store = SessionStore(tmp_path / "s.db")
    store.redact, store.redact_value = redact_text, lambda value: redact(value, strict=True)
    sid = store.create("a")
    plain = {"usage": {"prompt_tokens": 1370, "total_tokens": 1400}, "endpoint": "http://127.0.0.1:1/v1",
             "password": "abc", "note": "key is acme-live-0123456789", "calls": [{"args": "Bearer abcdefghijklmnop"}]}
    store.event(sid, None, "x.plain", plain, 1.0)
    odd = {"blob": b"acme-live-0123456789", "tags": {"acme-live-0123456789"},
           "path": PurePosixPath("/tmp/acme-live-0123456789")}
    store.event(sid, None, "x.odd", odd, 2.0)
    store.flush()
    rows = dict(store.conn.execute("SELECT type, data FROM events").fetchall())
    assert json.loads(rows["x.plain"]) == {"usage": {"prompt_tokens": 1370, "total_tokens": 1400},
                                           "endpoint": "http://127.0.0.1:1/v1", "password": MARK,
                                           "note": f"key is {MARK}", "calls": [{"args": MARK}]}
    assert "acme-live" not in rows["x.odd"] and set(json.loads(rows["x.odd"])) == {"blob", "tags", "path"}
    with pytest.raises(TypeError):
        redact({"blob": b"x"}, strict=True)
    assert redact({"blob": b"x"}) == {"blob": b"x"}  # (not strict: left as it is)
    store.close()


@pytest.mark.parametrize("name,secret", [
    ("accessToken", True), ("githubToken", True), ("userPassword", True), ("sessionCookie", True),
    ("awsAccessKey", True), ("openaiAPIKey", True), ("clientCredentials", True), ("refreshToken_v2", True),
    ("primaryKey", False), ("sortKey", False), ("useAuth", False), ("tokenCount", False), ("maxTokens", False),
    ("promptTokens", False), ("secretName", False), ("accessTokenExpiry", False),
])
def test_a_camel_case_key_naming_a_secret_loses_its_value(name, secret):
    """camelCase names (JavaScript APIs, MCP servers' arguments) end in the same words as snake_case ones: the
    value of ``accessToken`` is blanked like ``access_token``'s; a name that only contains such a word as a
    prefix or a plural (``tokenCount``, ``maxTokens``), or ends in a bare ``Key``/``Auth``, keeps its value."""
    out = redact({name: "abc", "n": 1})
    assert out == ({name: MARK, "n": 1} if secret else {name: "abc", "n": 1})
    assert redact_mod.may_hold_secrets(json.dumps({name: "abc"})) or not secret  # the screen sees it too
