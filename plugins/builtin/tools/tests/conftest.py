"""Shared helpers for the clawkit-tools tests."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest

from clawkit_tools import ToolsConfig


def fake_ctx(workspace, granted: dict | None = None, **config: Any) -> SimpleNamespace:
    """The parts of a TurnContext the tools read: workspace, turn state, plugin config."""
    cfg = ToolsConfig(**config)
    return SimpleNamespace(workspace=workspace, state={"granted": granted or {}}, plugin_config=lambda name: cfg)


@pytest.fixture
def ctx_for():
    return fake_ctx


class _Web(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def do_GET(self):
        srv = self.server
        srv.seen.append({"path": self.path, "host": self.headers.get("Host")})
        route = srv.routes.get(self.path.split("?")[0])
        if route is None:
            body, status, headers = b"not found", 404, {}
        else:
            status, headers, body = route() if callable(route) else route
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def web():
    """A loopback web server: ``web.routes[path] = (status, headers, body)``; ``web.url``; ``web.seen``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Web)
    httpd.daemon_threads = True
    httpd.routes = {}
    httpd.seen = []
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.port = httpd.server_address[1]
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def build_agent(workspace):
    """``build_agent(script_or_provider, plugins=..., sections={"policy": {...}}, **config)``.

    Like the kit's ``make_agent``, but plugin sections (``plugins:`` in the YAML) can be given.
    """
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager
    from clawkit.testing import ScriptedProvider

    made = []

    def factory(script=(), *, plugins=(), provider=None, approver=None, sections=None, **config):
        data = {"name": "test-agent", "model": "scripted/test", "workspace": str(workspace), **config}
        if sections:
            data["plugins"] = sections
        pm = get_plugin_manager(extra=plugins, load_entry_points=False)
        cfg = validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm)))
        agent = Agent(cfg, pm=pm, provider=provider or ScriptedProvider(script), approver=approver)
        made.append(agent)
        return agent

    yield factory
    for a in made:
        a.store.close()


@pytest.fixture
def llm_agent(build_agent, model_server):
    """``llm_agent(*script, plugins=..., sections=..., **config)``: an agent whose model is the
    loopback model_server, reached through the real litellm provider."""
    from clawkit.config import ModelConfig
    from clawkit_litellm import LitellmProvider

    def factory(*script, **kw):
        model_server.script(*script)
        mc = ModelConfig(name="openai/test-model", api_base=model_server.url, timeout=10, max_retries=0)
        kw.setdefault("model", {"name": "openai/test-model", "api_base": model_server.url})
        return build_agent(provider=LitellmProvider(mc), **kw)

    return factory
