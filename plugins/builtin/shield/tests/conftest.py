"""Fixtures for the shield tests: small stand-ins for the standard tools (same names
and risk levels as clawkit-tools, so these tests do not depend on that plugin), a
loopback web server for ``web_fetch``, and a helper to build agents that talk to
the ``model_server`` through the real litellm provider."""

from __future__ import annotations

import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from clawkit import hookimpl


class StandardTools:
    """read_file / write_file / edit_file / list_dir (safe/guarded), shell_exec (unsafe), web_fetch (safe)."""

    name = "test-standard-tools"

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    @hookimpl
    def register_tools(self, register, agent):
        ws = Path(agent.workspace)
        ran = self.ran

        def read_file(path: str) -> str:
            """Read a text file.

            Args:
                path: file path, relative to the workspace
            """
            ran.append(("read_file", {"path": path}))
            return (ws / path).read_text()

        def write_file(path: str, content: str) -> str:
            """Write a text file.

            Args:
                path: file path, relative to the workspace
                content: the new content
            """
            ran.append(("write_file", {"path": path}))
            (ws / path).write_text(content)
            return f"wrote {len(content)} characters to {path}"

        def edit_file(path: str, old: str, new: str) -> str:
            """Replace an exact string in a file.

            Args:
                path: file path
                old: text to replace
                new: replacement
            """
            ran.append(("edit_file", {"path": path}))
            p = ws / path
            p.write_text(p.read_text().replace(old, new, 1))
            return "edited"

        def list_dir(path: str = ".") -> str:
            """List a directory.

            Args:
                path: directory
            """
            ran.append(("list_dir", {"path": path}))
            return "\n".join(sorted(x.name for x in (ws / path).iterdir()))

        def shell_exec(command: str, timeout: int = 10) -> str:
            """Run a shell command in the workspace.

            Args:
                command: the command line
                timeout: seconds
            """
            ran.append(("shell_exec", {"command": command}))
            out = subprocess.run(command, shell=True, cwd=ws, capture_output=True, text=True, timeout=timeout)
            return out.stdout + out.stderr

        def web_fetch(url: str) -> str:
            """Fetch a web page as text.

            Args:
                url: http(s) URL
            """
            ran.append(("web_fetch", {"url": url}))
            with urllib.request.urlopen(url, timeout=5) as resp:
                return resp.read().decode()

        register(read_file, risk="safe")
        register(write_file, risk="guarded")
        register(edit_file, risk="guarded")
        register(list_dir, risk="safe")
        register(shell_exec, risk="unsafe")
        register(web_fetch, risk="safe")

    def names(self) -> list[str]:
        return [n for n, _ in self.ran]


ALL_TOOLS = ["read_file", "write_file", "edit_file", "list_dir", "shell_exec", "web_fetch"]


@pytest.fixture
def tools() -> StandardTools:
    return StandardTools()


class _Pages(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        body = self.server.pages.get(self.path)  # type: ignore[attr-defined]
        data = (body if body is not None else "not found").encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def web():
    """A loopback web server: ``web.pages["/path"] = "html"``, ``web.url("/path")``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    httpd.daemon_threads = True
    httpd.pages = {}  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()

    class Web:
        pages = httpd.pages  # type: ignore[attr-defined]

        @staticmethod
        def url(path: str) -> str:
            return f"http://127.0.0.1:{httpd.server_address[1]}{path}"

    yield Web()
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def live_agent(http_agent):
    """``live_agent(model_server, plugins=..., plugin_config=..., approver=None, **config)``: the kit's
    ``http_agent`` — the loopback server, reached through the real clawkit-litellm provider."""

    def factory(server, *, plugins=(), plugin_config=None, approver=None, **config):
        config.setdefault("model", {"name": "openai/test-model", "api_base": server.url, "api_key": "sk-test", "max_retries": 0})
        return http_agent(plugins=plugins, plugin_config=plugin_config, approver=approver, **config)

    return factory


@pytest.fixture
def make_agent(make_agent):
    """The kit's ``make_agent`` (the full install); when this suite's stand-in tools are among the
    plugins, the real clawkit-tools is turned off, as a user's ``plugins: {tools: {enabled: false}}``
    would (the stand-ins take the same tool names)."""

    def factory(*args, plugins=(), plugin_config=None, **kw):
        if any(isinstance(p, StandardTools) for p in plugins):
            plugin_config = {"tools": {"enabled": False}, **(plugin_config or {})}
        return make_agent(*args, plugins=plugins, plugin_config=plugin_config, **kw)

    return factory
