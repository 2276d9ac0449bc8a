"""Images and files in prompts, end to end through the real CLI with every builtin plugin, against the
loopback model server in both wire formats (docs/attachments.md): the request body carries OpenAI
``image_url``/``file`` parts or Anthropic ``image``/``document`` blocks; the type comes from the bytes;
wrong types, oversize files and vision-less models are refused before any model call; each file is
stored once per content hash and the database holds no base64; ``sessions show`` lists them; ``chat``
takes ``/attach``; a URL attachment goes through web_fetch's gates and marks the session untrusted."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from clawkit.testing.media import png
from clawkit.testing.server import ModelServer

pytestmark = pytest.mark.e2e

FORMATS = {"openai": "openai/test", "anthropic": "anthropic/claude-test"}


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n2 0 obj << /Type /Page >> endobj\n%%EOF\n"


@pytest.fixture(scope="module")
def server():
    with ModelServer() as srv:
        yield srv


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install: every builtin plugin
    e["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return e


def agent(ws: Path, server: ModelServer, model: str = "openai/test", extra: str = "", tools: str = "[]") -> Path:
    ws.mkdir(parents=True, exist_ok=True)
    path = ws / "agent.yaml"
    path.write_text(f'name: t\nmodel: {{name: {model}, api_base: "{server.url}", api_key: sk-test, max_retries: 0, '
                    f'timeout: 20}}\ntools: {tools}\n' + extra)
    return path


def clawkit(ws: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawkit", *args], capture_output=True, text=True, env=env(), cwd=ws,
                          input=stdin, timeout=120)


def user_content(body: dict, wire: str) -> list:
    messages = body["messages"]
    return [m for m in messages if m["role"] == "user"][-1]["content"]


@pytest.mark.parametrize("wire", sorted(FORMATS))
def test_images_pdfs_and_text_reach_the_model_stored_once(tmp_path, server, wire):
    ws = tmp_path / wire
    path = agent(ws, server, FORMATS[wire])
    photo = png()
    (ws / "photo.dat").write_bytes(photo)  # the name says nothing: the bytes say PNG
    (ws / "report.pdf").write_bytes(PDF)
    (ws / "notes.md").write_text("the budget is 42\n")
    server.script("A red pixel, a one-page PDF and a note.", "Still the same pixel.")
    before = len(server.requests)
    first = clawkit(ws, "run", str(path), "what are these?", "-a", "photo.dat", "--attachment", "report.pdf",
                    "-a", "notes.md", "--json")
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    b64 = base64.b64encode(photo).decode()
    content = user_content(server.requests[before].body, wire)
    assert content[0] == {"type": "text", "text": "what are these?"}
    if wire == "openai":
        assert {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}} in content
        assert {"type": "file", "file": {"filename": "report.pdf",
                                         "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode()}} in content
    else:
        assert {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}} in content
        assert {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                               "data": base64.b64encode(PDF).decode()}, "title": "report.pdf"} in content
    assert {"type": "text", "text": "[attached file notes.md]\nthe budget is 42\n"} in content

    # the same photo again, in the same session: the earlier one comes back from the store (resumed
    # from disk by a new process), and the bytes are on disk once
    second = clawkit(ws, "run", str(path), "and now?", "-a", "photo.dat", "--session", sid, "--json")
    assert second.returncode == 0, second.stderr
    sent = json.dumps(server.requests[-1].body)
    assert sent.count(b64) == 2  # the first turn's image (from the blob store) and this turn's
    blobs = [p for p in (ws / ".clawkit" / "attachments").rglob("*") if p.is_file()]
    assert sorted(p.name for p in blobs) == sorted({hashlib.sha256(x).hexdigest()
                                                    for x in (photo, PDF, b"the budget is 42\n")})
    db = (ws / ".clawkit" / "state.db").read_bytes() + b"".join(
        p.read_bytes() for p in (ws / ".clawkit").glob("state.db-wal"))
    assert b64[:40].encode() not in db  # references only: no base64 in the session database
    shown = clawkit(ws, "sessions", "show", sid, "--agent", str(path))
    assert shown.returncode == 0, shown.stderr
    assert "[user attachment] photo.dat (image/png" in shown.stdout
    assert "report.pdf (application/pdf" in shown.stdout and shown.stdout.count("photo.dat (image/png") == 2
    exported = clawkit(ws, "sessions", "export", sid, "--agent", str(path))
    assert exported.returncode == 0 and b64[:40] not in exported.stdout and '"sha256"' in exported.stdout


def test_bad_attachments_are_refused_before_any_model_call(tmp_path, server):
    ws = tmp_path / "bad"
    path = agent(ws, server, extra="limits: {attachment_max_bytes: 2000}\n")
    (ws / "fake.png").write_bytes(b"BM" + os.urandom(200))  # a BMP called .png: refused by its bytes
    (ws / "big.png").write_bytes(png(extra=5000))
    (ws / "ok.png").write_bytes(png())
    before = len(server.requests)
    wrong = clawkit(ws, "run", str(path), "look", "-a", "fake.png")
    assert wrong.returncode == 2 and "attachment fake.png: unsupported type" in wrong.stderr, wrong.stderr
    big = clawkit(ws, "run", str(path), "look", "-a", "big.png")
    assert big.returncode == 2 and "big.png" in big.stderr and "limits.attachment_max_bytes" in big.stderr, big.stderr
    missing = clawkit(ws, "run", str(path), "look", "-a", "nowhere.png")
    assert missing.returncode == 2 and "attachment nowhere.png: cannot read it" in missing.stderr
    # chat: /attach checks at once (errors named, the chat goes on); the good one rides with the next message
    server.script("one pixel")
    chat = clawkit(ws, "chat", str(path), stdin="/attach fake.png\n/attach big.png\n/attach ok.png\nwhat is it?\n")
    assert chat.returncode == 0, chat.stderr
    assert "attachment fake.png: unsupported type" in chat.stderr and "big.png" in chat.stderr
    assert "[attached ok.png (image/png" in chat.stdout
    assert len(server.requests) == before + 1
    assert [p["type"] for p in user_content(server.requests[-1].body, "openai")] == ["text", "image_url"]


@pytest.mark.parametrize("wire", sorted(FORMATS))
def test_a_model_known_not_to_take_images_is_refused_before_any_call(tmp_path, server, wire):
    # litellm's table lists gpt-3.5-turbo without vision; the YAML can say so for any model
    model, extra = ("openai/gpt-3.5-turbo", "") if wire == "openai" else (FORMATS[wire], "")
    path = agent(tmp_path / wire, server, model)
    if wire == "anthropic":
        path.write_text(path.read_text().replace("timeout: 20", "timeout: 20, supports_vision: false"))
    (tmp_path / wire / "a.png").write_bytes(png())
    (tmp_path / wire / "a.pdf").write_bytes(PDF)
    before = len(server.requests)
    out = clawkit(tmp_path / wire, "run", str(path), "look", "-a", "a.pdf", "-a", "a.png")
    assert out.returncode == 2, out.stderr
    assert "attachment a.png" in out.stderr and "does not accept images" in out.stderr
    assert len(server.requests) == before


class _Files(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        data = png(2, 2)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")  # the bytes decide, not the header
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_a_url_attachment_goes_through_web_fetchs_gates_and_is_untrusted(tmp_path, server):
    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{files.server_address[1]}/pictures/cat"
    try:
        before = len(server.requests)
        denied = clawkit(tmp_path, "run", str(agent(tmp_path / "a", server)), "look", "-a", url)
        assert denied.returncode == 2 and "web_fetch is not in this agent's tool list" in denied.stderr, denied.stderr
        private = clawkit(tmp_path, "run", str(agent(tmp_path / "b", server, tools="[web_fetch]")), "look", "-a", url)
        assert private.returncode == 2 and "not a public address" in private.stderr, private.stderr
        assert len(server.requests) == before
        grant = f"plugins:\n  policy:\n    grants:\n      - tools: [web_fetch]\n        hosts: [127.0.0.1:{files.server_address[1]}]\n"
        path = agent(tmp_path / "c", server, tools="[web_fetch]", extra=grant)
        server.script("a cat, 2x2")
        ok = clawkit(tmp_path / "c", "run", str(path), "look", "-a", url, "--json")
        assert ok.returncode == 0, ok.stderr
        content = user_content(server.requests[-1].body, "openai")
        assert content[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png(2, 2)).decode()
        db = sqlite3.connect(tmp_path / "c" / ".clawkit" / "state.db")
        meta = json.loads(db.execute("SELECT metadata FROM sessions WHERE id = ?", (json.loads(ok.stdout)["session_id"],)).fetchone()[0])
        assert {"source": "attachment", "detail": url, "kind": "web"} in meta["untrusted"]["sources"]
    finally:
        files.shutdown()
        files.server_close()
