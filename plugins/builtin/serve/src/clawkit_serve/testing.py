"""Test helpers for the server: a loopback model responder that tells sessions apart, agent
files pointing at it, and the real app on uvicorn in a thread (127.0.0.1, a free port)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from clawkit.testing.server import ModelServer, Reply


def respond(request) -> Any:
    """``say: X`` → X; ``run: CMD`` → a shell_exec call, ``call: TOOL {args}`` → that call, each then
    ``done: <result>``; else an echo."""
    msgs = request.messages
    last = msgs[-1] if msgs else {}
    if last.get("role") == "tool":
        content = last.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        return Reply.text(f"done: {text.strip()[:200]}")
    content = last.get("content")
    if isinstance(content, list):  # content parts (attachments): the first text part is the command
        content = next((p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"), "")
    text = content if isinstance(content, str) else ""
    if text.startswith("run: "):
        return Reply.tool_calls([("shell_exec", {"command": text[5:]})])
    if text.startswith("call: "):  # call: TOOL {json arguments}
        name, _, args = text[6:].partition(" ")
        return Reply.tool_calls([(name, json.loads(args or "{}"))])
    if text.startswith("say: "):
        return Reply.text(text[5:])
    return Reply.text(f"echo {text}")


def write_agent(tmp: Path, model: ModelServer, name: str = "helper", tools: list[str] | None = None, **extra: Any) -> Path:
    ws = tmp / f"ws-{name}"
    ws.mkdir(parents=True, exist_ok=True)
    data = {
        "name": name,
        "model": {"name": "openai/test-model", "api_base": model.url, "api_key": "sk-test", "timeout": 20, "max_retries": 0},
        "instructions": "You help.",
        "tools": tools if tools is not None else ["shell_exec"],
        "workspace": str(ws),
        **extra,
    }
    path = tmp / f"{name}.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")  # JSON is YAML
    return path


class Served:
    """The app on uvicorn in a thread, on 127.0.0.1 and a free port."""

    def __init__(self, app: Any):
        from .app import uvicorn_server

        self.app = app
        self.server = uvicorn_server(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self.thread = threading.Thread(target=self.server.run, name="clawkit-serve-test", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def server_obj(self) -> Any:
        return self.app.state.server

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the server did not stop"


def serve(paths: list[Path], db: Path, **options: Any) -> Served:
    from clawkit_serve.app import ServeOptions, build

    timeout = options.pop("approval_timeout", 3600.0)
    return Served(build([str(p) for p in paths], db, ServeOptions(**options), approval_timeout=timeout))


def make_key(db: Path, name: str = "test", **kw: Any) -> str:
    from clawkit_serve.keys import KeyStore, connect

    conn = connect(db)
    try:
        return KeyStore(conn).create(name, **kw)[0]
    finally:
        conn.close()
