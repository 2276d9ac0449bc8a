"""Typed output through clawkit-litellm (docs/typed-output.md): the schema reaches the server as the
OpenAI ``response_format`` litellm passes on, or as the forced ``final_answer`` tool with
``tool_choice`` in OpenAI's form; the answer is validated and retried. Against the loopback server."""

from __future__ import annotations

import json

from pydantic import BaseModel

from clawkit.config import AgentConfig
from clawkit.loop import Agent
from clawkit.testing.server import ModelServer, Reply


class Person(BaseModel):
    name: str
    age: int


def _agent(server, tmp_path, **extra) -> Agent:
    model = {"name": "openai/gpt-4o-mini", "provider": "litellm", "api_base": server.url, "api_key": "k",
             "max_retries": 0, **extra}
    return Agent(AgentConfig(name="t", workspace=str(tmp_path), model=model), persist=False)


def test_typed_output_through_litellm(tmp_path):
    with ModelServer() as server:
        server.script('{"name": "Ada"}', '{"name": "Ada", "age": 36}',
                      Reply.tool_calls([("final_answer", {"name": "Bo", "age": 5})]))
        with _agent(server, tmp_path) as agent:
            assert agent.run("who?", output_type=Person).output == Person(name="Ada", age=36)
        first, second = server.requests[:2]
        rf = first.body["response_format"]
        assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == "Person" and rf["json_schema"]["strict"]
        assert "age" in json.dumps(second.body["messages"][-1])  # the errors went back
        with _agent(server, tmp_path, supports_json_schema=False) as agent:
            assert agent.run("who?", output_type=Person).output == Person(name="Bo", age=5)
        forced = server.requests[2].body
        assert forced["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}
        assert forced["tools"][-1]["function"]["name"] == "final_answer" and "response_format" not in forced
