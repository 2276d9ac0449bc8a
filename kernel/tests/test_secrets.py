"""clawkit.secrets: which environment values are secrets (name, format, entropy), the model key,
and the encoded forms worth redacting (issue 30 item 7)."""

from __future__ import annotations

import base64

from clawkit.secrets import is_secret, register_secret, scrub, secret_env_values, variants


def test_secrets_by_name_format_and_entropy():
    secret = {
        "GITHUB_PAT": "abcdefgh12", "X_CREDS": "user:pw12345", "MY_PWD_FILE": "hunter22", "DEPLOY_PASSPHRASE": "a b c d e f",
        "NOTE": "ghp_" + "a1B2c3D4e5" * 3, "OTHER": "AKIAABCDEFGHIJKLMNOP", "JWT": "eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl",
        "RANDOM": "Zk4rT9qLm2Wx7Pv3Bn8Yc6Hd1Js5Gf0", "DB": "postgres://u:secretpw@db/x", "SLACK": "xoxb-1234567890-abcdef",
    }
    plain = {
        "PATH": "/usr/bin:/bin", "PWD": "/work", "OLDPWD": "/tmp", "HOME": "/root", "LANG": "C.UTF-8", "SHLVL": "1",
        "GIT_COMMIT": "a3f9c2" * 6 + "ab12", "INVOCATION_ID": "0123456789abcdef0123456789abcdef",
        "VIRTUAL_ENV": "/work/wt/.venv", "PYTEST_CURRENT_TEST": "tests/x.py::test_a (call)", "EDITOR": "vim",
        "LONG_WORDS": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "VERSION": "1.2.3-rc.4+build.567",
    }
    for name, value in secret.items():
        assert is_secret(name, value), name
    for name, value in plain.items():
        assert not is_secret(name, value), name


def test_registered_model_key_is_a_secret_under_any_name():
    key = "sk-live-registered-model-key-0001"
    register_secret(key)
    assert is_secret("HARMLESS", key)
    assert key in secret_env_values({})


def test_variants_cover_reversed_hex_and_base64_at_every_alignment():
    value = "Zk4rT9qLm2Wx7Pv3Bn8Yc6Hd1Js5Gf0"
    found = variants(value)
    assert value[::-1] in found and value.encode().hex() in found
    for prefix in ("", "a", "ab", "TOKEN=", "x\n"):
        for suffix in ("", "\n", "zz"):
            enc = base64.b64encode((prefix + value + suffix).encode()).decode()
            assert any(v in enc for v in found), (prefix, suffix)
            assert any(v in enc.replace("+", "-").replace("/", "_") for v in found)


def test_scrub_replaces_known_values_in_structures(monkeypatch):
    monkeypatch.setenv("SERVICE_PAT", "pat-Q2w3E4r5T6y7U8i9")
    out = scrub({"reply": "it is pat-Q2w3E4r5T6y7U8i9", "args": ["9i8U7y6T5r4E3w2Q-tap"], "n": 1})
    assert out == {"reply": "it is [REDACTED]", "args": ["[REDACTED]"], "n": 1}
