"""A served request's per-request settings, typed output and attachments ride the PostgreSQL turn
queue (``clawkit serve --db postgresql://…`` + one ``clawkit worker``, the official ``openai`` SDK,
every builtin loaded). Old main refused all three with a 400 (``unsupported_parameter`` /
``unsupported_content``) on this path:

* ``chat.completions.parse(response_format=PydanticModel)`` returns the parsed object, and the model
  server got the json_schema ``response_format`` (OpenAI wire); an answer that never validates is a
  502 ``output_invalid``, as in process;
* ``temperature`` / ``max_tokens`` reach the model request;
* on the Anthropic wire: typed output as a forced ``final_answer`` tool, an image as an image block;
* an image part reaches the model request as an image part; its bytes are in ``clawkit_attachments``
  (the shared database), and the next turn of the session sends it again from there.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
import time

import openai
import psycopg
import pytest
from pydantic import BaseModel

from clawkit.testing.media import png
from clawkit.testing.server import ModelServer, Reply
from clawkit_workers.testing import Workers

pytestmark = pytest.mark.e2e


def _serve(url: str, yamls) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "clawkit", "serve", *map(str, yamls), "--db", url, "--dev", "--port", "0"],
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    deadline = time.monotonic() + 90
    lines = []
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"clawkit serve: (http://\S+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, m.group(1)
    p.kill()
    raise AssertionError("serve did not start:\n" + "".join(lines))


class Person(BaseModel):
    name: str
    age: int


def _images(body: dict) -> list[str]:
    return [p["image_url"]["url"] for m in body["messages"] if isinstance(m.get("content"), list)
            for p in m["content"] if p.get("type") == "image_url"]


def test_settings_typed_output_and_images_ride_the_queue(pg_url, tmp_path):
    with ModelServer() as model:
        (tmp_path / "ws").mkdir()
        yaml = tmp_path / "typed.yaml"
        yaml.write_text(
            "name: typed\n"
            f"model: {{name: openai/gpt-4o-mini, api_base: \"{model.url}\", api_key: sk-test, timeout: 30, max_retries: 0}}\n"
            f"workspace: {tmp_path / 'ws'}\nstate_db: {tmp_path / 'state.db'}\ninstructions: Answer.\ntools: []\n"
            "plugins:\n  memory: {enabled: false}\n", encoding="utf-8")
        claude = tmp_path / "claude.yaml"
        claude.write_text(
            "name: claude\n"
            f"model: {{name: anthropic/claude-3-5-haiku-20241022, api_base: \"{model.url}\", api_key: sk-test, timeout: 30, "
            "max_retries: 0, supports_vision: true}\n"
            f"workspace: {tmp_path / 'ws'}\nstate_db: {tmp_path / 'state.db'}\ninstructions: Answer.\ntools: []\n"
            "plugins:\n  memory: {enabled: false}\n", encoding="utf-8")
        workers = Workers(pg_url, [yaml, claude])
        served = None
        try:
            workers.start(1)
            served, base = _serve(pg_url, [yaml, claude])
            client = openai.OpenAI(base_url=base + "/v1", api_key="sk-dev", max_retries=0, timeout=120)

            # typed output: parse() with a pydantic model, the schema sent natively, a bad answer retried
            model.script('{"name": "Ada", "age": "thirty-six"}', '{"name": "Ada", "age": 36}')
            done = client.chat.completions.parse(model="typed", messages=[{"role": "user", "content": "who?"}],
                                                 response_format=Person)
            assert done.choices[0].message.parsed == Person(name="Ada", age=36)
            first, second = model.requests
            rf = first.body["response_format"]
            assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == "Person", rf
            assert rf["json_schema"]["schema"]["required"] == ["name", "age"]
            assert "age" in json.dumps(second.body["messages"][-1])  # the validation errors went back

            # never valid: 502 output_invalid in OpenAI's error shape
            model.reset()
            model.script("no", "still no", "never")
            with pytest.raises(openai.APIStatusError) as bad:
                client.chat.completions.parse(model="typed", messages=[{"role": "user", "content": "who?"}],
                                              response_format=Person)
            assert bad.value.status_code == 502 and bad.value.body["code"] == "output_invalid", bad.value.body

            # sampling settings reach the model request
            model.reset()
            model.script("warm")
            r = client.chat.completions.create(model="typed", messages=[{"role": "user", "content": "hi"}],
                                               temperature=0.3, max_tokens=77)
            assert r.choices[0].message.content == "warm"
            (req,) = model.requests
            assert req.body["temperature"] == 0.3 and req.body["max_tokens"] == 77, req.body

            # an image part reaches the model as an image part; the next turn sends it again (from the database)
            model.reset()
            model.script("a pixel", "still a pixel")
            image = "data:image/png;base64," + base64.b64encode(png()).decode()
            r = client.chat.completions.create(model="typed", messages=[{"role": "user", "content": [
                {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": image}}]}])
            assert r.choices[0].message.content == "a pixel"
            sid = r.model_extra["session_id"]
            r2 = client.chat.completions.create(model="typed", messages=[{"role": "user", "content": "and now?"}],
                                                extra_headers={"X-Clawkit-Session": sid})
            assert r2.choices[0].message.content == "still a pixel"
            one, two = model.requests
            assert _images(one.body) == [image] and _images(two.body) == [image]

            # the Anthropic wire: typed output as a forced final_answer tool, the image as an image block
            model.reset()
            model.script(Reply.tool_calls([("final_answer", {"name": "Bo", "age": 5})]))
            done = client.chat.completions.parse(model="claude", messages=[{"role": "user", "content": [
                {"type": "text", "text": "who is in the picture?"}, {"type": "image_url", "image_url": {"url": image}}]}],
                response_format=Person, temperature=0.2)
            assert done.choices[0].message.parsed == Person(name="Bo", age=5)
            (req,) = model.requests
            assert req.body["tool_choice"] == {"type": "tool", "name": "final_answer"} and req.body["temperature"] == 0.2
            data = base64.b64encode(png()).decode()
            parts = [{k: v for k, v in p.items() if k != "cache_control"} for p in req.body["messages"][-1]["content"]]
            assert {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}} in parts
            # a bad part is refused by the server before anything is queued, as in process
            model.reset()
            junk = "data:application/octet-stream;base64," + base64.b64encode(b"\x00\x01\x02binary").decode()
            with pytest.raises(openai.BadRequestError) as refused:
                client.chat.completions.create(model="typed", messages=[{"role": "user", "content": [
                    {"type": "text", "text": "?"}, {"type": "file", "file": {"file_data": junk, "filename": "x.bin"}}]}])
            assert refused.value.body["code"] == "bad_attachment" and "x.bin" in refused.value.body["message"]
            assert model.requests == []
            with psycopg.connect(pg_url) as conn:
                (count,) = conn.execute("SELECT COUNT(*) FROM clawkit_attachments").fetchone()
            assert count == 1
        finally:
            if served is not None:
                served.terminate()
                served.wait(30)
            workers.stop_all()
