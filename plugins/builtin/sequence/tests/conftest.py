"""Small stand-ins for the standard file tools (same names and risks as clawkit-tools),
and a helper for agents driven by the loopback ``model_server`` through litellm."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkit import hookimpl


class FileTools:
    name = "test-file-tools"

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

    @hookimpl
    def register_tools(self, register, agent):
        ws = Path(agent.workspace)
        ran = self.ran

        def read_file(path: str) -> str:
            """Read a text file.

            Args:
                path: file path, relative to the workspace
            """
            ran.append(("read_file", path))
            return (ws / path).read_text()

        def write_file(path: str, content: str) -> str:
            """Write a text file.

            Args:
                path: file path
                content: new content
            """
            ran.append(("write_file", path))
            (ws / path).write_text(content)
            return "written"

        def list_dir(path: str = ".") -> str:
            """List a directory.

            Args:
                path: directory
            """
            ran.append(("list_dir", path))
            return "\n".join(sorted(p.name for p in (ws / path).iterdir()))

        def deploy(target: str) -> str:
            """Deploy.

            Args:
                target: environment
            """
            ran.append(("deploy", target))
            return "deployed"

        def run_tests(target: str = "all") -> str:
            """Run the tests.

            Args:
                target: which tests
            """
            ran.append(("run_tests", target))
            return "passed"

        register(read_file, risk="safe")
        register(write_file, risk="guarded")
        register(list_dir, risk="safe")
        register(deploy, risk="unsafe")
        register(run_tests, risk="safe")


TOOLS = ["read_file", "write_file", "list_dir", "deploy", "run_tests"]


@pytest.fixture
def files() -> FileTools:
    return FileTools()


@pytest.fixture
def live_agent(http_agent):
    """``live_agent(model_server, plugins=..., plugin_config=..., approver=None, **config)``: the kit's
    ``http_agent`` — the loopback server, reached through the real clawkit-litellm provider."""

    def factory(server, *, plugins=(), plugin_config=None, approver=None, **config):
        config.setdefault("tools", TOOLS)
        config.setdefault("model", {"name": "openai/test-model", "api_base": server.url, "api_key": "sk-test", "max_retries": 0})
        return http_agent(plugins=plugins, plugin_config=plugin_config, approver=approver, **config)

    return factory


@pytest.fixture
def make_agent(make_agent):
    """The kit's ``make_agent`` (the full install); when this suite's stand-in tools are among the
    plugins, the real clawkit-tools is turned off, as a user's ``plugins: {tools: {enabled: false}}``
    would (the stand-ins take the same tool names)."""

    def factory(*args, plugins=(), plugin_config=None, **kw):
        if any(isinstance(p, FileTools) for p in plugins):
            plugin_config = {"tools": {"enabled": False}, **(plugin_config or {})}
        return make_agent(*args, plugins=plugins, plugin_config=plugin_config, **kw)

    return factory
