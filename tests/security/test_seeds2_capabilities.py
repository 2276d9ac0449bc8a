"""Issue 27 item 14: capability flags per model. A model without native tool calling — by litellm's
model table (``gpt-5-chat``: ``supports_function_calling: false``) or by the model mapping
(``supports_tools: false``) — is sent no ``tools`` field but the documented text protocol
(clawkit.tooltext), and its ``<tool_call>`` blocks run as tool calls. The real CLI with every
builtin loaded against the loopback model server, which records what the model was sent."""

from __future__ import annotations

import json
import textwrap

import pytest

from clawkit.capabilities import model_capabilities
from clawkit.config import ModelConfig
from clawkit.testing.server import Reply

from .conftest import run_cli

pytestmark = pytest.mark.e2e

CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>'


def _agent(ws, server, model: str, extra: str = "") -> None:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "notes.txt").write_text("the secret word is marmalade\n")
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: target
        model: {{name: {model}, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 30{extra}}}
        tools: [read_file]
        """))


@pytest.mark.parametrize("model,extra", [("openai/gpt-5-chat", ""), ("openai/test", ", supports_tools: false")],
                         ids=["litellm-table", "config"])
def test_a_model_without_tool_calling_gets_the_text_protocol(tmp_path, server, audit_home, model, extra):
    ws = tmp_path / "ws"
    _agent(ws, server, model, extra)
    run = run_cli(ws, server, audit_home, "what is the secret word in notes.txt?",
                  "Let me look.\n" + CALL, "The word is marmalade.")
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    first, second = run.requests
    assert "tools" not in first.body  # no native tools field for a model that refuses it
    system = first.messages[0]["content"]
    assert first.messages[0]["role"] == "system" and "## Tool calls (text protocol)" in system
    assert "`read_file`" in system and '"path"' in system  # the tool and its parameters, in the prompt
    assert [c["name"] for c in run.result["tool_calls"]] == ["read_file"]
    # the call and its result come back as text (no tool role, no tool_calls field)
    assert all(m["role"] in ("system", "user", "assistant") and "tool_calls" not in m for m in second.messages)
    assistant = [m for m in second.messages if m["role"] == "assistant"][-1]["content"]
    assert '"name": "read_file"' in assistant
    result = second.messages[-1]
    assert result["role"] == "user" and result["content"].startswith('<tool_result name="read_file"')
    assert "marmalade" in result["content"]
    assert run.result["reply"] == "The word is marmalade."


def test_a_model_with_tool_calling_keeps_native_tools(tmp_path, server, audit_home):
    ws = tmp_path / "ws"
    _agent(ws, server, "openai/gpt-4o-mini")
    run = run_cli(ws, server, audit_home, "read notes.txt",
                  Reply.tool_calls([("read_file", {"path": "notes.txt"})]), "done")
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert [t["function"]["name"] for t in run.requests[0].tools] == ["read_file"]
    assert "text protocol" not in json.dumps(run.requests[0].body)


def test_capability_flags_from_table_and_config():
    table = model_capabilities(ModelConfig(name="openai/gpt-4o-mini"))
    assert (table.supports_tools, table.supports_vision, table.supports_json_schema) == (True, True, True)
    assert table.source == "litellm table"
    assert model_capabilities(ModelConfig(name="openai/gpt-5-chat")).supports_tools is False
    configured = model_capabilities(ModelConfig(name="openai/gpt-4o-mini", supports_vision=False))
    assert configured.supports_vision is False and configured.supports_tools is True
    unknown = model_capabilities(ModelConfig(name="my-local-model", api_base="http://127.0.0.1:1/v1"))
    assert (unknown.supports_tools, unknown.supports_vision, unknown.supports_json_schema) == (True, False, False)


def test_a_server_refusing_native_tools_is_answered_with_the_text_protocol(tmp_path, server, audit_home):
    """A model the table does not know (assumed to call tools) whose server answers 400 "does not
    support tools" (Ollama's wording): the call is retried through the text protocol, not a failed turn."""
    from clawkit.testing.server import Fault

    ws = tmp_path / "ws"
    _agent(ws, server, "local-gemma")
    answers = iter(["Let me look.\n" + CALL, "The word is marmalade."])

    def model(request):
        if request.body.get("tools"):
            return Fault.status(400, "registry.ollama.ai/library/local-gemma:latest does not support tools")
        return next(answers)

    run = run_cli(ws, server, audit_home, "what is the secret word in notes.txt?", model)
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert [bool(r.body.get("tools")) for r in run.requests] == [True, False, False]  # refused once, then text
    assert [c["name"] for c in run.result["tool_calls"]] == ["read_file"]
    assert "marmalade" in run.requests[-1].messages[-1]["content"]
    assert run.result["reply"] == "The word is marmalade."
