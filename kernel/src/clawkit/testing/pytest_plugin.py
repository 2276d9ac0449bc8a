"""pytest11 plugin: fixtures every clawkit plugin author gets by installing clawkit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .scripted import ScriptedProvider

try:  # the HTTP model server
    from .server import model_server  # noqa: F401
except ImportError:  # pragma: no cover - while the server module is being written
    pass


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty agent workspace directory."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def make_agent(workspace: Path):
    """``make_agent(script=[...], tools=[...], plugins=[...], plugin_config={...}, **config)`` → an Agent.

    ``plugins`` are plugin objects/modules to load; ``plugin_config`` is the agent
    YAML's ``plugins:`` mapping (per-plugin sections); ``provider="config"`` uses the
    provider the config's ``model`` names instead of a scripted one. Entry-point plugins are not loaded unless ``load_entry_points=True``; pass plugin
    objects in ``plugins`` (e.g. your plugin module). ``script`` feeds a
    :class:`ScriptedProvider` available as ``agent.provider``.
    """
    from ..config import validate_agent, collect_sections
    from ..hooks import HookRunner
    from ..loop import Agent
    from ..plugins import get_plugin_manager

    agents: list[Agent] = []

    def factory(script: Any = (), *, plugins: tuple = (), plugin_config: dict | None = None, load_entry_points: bool = False, provider: Any = None, approver: Any = None, **config: Any) -> Agent:
        data = {"name": "test-agent", "model": "scripted/test", "workspace": str(workspace), **config}
        if plugin_config:
            data["plugins"] = plugin_config
        pm = get_plugin_manager(extra=plugins, load_entry_points=load_entry_points)
        sections = collect_sections(HookRunner(pm))
        cfg = validate_agent(data, "<test>", {}, sections)
        if provider is None:
            provider = ScriptedProvider(script)
        elif provider == "config":
            provider = None  # the provider the config names, from the plugins' registry
        agent = Agent(cfg, pm=pm, provider=provider, approver=approver)
        agents.append(agent)
        return agent

    yield factory
    for a in agents:
        a.close()


@pytest.fixture
def http_agent(make_agent, model_server):
    """``http_agent(*script, plugins=..., plugin_config=..., **config)`` → an Agent whose model is
    the loopback ``model_server`` (scripted with ``script``), reached over real HTTP through the
    provider plugin ``clawkit-litellm`` (the test is skipped when it is not installed)."""
    litellm_plugin = pytest.importorskip("clawkit_litellm")

    def factory(*script: Any, plugins: tuple = (), **config: Any):
        if script:
            model_server.script(*script)
        config.setdefault(
            "model",
            {"name": "openai/test-model", "api_base": model_server.url, "api_key": "sk-test", "timeout": 10, "max_retries": 0},
        )
        return make_agent(plugins=(litellm_plugin, *plugins), provider="config", **config)

    return factory


def pytest_configure(config: Any) -> None:
    """Keep the audit key and anchors of test runs out of the user's config directory."""
    import os
    import tempfile

    if not os.environ.get("CLAWKIT_AUDIT_HOME"):
        os.environ["CLAWKIT_AUDIT_HOME"] = tempfile.mkdtemp(prefix="clawkit-audit-")
