"""A command's environment never carries a credential URL, with a user name or without one
(``redis://:pw@host``, the form Redis documents for a password-only server), whatever the variable's name."""

from __future__ import annotations

from clawkit_tools.shell import SECRET_VALUE, scrubbed_env


def test_credential_urls_are_scrubbed_from_a_commands_environment():
    env = {"CACHE_URL": "redis://:hunter22@cache:6379/0", "PG_URL": "postgres://:pgsecret9@db/app",
           "BROKER": "amqp://guest:amqpword7@mq:5672", "DOCS": "https://docs.example.com/a:b", "HOME": "/root",
           "BROKER_PLAIN": "amqp://user:@mq:5672"}
    out = scrubbed_env(env)
    assert "CACHE_URL" not in out and "PG_URL" not in out and "BROKER" not in out
    assert out["DOCS"] == env["DOCS"] and out["HOME"] == "/root" and out["BROKER_PLAIN"] == env["BROKER_PLAIN"]
    assert SECRET_VALUE.search("redis://:hunter22@cache:6379")
