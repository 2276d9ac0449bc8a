"""``clawkit submit`` takes what a served request takes: ``-a/--attachment`` (an image's bytes stored in
``clawkit_attachments``, the queued record carrying a reference) and ``--setting KEY=VALUE`` model
settings. Before, ``submit`` sent the text alone; the same turn through ``serve`` could carry both.
A real PostgreSQL, one ``clawkit worker``, the loopback model, every builtin loaded."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest

from clawkit.cli import main
from clawkit.testing.media import png
from clawkit.testing.server import ModelServer
from clawkit_workers.testing import Workers

pytestmark = pytest.mark.e2e


def test_submit_sends_an_image_and_settings_through_the_queue(pg_url, tmp_path):
    with ModelServer() as model:
        (tmp_path / "ws").mkdir()
        yaml = tmp_path / "viewer.yaml"
        yaml.write_text(
            "name: viewer\n"
            f"model: {{name: openai/gpt-4o-mini, api_base: \"{model.url}\", api_key: sk-test, timeout: 30, max_retries: 0}}\n"
            f"workspace: {tmp_path / 'ws'}\nstate_db: {tmp_path / 'state.db'}\ninstructions: Answer.\ntools: []\n",
            encoding="utf-8")
        (tmp_path / "shot.png").write_bytes(png())
        workers = Workers(pg_url, [yaml])
        try:
            workers.start(1)
            model.script("a red pixel")
            out = subprocess.run([sys.executable, "-m", "clawkit", "submit", "viewer", "what is this?", "-a", "shot.png",
                                  "--setting", "temperature=0.3", "--setting", "max_tokens=77", "--wait", "--timeout", "90",
                                  "--db", pg_url], cwd=tmp_path, capture_output=True, text=True, timeout=150,
                                 env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == "a red pixel"
            (req,) = model.requests
            assert req.body["temperature"] == 0.3 and req.body["max_tokens"] == 77, req.body
            image = "data:image/png;base64," + base64.b64encode(png()).decode()
            parts = req.body["messages"][-1]["content"]
            assert {"type": "image_url", "image_url": {"url": image}} in parts and {"type": "text", "text": "what is this?"} in parts
        finally:
            workers.stop_all()


def test_bad_settings_and_attachments_are_usage_errors_before_the_queue(tmp_path, capsys):
    url = "postgresql://nobody@127.0.0.1:1/none"  # never reached: the flags are checked first
    assert main(["submit", "a", "hi", "--db", url, "--setting", "api_key=sk-evil"]) == 2
    assert "settings api_key: not model settings a queued turn takes" in capsys.readouterr().err
    assert main(["submit", "a", "hi", "--db", url, "--setting", "temperature"]) == 2
    assert "--setting 'temperature': expected KEY=VALUE" in capsys.readouterr().err
    assert main(["submit", "a", "hi", "--db", url, "-a", str(tmp_path / "missing.png")]) == 2
    assert "missing.png: cannot read it" in capsys.readouterr().err
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01binary")
    assert main(["submit", "a", "hi", "--db", url, "-a", str(tmp_path / "blob.bin")]) == 2
    assert "unsupported type" in capsys.readouterr().err
