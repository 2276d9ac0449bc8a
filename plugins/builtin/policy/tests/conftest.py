"""Shared helpers for the clawkit-policy tests."""

from __future__ import annotations

import pytest


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
