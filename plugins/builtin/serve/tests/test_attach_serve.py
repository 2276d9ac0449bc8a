"""Attachments through ``serve``: the official ``openai`` client sends an image part (a data: URL) and a
``file`` part; the model gets them as OpenAI parts, the session keeps references (bytes stored once),
bad parts are a JSON 400 before any turn, and the panel shows each turn's attachments (timeline API,
and in a real browser: a screenshot goes to ``$CLAWKIT_SCREENSHOTS``, default ``screenshots/``)."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import httpx
import openai
import pytest

from clawkit.testing.media import png
from clawkit_serve.testing import make_key, serve, write_agent

pytestmark = pytest.mark.e2e
SHOTS = Path(os.environ.get("CLAWKIT_SCREENSHOTS") or Path(__file__).parent / "screenshots")


PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attach")
    helper = write_agent(tmp, model, "helper", tools=[])
    db = tmp / "server.db"
    key = make_key(db, "attach")
    served = serve([helper], db)
    try:
        yield served, key, tmp
    finally:
        served.stop()


def client(site) -> openai.OpenAI:
    served, key, _ = site
    return openai.OpenAI(base_url=served.url + "/v1", api_key=key, max_retries=0, timeout=60)


def test_the_openai_sdk_sends_an_image_and_a_file_and_the_model_gets_them(site, model):
    served, key, tmp = site
    image = "data:image/png;base64," + base64.b64encode(png()).decode()
    pdf = "data:application/pdf;base64," + base64.b64encode(PDF).decode()
    reply = client(site).chat.completions.create(model="helper", messages=[{"role": "user", "content": [
        {"type": "text", "text": "say: a pixel and a page"},
        {"type": "image_url", "image_url": {"url": image}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": pdf}},
    ]}])
    assert reply.choices[0].message.content == "a pixel and a page"
    content = [m for m in model.requests[-1].body["messages"] if m["role"] == "user"][-1]["content"]
    assert content == [{"type": "text", "text": "say: a pixel and a page"},
                       {"type": "image_url", "image_url": {"url": image}},
                       {"type": "file", "file": {"filename": "report.pdf", "file_data": pdf}}]
    blobs = sorted(p.name for p in (tmp / "ws-helper" / ".clawkit" / "attachments").rglob("*") if p.is_file())
    assert len(blobs) == 2
    # the next turn of the session: the image is sent again from the store, not stored again
    sid = reply.model_extra["session_id"]
    client(site).chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: again"}],
                                         extra_body={"session_id": sid})
    assert image in str(model.requests[-1].body)
    assert sorted(p.name for p in (tmp / "ws-helper" / ".clawkit" / "attachments").rglob("*") if p.is_file()) == blobs
    auth = {"Authorization": f"Bearer {key}"}
    timeline = httpx.get(f"{served.url}/api/sessions/{sid}/timeline", headers=auth).json()
    first = timeline["turns"][0]["attachments"]
    assert [(a["name"], a["media_type"], a["size"]) for a in first] == [
        ("image-0-1", "image/png", len(png())), ("report.pdf", "application/pdf", len(PDF))]
    assert timeline["turns"][1]["attachments"] == []


@pytest.mark.parametrize("part, words", [
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"GIF? no: text\x00\x01").decode()}},
     "unsupported type"),
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}, "does not decode"),
    ({"type": "file", "file": {"file_id": "file-abc"}}, "file_data"),
])
def test_bad_parts_are_a_json_400_before_any_turn(site, model, part, words):
    calls = len(model.requests)
    with pytest.raises(openai.BadRequestError) as caught:
        client(site).chat.completions.create(model="helper", messages=[{"role": "user", "content": [
            {"type": "text", "text": "say: hi"}, part]}])
    assert words in caught.value.body["message"], caught.value.body
    assert len(model.requests) == calls


def test_the_panel_shows_a_turns_attachments(site, model):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which("/usr/bin/chromium"):
        pytest.skip("Debian's chromium is not installed (bash scripts/setup-system.sh)")
    served, key, _ = site
    reply = client(site).chat.completions.create(model="helper", messages=[{"role": "user", "content": [
        {"type": "text", "text": "say: seen"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png()).decode()}}]}])
    sid = reply.model_extra["session_id"]
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            page = browser.new_page(base_url=served.url, viewport={"width": 1280, "height": 800})
            page.set_default_timeout(30_000)
            page.goto("/panel/")
            page.fill("#key", key)
            page.click("#signin-button")
            page.wait_for_selector("#sessions")
            page.goto(f"/panel/#/session/{sid}")
            item = page.wait_for_selector("#timeline .attachment")
            assert "image-0-1" in item.inner_text() and "image/png" in item.inner_text() and "B" in item.inner_text()
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "attach-01-session-attachment.png"), full_page=True)
        finally:
            browser.close()


def test_an_earlier_image_for_a_model_without_vision_is_a_400(model, tmp_path):
    blind = write_agent(tmp_path, model, "blind", tools=[])
    blind.write_text(blind.read_text().replace('"max_retries": 0', '"max_retries": 0, "supports_vision": false'))
    db = tmp_path / "server.db"
    served = serve([blind], db)
    try:
        c = openai.OpenAI(base_url=served.url + "/v1", api_key=make_key(db, "b"), max_retries=0, timeout=60)
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png()).decode()}}
        calls = len(model.requests)
        for messages in ([{"role": "user", "content": [{"type": "text", "text": "say: hi"}, image]}],
                         [{"role": "user", "content": [image]}, {"role": "assistant", "content": "ok"},
                          {"role": "user", "content": "say: hi"}]):
            with pytest.raises(openai.BadRequestError) as caught:
                c.chat.completions.create(model="blind", messages=messages)
            assert caught.value.body["code"] == "bad_attachment" and "does not accept images" in caught.value.body["message"]
        assert len(model.requests) == calls
    finally:
        served.stop()
