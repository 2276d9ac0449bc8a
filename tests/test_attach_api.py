"""Attachments from Python (``Agent.run/turn(attachments=…)``) with every builtin plugin loaded: paths,
bytes and :class:`Attachment` objects become blocks on the user message; the type is sniffed from the
bytes; token estimates count attachments without their base64; ``fetch_attachment`` answers URL
attachments after the ``web_fetch`` gates; a failing fetcher refuses the attachment (fails closed)."""

from __future__ import annotations

import asyncio
import base64

import pytest

from clawkit import hookimpl
from clawkit.attachments import Attachment, AttachmentError, sniff
from clawkit.tokens import estimate_usage, max_request_tokens
from clawkit.types import LlmResponse

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"
       b"\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82")


def test_types_come_from_the_bytes():
    assert sniff(PNG) == "image/png"
    assert sniff(b"\xff\xd8\xff\xe0\x00\x10JFIF") == "image/jpeg"
    assert sniff(b"GIF89a\x01\x00") == "image/gif"
    assert sniff(b"RIFF\x10\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff(b"%PDF-1.7\n") == "application/pdf"
    assert sniff("héllo\n".encode()) == "text/plain"
    assert sniff(b"BM\x00\x01\x02") is None and sniff(b"\xff\xfe\x00\x00") is None


def test_paths_bytes_and_attachment_objects_from_python(make_agent, workspace):
    (workspace / "chart").write_bytes(PNG)
    agent = make_agent(["a chart, a note and a pixel"])
    result = agent.run("what are these?", attachments=[workspace / "chart", b"plain words\n",
                                                       Attachment(PNG, "pixel.png")])
    assert result.reply == "a chart, a note and a pixel"
    request = agent.provider.requests[-1]
    user = request.messages[-1]
    assert [(b.type, b.name, b.media_type) for b in user.blocks] == [
        ("image", "chart", "image/png"), ("file", "attachment", "text/plain"), ("image", "pixel.png", "image/png")]
    wire = user.to_openai()["content"]
    assert wire[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}
    assert wire[2] == {"type": "text", "text": "[attached file attachment]\nplain words\n"}
    # counted by estimate, never by their base64; a dump of the message holds no bytes
    bare = request.model_copy(update={"messages": [m.model_copy(update={"blocks": []}) for m in request.messages]})
    assert max_request_tokens(request) - max_request_tokens(bare) == 1600 + 1600 + len(b"plain words\n") // 3 + 10
    assert estimate_usage(request, LlmResponse(content="x")).prompt_tokens > 3200
    assert "data" not in user.model_dump()["blocks"][0] and base64.b64encode(PNG).decode() not in repr(user)
    stored = agent.store.messages(result.session_id)
    assert stored[0].blocks[0].sha256 and stored[0].blocks[0].data is None


def test_a_vision_less_model_is_refused_before_the_session_is_touched(make_agent):
    agent = make_agent(["never"], model={"name": "scripted/test", "supports_vision": False})
    with pytest.raises(AttachmentError, match="attachment attachment: model scripted/test does not accept images"):
        agent.run("look", attachments=[PNG])
    assert agent.provider.requests == [] and agent.store.list(10) == []
    agent.run("a pdf is fine", attachments=[b"%PDF-1.4\n%%EOF\n"])  # not an image: no vision needed


class FakeFetcher:
    """Answers URL attachments (instead of clawkit-tools' network fetch) and records what it was asked."""

    def __init__(self, fail: bool = False):
        self.asked: list[tuple[str, int]] = []
        self.fail = fail

    @hookimpl
    async def fetch_attachment(self, ctx, url, max_bytes):
        self.asked.append((url, max_bytes))
        if self.fail:
            raise RuntimeError("the mirror is down")
        await asyncio.sleep(0)
        return PNG, "image/png"


def test_fetch_attachment_answers_after_the_web_fetch_gates(make_agent):
    fetcher = FakeFetcher()
    agent = make_agent(["a pixel from the web"], plugins=[fetcher], tools=["web_fetch"],
                       limits={"attachment_max_bytes": 5000})
    url = "https://93.184.216.34/pixel.png"  # a public address: web_fetch's scope, no DNS needed
    result = agent.run("what is it?", attachments=[url])
    assert fetcher.asked == [(url, 5000)]
    block = agent.provider.requests[-1].messages[-1].blocks[0]
    assert (block.name, block.media_type, block.source) == ("pixel.png", "image/png", url)
    untrusted = agent.store.load_metadata(result.session_id)["untrusted"]["sources"]
    assert {"source": "attachment", "detail": url, "kind": "web"} in untrusted


def test_a_url_is_refused_when_the_gates_refuse_web_fetch_or_the_fetcher_fails(make_agent):
    fetcher = FakeFetcher()
    agent = make_agent(["never"], plugins=[fetcher], tools=[])  # web_fetch not allowed: the policy blocks it
    with pytest.raises(AttachmentError, match="blocked by policy"):
        agent.run("look", attachments=["https://93.184.216.34/a.png"])
    assert fetcher.asked == [] and agent.provider.requests == []
    failing = make_agent(["never"], plugins=[FakeFetcher(fail=True)], tools=["web_fetch"])
    with pytest.raises(AttachmentError, match="the mirror is down"):
        failing.run("look", attachments=["https://93.184.216.34/a.png"])
    assert failing.provider.requests == []


def test_the_python_example_in_the_docs_runs(tmp_path, monkeypatch, capsys):
    import re
    from pathlib import Path

    from clawkit.testing.server import ModelServer

    doc = (Path(__file__).resolve().parents[1] / "docs" / "attachments.md").read_text()
    example = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "open_agent" in b)
    (tmp_path / "chart.png").write_bytes(PNG)
    (tmp_path / "b.png").write_bytes(PNG)
    monkeypatch.chdir(tmp_path)
    with ModelServer() as server:
        (tmp_path / "agent.yaml").write_text(f'name: docs\nmodel: {{name: openai/test, api_base: "{server.url}", '
                                             "api_key: sk-test, max_retries: 0}\ntools: []\n")
        server.script("a chart", "two of them")
        exec(compile(example, "docs/attachments.md", "exec"), {})
        kinds = [[p["type"] for p in r.body["messages"][-1]["content"]] for r in server.requests]
    assert capsys.readouterr().out.startswith("a chart")
    assert kinds[0] == ["text", "image_url"] and kinds[1] == ["text", "file", "image_url"]


def test_compaction_counts_attachments_by_estimate_and_summarises_their_names(make_agent, workspace):
    from clawkit_compaction.compactor import message_tokens, render

    from clawkit.tokens import get_counter

    (workspace / "chart.png").write_bytes(PNG)
    agent = make_agent(["a chart"])
    result = agent.run("what is this?", attachments=[workspace / "chart.png"])
    message = agent.session(result.session_id).history[0]
    counter = get_counter(None)
    assert message_tokens(message, counter) == 4 + counter.count("what is this?") + 1600
    text = "\n".join(render([message], 10_000))
    assert "[attached: chart.png (image/png" in text and base64.b64encode(PNG).decode()[:20] not in text
