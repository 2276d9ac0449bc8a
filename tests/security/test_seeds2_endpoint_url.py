"""Issue 27 item 11: an ``api_base`` that already ends in the endpoint path (``…/chat/completions``,
``…/v1/messages``) is used as given, not doubled — the real CLI with every builtin loaded, through
the http provider and litellm, against the loopback model server (which answers only the real
endpoint paths: a doubled path is a 404 and the run fails)."""

from __future__ import annotations

import textwrap

import pytest

from .conftest import run_cli

pytestmark = pytest.mark.e2e


def _agent(ws, model: str, api_base: str, provider: str) -> None:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: target
        model:
          name: {model}
          provider: {provider}
          api_base: "{api_base}"
          api_key: sk-test
          max_retries: 0
          timeout: 30
        tools: []
        """))


CASES = [
    ("http", "openai/test", "{url}/chat/completions", "/v1/chat/completions"),
    ("http", "anthropic/claude-test", "{base}/v1/messages", "/v1/messages"),
    ("litellm", "openai/test", "{url}/chat/completions", "/v1/chat/completions"),
    ("litellm", "anthropic/claude-test", "{base}/v1/messages", "/v1/messages"),
]


@pytest.mark.parametrize("provider,model,api_base,path", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_full_endpoint_url_is_used_as_given(tmp_path, server, audit_home, provider, model, api_base, path):
    ws = tmp_path / "ws"
    _agent(ws, model, api_base.format(url=server.url, base=server.base_url), provider)
    run = run_cli(ws, server, audit_home, "say hi", "hello from the full URL")
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert run.result.get("reply") == "hello from the full URL", run.proc.stdout[-2000:]
    assert [r.path for r in run.requests] == [path]
