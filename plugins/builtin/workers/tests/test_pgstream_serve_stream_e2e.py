"""``stream: true`` through ``clawkit serve --db postgresql://…`` and two ``clawkit worker``
processes gives the official ``openai`` client the same chunks as the in-process server: the
same deltas in the same order, the same finish_reason, for a plain reply and a tool-call turn."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from clawkit.testing.server import ModelServer, Reply
from clawkit_workers.testing import Workers

pytestmark = pytest.mark.e2e

PROMPTS = ["count for me", "list the folder please"]


def answer(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return Reply.text("The folder holds one file, notes.txt, and nothing else.")
    if "list" in str(last.get("content")):
        return Reply.tool_calls([("list_dir", {"path": "."})], text="Looking at the folder now.")
    return Reply.text("one two three four five six seven")


def agent_yaml(folder: Path, url: str) -> Path:
    (folder / "ws").mkdir(parents=True, exist_ok=True)
    (folder / "ws" / "notes.txt").write_text("hi\n")
    path = folder / "streamer.yaml"
    path.write_text(f"name: streamer\nmodel: {{name: openai/scripted, api_base: \"{url}\", api_key: x, max_retries: 0, timeout: 30}}\n"
                    f"workspace: {folder / 'ws'}\nstate_db: {folder / 'state.db'}\ninstructions: Help.\n"
                    f"tools: [list_dir]\nplugins:\n  memory: {{enabled: false}}\n", encoding="utf-8")
    return path


def serve(yaml: Path, *db: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "clawkit", "serve", str(yaml), *db, "--dev", "--port", "0"],
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    lines: list[str] = []
    deadline = time.monotonic() + 90
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


def streamed(base: str) -> list[tuple[list[str], str | None]]:
    # --dev takes requests without credentials: drop the header the SDK always sends
    strip = httpx.Client(event_hooks={"request": [lambda r: r.headers.pop("Authorization", None)]}, timeout=60)
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", http_client=strip)
    out = []
    for prompt in PROMPTS:
        texts, finish = [], None
        for chunk in client.chat.completions.create(model="streamer", messages=[{"role": "user", "content": prompt}], stream=True):
            for c in chunk.choices:
                if c.delta.content:
                    texts.append(c.delta.content)
                finish = c.finish_reason or finish
        out.append((texts, finish))
    return out


def test_queued_stream_gives_the_same_chunks_as_the_in_process_one(pg_url, tmp_path):
    with ModelServer() as model:
        model.script(answer)
        yaml = agent_yaml(tmp_path, model.url)
        served, base = serve(yaml)
        try:
            local = streamed(base)
        finally:
            served.terminate()
            served.wait(30)
        workers = Workers(pg_url, [yaml])
        served = None
        try:
            workers.start(2)
            served, base = serve(yaml, "--db", pg_url)
            queued = streamed(base)
        finally:
            if served is not None:
                served.terminate()
                served.wait(30)
            workers.stop_all()
    plain, tools = local
    assert "".join(plain[0]) == "one two three four five six seven" and len(plain[0]) > 2, plain
    assert "".join(tools[0]) == "Looking at the folder now.The folder holds one file, notes.txt, and nothing else.", tools
    assert plain[1] == tools[1] == "stop"
    assert queued == local  # the same deltas, in the same order, and the same finish_reason


WORDS = " ".join(f"w{i}" for i in range(24))


def test_a_worker_killed_mid_stream_leaves_the_client_one_whole_reply(pg_url, tmp_path):
    """The turn is recovered by the other worker; the model call that was cut short runs again
    and only the text the client has not had yet is sent: the stream is the reply, once."""
    import psycopg

    with ModelServer() as model:
        model.script(lambda request: Reply.text(WORDS, chunk_delay=0.15))
        yaml = agent_yaml(tmp_path, model.url)
        workers = Workers(pg_url, [yaml])
        served = None
        try:
            procs = workers.start(2)
            served, base = serve(yaml, "--db", pg_url)
            strip = httpx.Client(event_hooks={"request": [lambda r: r.headers.pop("Authorization", None)]}, timeout=90)
            client = openai.OpenAI(base_url=base + "/v1", api_key="unused", http_client=strip)
            texts, finish, killed = [], None, None
            for chunk in client.chat.completions.create(model="streamer", messages=[{"role": "user", "content": "go"}], stream=True):
                for c in chunk.choices:
                    if c.delta.content:
                        texts.append(c.delta.content)
                    finish = c.finish_reason or finish
                if killed is None and len(texts) >= 3:
                    with psycopg.connect(pg_url) as conn:
                        executor = conn.execute("SELECT executor_id FROM dbos.workflow_status WHERE status = 'PENDING'").fetchone()[0]
                    killed = next(p for p in procs if f"-{p.pid}-" in executor)
                    killed.kill()
        finally:
            if served is not None:
                served.terminate()
                served.wait(30)
            workers.stop_all()
    assert killed is not None and killed.poll() is not None
    assert "".join(texts) == WORDS and finish == "stop", texts
    assert len(model.requests) == 2  # the cut call ran again on the other worker
