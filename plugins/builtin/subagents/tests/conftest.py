"""Shared pieces for the sub-agent tests: a model server scripted per model name, and
``clawkit run`` in a subprocess with every installed plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from clawkit.testing.server import Fault


class ByModel:
    """A ``model_server`` responder: each model name (``parent``, ``researcher``…) has its own script.

    Items are consumed in order per model; a callable item is called with the request.
    ``log`` records (model, start monotonic) of every request."""

    def __init__(self, **scripts: list[Any]):
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.lock = threading.Lock()
        self.seen: list[str] = []

    def __call__(self, request: Any) -> Any:
        model = str((request.body or {}).get("model"))
        with self.lock:
            self.seen.append(model)
            items = self.scripts.get(model)
            item = items.pop(0) if items else None
        if item is None:
            return Fault.status(400, f"ByModel: no scripted reply left for model {model!r}")
        return item(request) if callable(item) else item


def model_block(server: Any, name: str, **extra: Any) -> str:
    fields = {"name": f"openai/{name}", "api_base": server.url, "api_key": "sk-test", "max_retries": 0, "timeout": 30, **extra}
    return json.dumps(fields)


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("CLAWKIT_LOAD_PLUGINS", None)  # every installed plugin: the full install
    e["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return e


def clawkit(cwd: Path, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, env=env(), capture_output=True, text=True,
                         timeout=timeout)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def run_json(cwd: Path, agent: str, message: str, *extra: str) -> dict[str, Any]:
    out = clawkit(cwd, "run", agent, message, "--json", *extra)
    return json.loads(out.stdout)


def requests_for(server: Any, model: str) -> list[Any]:
    return [r for r in server.requests if (r.body or {}).get("model") == model]


def tool_names(request: Any) -> list[str]:
    return sorted(t["function"]["name"] for t in request.tools)


@pytest.fixture
def store_at():
    opened = []

    def open_store(path: Path):
        from clawkit.sessions import SessionStore

        s = SessionStore(path)
        opened.append(s)
        return s

    yield open_store
    for s in opened:
        s.close()


@pytest.fixture
def kit():
    """The helpers above, for test modules (importlib mode: tests do not import conftest)."""
    from types import SimpleNamespace

    return SimpleNamespace(ByModel=ByModel, model_block=model_block, write=write, clawkit=clawkit, run_json=run_json,
                           requests_for=requests_for, tool_names=tool_names, env=env)
