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
def build_agent(make_agent):
    """``build_agent(script_or_provider, plugins=..., sections={"policy": {...}}, **config)``:
    the kit's ``make_agent`` with this suite's name for plugin sections."""

    def factory(script=(), *, sections=None, **kw):
        return make_agent(script, plugin_config=sections, **kw)

    return factory


@pytest.fixture
def llm_agent(http_agent):
    """``llm_agent(*script, plugins=..., sections=..., **config)``: the kit's ``http_agent`` (the
    loopback model_server through the real litellm provider)."""

    def factory(*script, sections=None, **kw):
        return http_agent(*script, plugin_config=sections, **kw)

    return factory
