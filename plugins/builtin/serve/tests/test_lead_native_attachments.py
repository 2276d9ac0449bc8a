"""Attachments through serve's native API (``POST /api/sessions``, ``POST /api/sessions/{id}/messages``):
``"attachments": [{"data": base64, "name"}, {"url"}]`` reach the model as the OpenAI route's image
and file parts do, streamed or not; bad ones are a JSON 400 naming the item, before any turn. Before,
the native API took the text alone (the OpenAI route was the only one that took files)."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from clawkit.testing.media import png
from clawkit_serve.testing import make_key, serve, write_agent

pytestmark = pytest.mark.e2e


PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("native-attach")
    helper = write_agent(tmp, model, "helper", tools=[])
    db = tmp / "server.db"
    key = make_key(db, "attach")
    served = serve([helper], db)
    try:
        yield served, {"Authorization": f"Bearer {key}"}, tmp
    finally:
        served.stop()


def _user_parts(model) -> list:
    return [m for m in model.requests[-1].body["messages"] if m["role"] == "user"][-1]["content"]


def test_a_new_session_and_a_later_message_carry_files_to_the_model(site, model):
    served, auth, tmp = site
    b64 = base64.b64encode(png()).decode()
    made = httpx.post(f"{served.url}/api/sessions", headers=auth, timeout=60, json={
        "agent": "helper", "message": "say: a pixel", "attachments": [{"data": b64, "name": "shot.png"}]})
    assert made.status_code == 200, made.text
    assert made.json()["reply"] == "a pixel"
    assert {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}} in _user_parts(model)
    sid = made.headers["x-clawkit-session"]

    pdf = base64.b64encode(PDF).decode()
    with httpx.stream("POST", f"{served.url}/api/sessions/{sid}/messages", headers=auth, timeout=60, json={
            "message": "say: a page", "stream": True, "attachments": [{"data": pdf, "name": "report.pdf"}]}) as r:
        assert r.status_code == 200
        events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
    assert events[-1]["type"] == "result" and events[-1]["reply"] == "a page"
    parts = _user_parts(model)
    assert {"type": "file", "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{pdf}"}} in parts
    shown = httpx.get(f"{served.url}/api/sessions/{sid}", headers=auth, timeout=30).json()
    blocks = [b for m in shown["messages"] for b in m.get("blocks", [])]
    assert {(b["name"], b["media_type"]) for b in blocks} == {("shot.png", "image/png"), ("report.pdf", "application/pdf")}
    assert b64 not in json.dumps(shown) and pdf not in json.dumps(shown)  # references, not bytes
    stored = [p for p in (tmp / "ws-helper" / ".clawkit" / "attachments").rglob("*") if p.is_file()]
    assert len(stored) == 2


@pytest.mark.parametrize("attachments, said", [
    ([{"data": "not base64!"}], "attachments[0].data: not valid base64"),
    ([{"data": "aGk=", "url": "https://example.org/x.png"}], "attachments[0]: give exactly one of"),
    ([{"url": "file:///etc/passwd"}], "attachments[0].url: an http(s) URL is required"),
    ("shot.png", "'attachments' must be a list"),
    ([{"data": base64.b64encode(b"\x00\x01\x02binary").decode(), "name": "blob.bin"}], "blob.bin: unsupported type"),
])
def test_a_bad_attachment_is_a_json_400_naming_it_before_any_turn(site, model, attachments, said):
    served, auth, _ = site
    before = len(model.requests)
    r = httpx.post(f"{served.url}/api/sessions", headers=auth, timeout=30,
                   json={"agent": "helper", "message": "say: no", "attachments": attachments})
    assert r.status_code == 400, r.text
    assert said in r.json()["error"]["message"] and r.json()["error"]["code"] == "bad_attachment"
    assert len(model.requests) == before
