"""Nothing heavy on a path that does not need it, with every builtin plugin installed:
``clawkit --help`` and a one-shot run against an OpenAI-compatible endpoint never import
litellm, and a one-shot run with nothing in memory never imports the embedding runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e

PROBE = textwrap.dedent(
    """
    import json, sys
    from clawkit.cli import main
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    heavy = ("litellm", "openai", "onnxruntime", "tokenizers", "tiktoken", "numpy", "sqlite_vec", "jsonschema")
    print(json.dumps({"code": code, "imported": [m for m in heavy if m in sys.modules]}), file=sys.stderr)
    """
)


def probe(cwd, *argv: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS", "CLAWKIT_TRACE_PLUGINS")}
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=120)
    return {**json.loads(out.stderr.strip().splitlines()[-1]), "stdout": out.stdout, "stderr": out.stderr}


def test_help_imports_neither_litellm_nor_the_embedding_runtime(tmp_path):
    result = probe(tmp_path, "--help")
    assert result["code"] == 0 and result["imported"] == [], result


def test_one_shot_run_on_an_openai_endpoint_stays_light(tmp_path, model_server):
    model_server.script("Hello from the loopback model.", "Second answer.")
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: light
        model: {{name: openai/test-model, api_base: "{model_server.url}", api_key: sk-test}}
        instructions: Be brief.
    """))
    first = probe(tmp_path, "run", "agent.yaml", "hi")
    assert first["code"] == 0 and first["stdout"] == "Hello from the loopback model.\n", first["stderr"]
    assert first["imported"] == [], f"a one-shot run with nothing in memory imported {first['imported']}"


def test_repeated_one_shot_runs_in_one_workspace_exit_cleanly(tmp_path, model_server):
    """From the second run on, memory has a finished turn to index (the embedding runtime
    loads in its worker thread): the process still exits 0, never by a signal."""
    model_server.script(lambda request: "Pong.")
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: again
        model: {{name: openai/test-model, api_base: "{model_server.url}", api_key: sk-test}}
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS", "CLAWKIT_TRACE_PLUGINS")}
    for _ in range(3):
        out = subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", "hi"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0 and out.stdout == "Pong.\n", out.stderr
