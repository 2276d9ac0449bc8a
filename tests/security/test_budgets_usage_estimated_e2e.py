"""Usage when the provider reports none (issue 30, item 11): the request asks for it
(``stream_options.include_usage``); a server that never sends it gets the tokens counted locally,
marked estimated, and budgets and cost use the estimate. The real CLI with every builtin loaded, on
a loopback model that reports no usage whatever it is asked — through the http provider and litellm."""

from __future__ import annotations

import json
import sqlite3
import textwrap

import pytest

from clawkit.testing.server import ModelServer

from .conftest import calls, run_cli

pytestmark = pytest.mark.e2e

EXIT_BUDGET = 5


@pytest.fixture(scope="module")
def quiet_server():
    with ModelServer(report_usage=False) as srv:
        yield srv


def _agent(ws, server, provider: str) -> None:
    ws.mkdir(parents=True, exist_ok=True)
    for i in range(50):
        (ws / f"part_{i:02d}.txt").write_text(f"part {i}\n")
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: frugal
        model:
          name: openai/test
          provider: {provider}
          api_base: "{server.url}"
          api_key: sk-test
          max_retries: 0
          timeout: 20
          input_cost_per_token: 0.001
          output_cost_per_token: 0.002
        tools: [read_file]
        plugins:
          budgets: {{run: {{tokens: 100}}}}
        """))


def _worker():
    """Reads one more part while tools are offered (forever, were nothing to stop it); sums up when none are."""
    n = iter(range(1000))

    def answer(request):
        if request.tools:
            i = next(n)
            return calls(("read_file", {"path": f"part_{i % 50:02d}.txt"}), ids=[f"call_{i}"])
        return "summary: stopped by the token budget"

    return answer


@pytest.mark.parametrize("provider", ["http", "litellm"])
def test_a_model_reporting_no_usage_is_stopped_by_the_estimate(tmp_path, quiet_server, audit_home, provider):
    ws = tmp_path / "ws"
    _agent(ws, quiet_server, provider)
    run = run_cli(ws, quiet_server, audit_home, "read every part", _worker(), timeout=180)
    assert run.proc.returncode == EXIT_BUDGET, (run.proc.stdout[-1500:], run.proc.stderr[-2000:])
    # asked for usage on every streamed request; the server never sent any
    assert all(r.body.get("stream") and r.body["stream_options"] == {"include_usage": True} for r in run.requests)
    # the first call's estimate passes 100 tokens: the next call is the wrap-up round, and that is all
    assert len(run.requests) == 2 and not run.requests[-1].tools
    assert run.result["stop_reason"] == "budget" and "run tokens" in run.result["stop_detail"]
    usage = run.result["usage"]
    assert usage["estimated"] is True and usage["prompt_tokens"] > 100 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["cost"] == pytest.approx(usage["prompt_tokens"] * 0.001 + usage["completion_tokens"] * 0.002)
    # each model call's event says its usage was estimated
    conn = sqlite3.connect(ws / ".clawkit" / "state.db")
    try:
        rows = [json.loads(d) for (d,) in conn.execute("SELECT data FROM events WHERE type = 'llm.call'")]
    finally:
        conn.close()
    assert len(rows) == 2 and all(r["usage"]["estimated"] is True and r["usage"]["total_tokens"] > 0 for r in rows)
