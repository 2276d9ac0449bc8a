"""Issue 26 item 1, typed outputs, end to end: the real CLI (``clawkit run … --schema``, YAML
``output:``) with every builtin plugin loaded, against the loopback model server in both wire
formats — OpenAI-compatible (native ``response_format``, and the forced final tool for a model
without JSON schemas) and Anthropic (a forced ``final_answer`` tool). The cases run in one
interpreter (tests/security/cli_batch.py); the scripted model answers by the ``[case NAME]`` in
the session's user message, and the tests assert on what the model server received."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

BATCH = Path(__file__).parent / "security" / "cli_batch.py"
WIRES = {
    # name: (model mapping extras, how the schema travels)
    "openai": ("name: openai/gpt-4o-mini", "native"),  # litellm's table: supports_response_schema
    "openai-tool": ("name: openai/gpt-4o-mini, supports_json_schema: false", "tool"),
    "anthropic": ("name: anthropic/claude-3-5-haiku-20241022", "tool"),
}
SCHEMA = "name str: the person's name, age int, tags list"


class Cases:
    """Scripted model for many sessions at once (the n-th answer in a case's session is its n-th reply)."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Any]] = {}
        self.requests: dict[str, list[Any]] = {}

    def add(self, name: str, *replies: Any) -> str:
        self.scripts[name] = list(replies)
        return f"[case {name}]"

    def __call__(self, request: Any) -> Any:
        messages = request.messages
        found = None
        for i, msg in enumerate(messages):
            if msg.get("role") == "user":
                m = re.search(r"\[case ([\w.-]+)\]", json.dumps(msg.get("content")))
                if m:
                    found = (i, m.group(1))
        if found is None or found[1] not in self.scripts:
            return "no such case"
        start, name = found
        self.requests.setdefault(name, []).append(request)
        step = sum(1 for msg in messages[start:] if msg.get("role") == "assistant")
        script = self.scripts[name]
        return script[step] if step < len(script) else "done"


def final(wire: str, value: Any) -> Any:
    """The model's typed answer as each wire form carries it."""
    if WIRES[wire][1] == "native":
        return json.dumps(value)
    return Reply.tool_calls([("final_answer", value)])


def agent_yaml(ws: Path, server: ModelServer, wire: str, extra: str = "", name: str = "agent.yaml") -> Path:
    ws.mkdir(parents=True, exist_ok=True)
    path = ws / name
    path.write_text(textwrap.dedent(f"""\
        name: typed
        model: {{{WIRES[wire][0]}, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 30}}
        tools: [read_file]
        """) + textwrap.dedent(extra))
    return path


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Every case of every wire, run once; returns (outputs by case, requests by case)."""
    tmp = tmp_path_factory.mktemp("typed")
    cases = Cases()
    jobs: list[dict[str, Any]] = []
    with ModelServer() as server:
        server.script(cases)
        for wire in WIRES:
            ws = tmp / wire
            agent_yaml(ws, server, wire)
            (ws / "people.txt").write_text("Ada is 36 and likes maths.\n")
            (ws / "schema.json").write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}},
                                                       "required": ["n"]}))
            agent_yaml(ws, server, wire, """\
                output:
                  schema: {type: object, properties: {n: {type: integer, minimum: 10}}, required: [n]}
                  retries: 1
                """, name="strict.yaml")
            agent_yaml(ws, server, wire, f"""\
                subagents:
                  counter:
                    agent: {{name: counter, model: {{{WIRES[wire][0]}, api_base: "{server.url}", api_key: sk-test, max_retries: 0}}}}
                    description: counts things
                    output_schema: {{type: object, properties: {{count: {{type: integer}}}}, required: [count]}}
                """, name="lead.yaml")
            agent_yaml(ws, server, wire, f"""\
                subagents:
                  counter:
                    agent: {{name: counter, model: {{{WIRES[wire][0]}, api_base: "{server.url}", api_key: sk-test, max_retries: 0}}, output: {{schema: {{type: object, properties: {{count: {{type: integer}}}}, required: [count]}}}}}}
                    description: counts things
                """, name="lead2.yaml")

            def job(case: str, argv: list[str]) -> None:
                jobs.append({"name": f"{wire}:{case}", "cwd": str(ws), "argv": argv})

            m = cases.add(f"{wire}-retry", final(wire, {"name": "Ada", "age": "thirty-six", "tags": []}),
                          final(wire, {"name": "Ada", "age": 36, "tags": ["maths"]}))
            job("retry", ["run", "agent.yaml", f"{m} who is in people.txt?", "--schema", SCHEMA])
            m = cases.add(f"{wire}-fail", final(wire, {"n": 1}), final(wire, {"n": "two"}))
            job("fail", ["run", "strict.yaml", f"{m} pick a number"])
            m = cases.add(f"{wire}-failjson", final(wire, {"n": 1}), final(wire, {"n": 2}))
            job("failjson", ["run", "strict.yaml", f"{m} pick a number", "--json"])
            m = cases.add(f"{wire}-tool", Reply.tool_calls([("read_file", {"path": "people.txt"})]),
                          final(wire, {"name": "Ada", "age": 36, "tags": ["maths"]}))
            job("tool", ["run", "agent.yaml", f"{m} read people.txt", "--schema", SCHEMA, "--json"])
            m = cases.add(f"{wire}-first", final(wire, {"n": 7}))
            job("first", ["run", "agent.yaml", f"{m} a number", "--schema", "schema.json"])
            m = cases.add(f"{wire}-sub", Reply.tool_calls([("agent_counter", {"task": f"[case {wire}-child] count"})]),
                          "There are 3.")
            cases.add(f"{wire}-child", final(wire, {"count": "three"}), final(wire, {"count": 3}))
            job("sub", ["run", "lead.yaml", f"{m} how many?", "--json"])
            m = cases.add(f"{wire}-sub2", Reply.tool_calls([("agent_counter", {"task": f"[case {wire}-child2] count"})]),
                          "There are 4.")
            cases.add(f"{wire}-child2", final(wire, {"count": 4}))
            job("sub2", ["run", "lead2.yaml", f"{m} how many?", "--json"])
        (tmp / "jobs.json").write_text(json.dumps(jobs))
        env = dict(os.environ)
        env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install: every builtin plugin
        env.update(CLAWKIT_AUDIT_HOME=str(tmp / "audit"), LITELLM_LOCAL_MODEL_COST_MAP="True")
        proc = subprocess.run([sys.executable, str(BATCH), str(tmp / "jobs.json"), str(tmp / "out.json")], env=env,
                              capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-3000:]
    out = {item["name"]: item for item in json.loads((tmp / "out.json").read_text())}
    return out, cases.requests


def _sent(wire: str, request: Any) -> str:
    """How the schema reached the model in ``request``: native / tool, checked in the body."""
    body = request.body
    if "response_format" in body:
        assert body["response_format"]["type"] == "json_schema"
        assert not any(t.get("name", t.get("function", {}).get("name")) == "final_answer" for t in body.get("tools", []))
        return "native"
    names = [t.get("name") or t["function"]["name"] for t in body.get("tools", [])]
    assert names[-1] == "final_answer", names
    return "tool"


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_failed_answer_goes_back_with_its_errors_and_the_retry_is_the_output(batch, wire):
    out, requests = batch
    run = out[f"{wire}:retry"]
    assert run["rc"] == 0, run["stderr"][-2000:]
    assert json.loads(run["stdout"]) == {"name": "Ada", "age": 36, "tags": ["maths"]}
    assert run["stdout"].strip().startswith("{") and run["stdout"].count("\n") == 1  # exactly the JSON value
    first, second = requests[f"{wire}-retry"]
    assert _sent(wire, first) == WIRES[wire][1] and _sent(wire, second) == WIRES[wire][1]
    if WIRES[wire][1] == "native":
        schema = first.body["response_format"]["json_schema"]
        assert schema["strict"] is True and schema["schema"]["required"] == ["name", "age", "tags"]
        assert schema["schema"]["properties"]["name"]["description"] == "the person's name"
        assert first.body["tools"]  # the agent's tools are still offered next to the response_format
    elif wire == "anthropic":
        # tools offered with the final one: any tool may be called, but one must be
        assert first.body["tool_choice"] == {"type": "any"}
    else:
        assert first.body["tool_choice"] == "required"
    fed_back = json.dumps(second.body["messages"][-1])
    assert "does not match the required schema" in fed_back and "age" in fed_back and "integer" in fed_back


@pytest.mark.parametrize("wire", list(WIRES))
def test_when_every_retry_fails_the_run_exits_6_with_the_errors(batch, wire):
    out, requests = batch
    run = out[f"{wire}:fail"]
    assert run["rc"] == 6, (run["rc"], run["stderr"][-2000:])
    assert run["stdout"] == ""  # nothing that looks like an answer
    assert "does not match the output schema after 2 attempt(s)" in run["stderr"]
    assert "n: 'two' is not of type 'integer'" in run["stderr"]
    assert len(requests[f"{wire}-fail"]) == 2  # output.retries: 1
    assert "1 is less than the minimum of 10" in json.dumps(requests[f"{wire}-fail"][1].body["messages"][-1])


@pytest.mark.parametrize("wire", list(WIRES))
def test_with_json_a_failed_typed_run_is_data_too(batch, wire):
    out, _ = batch
    run = out[f"{wire}:failjson"]
    assert run["rc"] == 6
    result = json.loads(run["stdout"])
    assert result["stop_reason"] == "output_invalid" and result["output"] is None and result["attempts"] == 2
    assert result["output_errors"] == ["n: 2 is less than the minimum of 10"]


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_tool_call_before_the_typed_answer(batch, wire):
    out, requests = batch
    run = out[f"{wire}:tool"]
    assert run["rc"] == 0, run["stderr"][-2000:]
    result = json.loads(run["stdout"])
    assert result["output"] == {"name": "Ada", "age": 36, "tags": ["maths"]}
    assert [c["name"] for c in result["tool_calls"]] == ["read_file"]
    first, second = requests[f"{wire}-tool"]
    assert "read_file" in json.dumps(first.body["tools"])
    assert "Ada is 36" in json.dumps(second.body["messages"])  # the tool ran and its result reached the model
    assert _sent(wire, second) == WIRES[wire][1]


@pytest.mark.parametrize("wire", list(WIRES))
def test_an_answer_valid_the_first_time_costs_no_extra_model_call(batch, wire):
    out, requests = batch
    run = out[f"{wire}:first"]
    assert run["rc"] == 0, run["stderr"][-2000:]
    assert run["stdout"] == '{"n": 7}\n'  # --schema FILE
    assert len(requests[f"{wire}-first"]) == 1


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_sub_agent_with_an_output_schema_hands_the_parent_validated_json(batch, wire):
    out, requests = batch
    run = out[f"{wire}:sub"]
    assert run["rc"] == 0, run["stderr"][-2000:]
    child_first, child_retry = requests[f"{wire}-child"]
    assert _sent(wire, child_first) == WIRES[wire][1]
    assert "does not match the required schema" in json.dumps(child_retry.body["messages"][-1])
    lead_second = requests[f"{wire}-sub"][1]
    delivered = json.dumps(lead_second.body["messages"][-1])
    assert '{\\"count\\": 3}' in delivered and "subagent_result" in delivered


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_child_whose_own_file_declares_output_is_typed(batch, wire):
    out, requests = batch
    run = out[f"{wire}:sub2"]
    assert run["rc"] == 0, run["stderr"][-2000:]
    (child,) = requests[f"{wire}-child2"]
    assert _sent(wire, child) == WIRES[wire][1]
    assert '{\\"count\\": 4}' in json.dumps(requests[f"{wire}-sub2"][1].body["messages"][-1])
