"""Issue 26 item 1: ``serve`` passes a client's ``response_format`` through as a typed turn. The
official ``openai`` client's ``chat.completions.parse(response_format=PydanticModel)`` works end to
end against an agent on the OpenAI wire (the schema sent natively, strict) and on the Anthropic
wire (a forced ``final_answer`` tool); an answer that fails validation goes back to the model;
``json_object`` works too; an answer that never validates is a 502 ``output_invalid``."""

from __future__ import annotations

import json

import openai
import pytest
from pydantic import BaseModel

from clawkit.testing.server import ModelServer, Reply
from clawkit_serve.testing import make_key, serve, write_agent

pytestmark = pytest.mark.e2e


class Person(BaseModel):
    name: str
    age: int


@pytest.fixture(scope="module")
def model():
    with ModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("typed-serve")
    native = write_agent(tmp, model, "native", tools=[])
    data = json.loads(native.read_text())
    data["model"]["name"] = "openai/gpt-4o-mini"  # litellm's table: takes JSON schemas
    native.write_text(json.dumps(data))
    claude = write_agent(tmp, model, "claude", tools=[])
    data = json.loads(claude.read_text())
    data["model"]["name"] = "anthropic/claude-3-5-haiku-20241022"
    claude.write_text(json.dumps(data))
    db = tmp / "server.db"
    key = make_key(db, "typed")
    served = serve([native, claude], db)
    try:
        yield openai.OpenAI(base_url=served.url + "/v1", api_key=key, max_retries=0, timeout=60)
    finally:
        served.stop()


def test_parse_with_a_pydantic_model_on_the_openai_wire(site, model):
    model.reset()
    model.script('{"name": "Ada", "age": "thirty-six"}', '{"name": "Ada", "age": 36}')
    done = site.chat.completions.parse(model="native", messages=[{"role": "user", "content": "who?"}],
                                       response_format=Person)
    assert done.choices[0].message.parsed == Person(name="Ada", age=36)
    first, second = model.requests
    rf = first.body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == "Person" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["schema"]["required"] == ["name", "age"]
    assert "age" in json.dumps(second.body["messages"][-1])  # the validation errors went back to the model


def test_parse_on_the_anthropic_wire_forces_the_final_tool(site, model):
    model.reset()
    model.script(Reply.tool_calls([("final_answer", {"name": "Ada", "age": 36})]))
    done = site.chat.completions.parse(model="claude", messages=[{"role": "user", "content": "who?"}],
                                       response_format=Person)
    assert done.choices[0].message.parsed == Person(name="Ada", age=36)
    (request,) = model.requests
    assert request.body["tool_choice"] == {"type": "tool", "name": "final_answer"}
    assert "response_format" not in request.body  # Anthropic's API has no such field
    tool = request.body["tools"][-1]
    assert tool["name"] == "final_answer" and tool["input_schema"]["required"] == ["name", "age"]


def test_json_object_and_a_streamed_typed_reply(site, model):
    model.reset()
    model.script("not json", '{"ok": true}', '{"name": "Bo", "age": 5}')
    reply = site.chat.completions.create(model="native", messages=[{"role": "user", "content": "json please"}],
                                         response_format={"type": "json_object"})
    assert json.loads(reply.choices[0].message.content) == {"ok": True}
    assert model.requests[0].body["response_format"] == {"type": "json_object"}
    stream = site.chat.completions.create(model="native", messages=[{"role": "user", "content": "who?"}], stream=True,
                                          response_format={"type": "json_schema", "json_schema": {
                                              "name": "p", "schema": Person.model_json_schema()}})
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert Person.model_validate_json(text) == Person(name="Bo", age=5)


def test_an_answer_that_never_validates_is_a_502(site, model):
    model.reset()
    model.script("no", "still no", "never")
    with pytest.raises(openai.APIStatusError) as caught:
        site.chat.completions.create(model="native", messages=[{"role": "user", "content": "who?"}],
                                     response_format={"type": "json_schema", "json_schema": {
                                         "name": "p", "schema": Person.model_json_schema()}})
    assert caught.value.status_code == 502
    assert "output schema after 3 attempt(s)" in str(caught.value) and len(model.requests) == 3
