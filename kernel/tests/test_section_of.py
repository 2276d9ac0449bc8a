"""clawkit.config.section_of: a plugin's section as its model, remembered per agent config."""

from __future__ import annotations

from types import SimpleNamespace

from pydantic import BaseModel

from clawkit.config import section_of


class Hello(BaseModel):
    greeting: str = "hi"


class Other(BaseModel):
    greeting: str = "yo"
    enabled: bool = True


def agent(plugins):
    a = SimpleNamespace(plugins=plugins)
    a.plugin = lambda name: plugins.get(name)
    return a


def test_converts_defaults_and_remembers_per_config_object():
    assert section_of(None, "hello", Hello) == Hello()
    assert section_of(agent({}), "hello", Hello) == Hello()
    assert section_of(agent({"hello": {"greeting": "howdy", "enabled": True}}), "hello", Hello).greeting == "howdy"
    assert section_of(agent({"hello": Other()}), "hello", Hello).greeting == "yo"  # another model: its fields
    validated = Hello(greeting="as is")
    a = agent({"hello": validated})
    assert section_of(a, "hello", Hello) is validated
    first = section_of(agent_dict := agent({"hello": {"greeting": "one"}}), "hello", Hello)
    assert section_of(agent_dict, "hello", Hello) is first  # remembered
    agent_dict.plugins = {"hello": {"greeting": "two"}}  # a new plugins object: read again
    agent_dict.plugin = lambda name: agent_dict.plugins.get(name)
    assert section_of(agent_dict, "hello", Hello).greeting == "two"
