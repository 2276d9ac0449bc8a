"""Attachments through clawkit-litellm (``model.provider: litellm``), end to end through the CLI with every
builtin plugin: the kernel hands litellm OpenAI ``image_url``/``file`` parts, and litellm sends them in each
wire format's own form — OpenAI parts as they are, Anthropic ``image``/``document`` blocks."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest

from clawkit.testing.server import ModelServer

pytestmark = pytest.mark.e2e

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


# the OpenAI form is the kernel's own (Message.to_openai, tested through clawkit-http in tests/test_attach_e2e.py);
# the Anthropic case is litellm's translation of it. One case: litellm's import alone takes many seconds.
@pytest.mark.parametrize("model, path", [("anthropic/claude-test", "/v1/messages")])
def test_litellm_sends_attachments_in_each_wire_format(tmp_path, model, path):
    (tmp_path / "p.png").write_bytes(PNG)
    (tmp_path / "r.pdf").write_bytes(PDF)
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    with ModelServer() as server:
        (tmp_path / "agent.yaml").write_text(
            f'name: t\nmodel: {{name: {model}, provider: litellm, api_base: "{server.url}", api_key: sk-test, '
            "max_retries: 0, timeout: 20}\ntools: []\n")
        server.script("a pixel and a page")
        out = subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", "what?", "-a", "p.png", "-a", "r.pdf"],
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert out.returncode == 0, out.stderr
        request = server.requests[-1]
    assert request.path == path
    content = [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]
    png64, pdf64 = base64.b64encode(PNG).decode(), base64.b64encode(PDF).decode()
    if path == "/v1/messages":
        assert {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png64}} in content
        assert any(p["type"] == "document" and p["source"]["data"] == pdf64 for p in content), content
    else:
        assert {"type": "image_url", "image_url": {"url": "data:image/png;base64," + png64}} in content
        assert any(p["type"] == "file" and p["file"]["file_data"].endswith(pdf64) for p in content), content
