"""Typed outputs from Python and the pieces the CLI builds on: ``Agent.run(output_type=…)`` with a
pydantic model, a non-object type (wrapped on the wire) and a JSON Schema, on the OpenAI and the
Anthropic wire against the loopback model server; the concise schema form; bad schemas named as
errors (exit 2); and the runnable example of docs/typed-output.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing_extensions import TypedDict

import pytest
from pydantic import BaseModel

from clawkit.config import AgentConfig
from clawkit.loop import Agent
from clawkit.output import OutputSpec, OutputValidationError, concise_schema, schema_from_text
from clawkit.testing.server import ModelServer, Reply

ROOT = Path(__file__).resolve().parents[1]


class Person(BaseModel):
    name: str
    age: int


class Pair(TypedDict):
    a: int
    b: str


@pytest.fixture(scope="module")
def server():
    with ModelServer() as srv:
        yield srv


def _agent(server, tmp_path, model="openai/gpt-4o-mini", **extra) -> Agent:
    cfg = AgentConfig(name="t", workspace=str(tmp_path), model={"name": model, "api_base": server.url, "api_key": "k",
                                                                 "max_retries": 0, **extra})
    return Agent(cfg, persist=False)


def test_concise_schema_grammar():
    assert concise_schema("name, age int, bio: a short bio") == {
        "type": "object", "required": ["name", "age", "bio"],
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                       "bio": {"type": "string", "description": "a short bio"}}}
    multi = concise_schema("name str: the name, given first\nscore float\nok bool\ntags list\nns list[int]")
    assert multi["properties"]["name"]["description"] == "the name, given first"  # newlines: commas are text
    assert [multi["properties"][k]["type"] for k in ("score", "ok", "tags", "ns")] == ["number", "boolean", "array", "array"]
    assert multi["properties"]["ns"]["items"] == {"type": "integer"}
    with pytest.raises(ValueError, match="unknown type 'date'"):
        concise_schema("when date")
    assert schema_from_text('{"type": "array"}') == {"type": "array"}
    with pytest.raises(ValueError, match="not valid JSON"):
        schema_from_text('{"type": ')


def test_a_pydantic_model_on_both_wires(server, tmp_path):
    server.reset()
    server.script('{"name": "Ada", "age": "x"}', '{"name": "Ada", "age": 36}')
    with _agent(server, tmp_path) as agent:
        result = agent.run("who?", output_type=Person)
    assert result.output == Person(name="Ada", age=36) and result.typed and result.reply == '{"name":"Ada","age":36}'
    assert len(server.requests) == 2 and server.requests[0].body["response_format"]["json_schema"]["strict"] is True
    assert result.as_json()["output"] == {"name": "Ada", "age": 36}

    server.reset()
    server.script(Reply.tool_calls([("final_answer", {"name": "Bo", "age": 5})]))
    with _agent(server, tmp_path, "anthropic/claude-3-5-haiku-20241022") as agent:
        result = agent.run("who?", output_type=Person)
    assert result.output == Person(name="Bo", age=5)
    assert server.requests[0].body["tool_choice"] == {"type": "tool", "name": "final_answer"}


def test_non_object_types_travel_wrapped_and_come_back_unwrapped(server, tmp_path):
    server.reset()
    server.script('{"response": [1, 2, 3]}', Reply.tool_calls([("final_answer", {"a": 1, "b": "x"})]))
    with _agent(server, tmp_path) as agent:
        assert agent.run("numbers", output_type=list[int]).output == [1, 2, 3]
    wire = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert wire["required"] == ["response"] and wire["properties"]["response"]["type"] == "array"
    with _agent(server, tmp_path, supports_json_schema=False) as agent:
        agent.output_type = Pair  # the agent's default for every run
        assert agent.run("a pair").output == {"a": 1, "b": "x"}
    assert server.requests[1].body["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}


def test_python_gets_output_validation_error_after_the_retries(server, tmp_path):
    server.reset()
    server.script("nope", '{"n": "x"}')
    with _agent(server, tmp_path) as agent:
        with pytest.raises(OutputValidationError) as caught:
            agent.run("n?", output_type=OutputSpec.of({"type": "object", "properties": {"n": {"type": "integer"}},
                                                       "required": ["n"]}, retries=1))
    assert caught.value.attempts == 2 and "n: 'x' is not of type 'integer'" in caught.value.errors


def test_bad_schemas_are_usage_errors_naming_what_is_wrong(tmp_path, capsys, monkeypatch):
    from clawkit.cli import main

    (tmp_path / "agent.yaml").write_text("name: t\nmodel: openai/gpt-4o-mini\noutput:\n  schema_file: missing.json\n")
    (tmp_path / "plain.yaml").write_text("name: t\nmodel: openai/gpt-4o-mini\n")
    (tmp_path / "both.yaml").write_text("name: t\nmodel: openai/gpt-4o-mini\noutput: {retries: 1}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "agent.yaml", "hi"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"agent\.yaml:3: output: .*missing\.json: cannot read the schema file", err), err
    assert main(["run", "plain.yaml", "hi", "--schema", "age years"]) == 2
    assert "--schema: concise schema: 'age years': unknown type 'years'" in capsys.readouterr().err
    assert main(["run", "both.yaml", "hi"]) == 2
    assert "give exactly one of 'schema'" in capsys.readouterr().err


def test_the_docs_example_runs(tmp_path, monkeypatch):
    doc = (ROOT / "docs" / "typed-output.md").read_text()
    block = doc.split("### Try it offline", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/typed-output.md", "exec"), {"__name__": "typed_doc"})


def test_with_extended_thinking_the_final_tool_is_offered_not_forced(server, tmp_path):
    # Anthropic refuses tool_choice any/tool while thinking is on: the tool is offered, the model told
    server.reset()
    server.script('{"name": "Ada", "age": 36}')
    with _agent(server, tmp_path, "anthropic/claude-3-5-haiku-20241022",
                thinking={"type": "enabled", "budget_tokens": 1024}) as agent:
        result = agent.run("who?", output_type=Person)
    assert result.output == Person(name="Ada", age=36)
    body = server.requests[0].body
    assert "tool_choice" not in body and body["tools"][-1]["name"] == "final_answer"
    assert "calling the final_answer tool" in json.dumps(body["system"])


def test_a_failed_final_tool_call_is_stored_as_text_so_a_later_untyped_turn_is_valid(server, tmp_path):
    # Anthropic refuses tool_use blocks in a request without tools: the failed attempt is kept as text
    server.reset()
    server.script(Reply.tool_calls([("final_answer", {"name": "Bo"})]),
                  Reply.tool_calls([("final_answer", {"name": "Bo", "age": 5})]), "plain text now")
    with _agent(server, tmp_path, "anthropic/claude-3-5-haiku-20241022") as agent:
        first = agent.run("who?", output_type=Person)
        assert first.output == Person(name="Bo", age=5)
        later = agent.run("and now in words?", session_id=first.session_id)
    assert later.reply == "plain text now" and not later.typed and later.output is None
    retry, untyped = server.requests[1].body, server.requests[2].body
    assert "calling final_answer" in json.dumps(retry["messages"][-1])
    assert "tools" not in untyped and "tool_use" not in json.dumps(untyped["messages"])
    assert '{\\"name\\": \\"Bo\\"}' in json.dumps(untyped["messages"])  # the failed attempt, as its text
