"""Model failures through the CLI, with every builtin plugin loaded: classified, named with
the endpoint, non-retryable ones on the first attempt, retries announced on stderr."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from clawkit.testing.server import Fault

pytestmark = pytest.mark.e2e


def write_agent(dir: Path, model: str) -> Path:
    path = dir / "agent.yaml"
    body = {"name": "err-bot", "model": yaml.safe_load(textwrap.dedent(model)), "instructions": "Be brief."}
    path.write_text(yaml.safe_dump(body))
    return path


def clawkit(cwd: Path, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS", "OPENAI_API_KEY")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)


def retry_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "; retry " in line]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_is_named_and_bounded(tmp_path):
    base = f"http://127.0.0.1:{free_port()}/v1"
    write_agent(tmp_path, f"""
        name: openai/test-model
        api_base: {base}
        api_key: sk-test
        max_retries: 50
        retry_base_delay: 0.2
        retry_max_delay: 0.4
        retry_timeout: 1.5
        """)
    out = clawkit(tmp_path, "run", "agent.yaml", "hi")
    assert out.returncode == 3, out.stderr
    assert "connection refused" in out.stderr and base in out.stderr and "HTTP 500" not in out.stderr
    assert "retry_timeout=1.5s" in out.stderr and "Traceback" not in out.stderr
    lines = retry_lines(out.stderr)
    assert 2 <= len(lines) <= 8 and all("connection refused at " + base in line for line in lines)


def test_missing_key_fails_on_the_first_attempt(tmp_path):
    write_agent(tmp_path, "name: openai/gpt-4o-mini\nmax_retries: 5")
    out = clawkit(tmp_path, "run", "agent.yaml", "hi")
    assert out.returncode == 3, out.stderr
    assert "no API key" in out.stderr and "(auth)" in out.stderr and "not retryable" in out.stderr
    assert retry_lines(out.stderr) == []


@pytest.mark.parametrize("code", [401, 404, 400])
def test_client_errors_make_exactly_one_request(tmp_path, model_server, code):
    model_server.script(Fault.status(code, "scripted refusal"), "never")
    write_agent(tmp_path, f"name: openai/test-model\napi_base: {model_server.url}\napi_key: sk-test\nmax_retries: 5")
    started = time.monotonic()
    out = clawkit(tmp_path, "run", "agent.yaml", "hi")
    assert out.returncode == 3, out.stderr
    assert len(model_server.requests) == 1 and retry_lines(out.stderr) == []
    assert f"HTTP {code}" in out.stderr and model_server.url in out.stderr and "not retryable" in out.stderr
    assert model_server.requests[0].received - started < 60  # (start-up time only; no waits after the 4xx)


def test_rate_limit_with_retry_after_is_retried_with_a_notice(tmp_path, model_server):
    model_server.script(Fault.rate_limit(retry_after=0.3), "Made it.")
    write_agent(tmp_path, f"name: openai/test-model\napi_base: {model_server.url}\napi_key: sk-test\nretry_base_delay: 0.01")
    out = clawkit(tmp_path, "run", "agent.yaml", "hi")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Made it."
    (line,) = retry_lines(out.stderr)
    assert "rate_limit (HTTP 429)" in line and model_server.url in line and "retry 1/5" in line
    assert model_server.requests[1].received - model_server.requests[0].received >= 0.3
