"""Shared helpers for the clawkit-policy tests."""

from __future__ import annotations

import pytest


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
