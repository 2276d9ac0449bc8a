"""Tests for clawkit-hello, written the way a third-party author would: with the
fixtures clawkit's test kit provides (make_agent, model_server)."""

from __future__ import annotations

import clawkit_hello
from clawkit.testing import ScriptedReply, call
from clawkit.testing.server import Reply


def test_greet_tool_and_signature(make_agent):
    agent = make_agent(
        [ScriptedReply.calls(call("greet", name="Ada", excited=True)), "Done."],
        plugins=(clawkit_hello,),
        tools=["greet"],
        plugin_config={"hello": {"greeting": "Howdy", "signature": "-- hello bot"}},
    )
    result = agent.run("I'm Ada")
    assert agent.provider.requests[1].messages[-1].content == "Howdy, Ada!"
    assert result.reply == "Done.\n-- hello bot"
    assert "## Manners" in agent.provider.requests[0].system


def test_through_real_http(make_agent, model_server):
    from clawkit.config import ModelConfig
    from clawkit_litellm.provider import LitellmProvider

    model_server.script(Reply.tool_calls([("greet", {"name": "Bo"})]), "Greeted Bo.")
    provider = LitellmProvider(ModelConfig(name="openai/test", api_base=model_server.url, api_key="x"))
    agent = make_agent(provider=provider, model="openai/test", plugins=(clawkit_hello,), tools=["greet"])
    assert agent.run("hi, I'm Bo").reply == "Greeted Bo."
    tool_msg = [m for m in model_server.requests[1].messages if m["role"] == "tool"][0]
    assert tool_msg["content"] == "Hello, Bo."


def test_command(capsys):
    from clawkit.cli import main

    assert main(["hello", "Cy"]) == 0
    assert capsys.readouterr().out == "Hello, Cy!\n"
