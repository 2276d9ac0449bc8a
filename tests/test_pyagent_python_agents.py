"""issue 26 item 5: an agent in plain Python — ``clawkit.Agent(model, instructions=…, tools=[fn])`` with
every installed plugin, against the loopback model server in both wire formats."""

from __future__ import annotations

import asyncio

import pytest

import clawkit
from clawkit.errors import ConfigError
from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

WIPED: list[str] = []


def word_count(text: str, unique: bool = False) -> int:
    """Count the words in a text.

    Args:
        text: the text to count
        unique: count each distinct word once
    """
    words = text.split()
    return len(set(words) if unique else words)


async def shout(text: str) -> str:
    """Upper-case a text (an async tool)."""
    await asyncio.sleep(0)
    return text.upper()


def wipe(folder: str) -> str:
    """Delete everything in a folder."""
    WIPED.append(folder)
    return "wiped"


@pytest.fixture(autouse=True)
def _full_install(monkeypatch):
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)  # every installed plugin, as a user has them


@pytest.fixture(scope="module")
def server():
    with ModelServer() as srv:
        yield srv


def model(server: ModelServer, wire: str) -> dict:
    base = server.url if wire == "openai" else server.base_url
    return {"name": f"{wire}/test", "api_base": base, "api_key": "sk-test", "max_retries": 0}


def tool_schemas(body: dict, wire: str) -> dict:
    if wire == "openai":
        return {t["function"]["name"]: t["function"] for t in body["tools"]}
    return {t["name"]: {"description": t.get("description"), "parameters": t["input_schema"]} for t in body["tools"]}


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_sync_and_async_tools_policy_keyword_and_streaming(server, wire, tmp_path):
    server.reset()
    WIPED.clear()
    server.script(
        Reply.tool_calls([("word_count", {"text": "a b a"}), ("shout", {"text": "hi"})]),
        "3 words; HI.",
        # a YAML key as a keyword takes effect: policy.risk makes wipe unsafe, so (no approver) it is refused
        Reply.tool_calls([("wipe", {"folder": "/"})]),
        "I could not wipe it.",
        # streaming, with a tool call on the way
        Reply.tool_calls([("word_count", {"text": "x y", "unique": True}), ("wipe", {"folder": "/tmp"})]),
        "Two words, streamed.",
    )
    agent = clawkit.Agent(model(server, wire), instructions="Use the tools.", tools=[word_count, shout, wipe, "list_dir"],
                          workspace=str(tmp_path), policy={"risk": {"wipe": "unsafe"}}, limits={"max_tool_rounds": 5})
    try:
        assert {"policy", "memory", "shield", "tools"} <= {name for name, _ in agent.pm.list_name_plugin()}
        first = agent.run("count and shout")
        assert first.reply == "3 words; HI."
        results = {c["name"]: c for c in first.tool_calls}
        assert not results["word_count"]["is_error"] and not results["shout"]["is_error"]
        sent = server.requests[1].messages if wire == "openai" else server.requests[1].json["messages"]
        assert "3" in str(sent) and "HI" in str(sent)
        schemas = tool_schemas(server.requests[0].json, wire)
        assert {"word_count", "shout", "wipe", "list_dir"} <= set(schemas)
        wc = schemas["word_count"]
        assert wc["description"] == "Count the words in a text."
        assert wc["parameters"]["properties"]["text"] == {"type": "string", "description": "the text to count"}
        assert wc["parameters"]["required"] == ["text"]
        assert agent.config.plugin("policy").risk["wipe"].value == "unsafe"

        second = asyncio.run(agent.run_async("wipe the disk", session_id=first.session_id))
        assert second.reply == "I could not wipe it."
        assert second.tool_calls[0]["name"] == "wipe" and second.tool_calls[0]["blocked"]
        assert WIPED == []  # gated like a builtin: the function never ran
        assert agent.tools.tools["wipe"].definition.plugin == "python-tools"

        async def streamed():
            events = [e async for e in agent.stream_events("count again", session_id=first.session_id)]
            return events

        events = asyncio.run(streamed())
        kinds = [e.kind for e in events]
        assert kinds.index("tool_call") < kinds.index("done") and kinds[-1] == "done"
        results = {e.data["name"]: e.data for e in events if e.kind == "tool_result"}
        assert results["word_count"]["content"].strip().endswith("2") or "2" in results["word_count"]["content"]
        assert results["wipe"]["blocked"] and WIPED == []  # refused before it ran: a blocked tool_result
        assert "".join(e.text for e in events if e.kind == "text") == "Two words, streamed."
        assert events[-1].result.reply == "Two words, streamed."
        assert [e.data["name"] for e in events if e.kind == "tool_call"] == ["word_count"]
        assert agent.store.exists(first.session_id)
    finally:
        agent.close()


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_stream_text_chunks(server, wire, tmp_path):
    server.reset()
    server.script("Hello there, streaming friend.")
    agent = clawkit.Agent(model(server, wire), instructions="Greet.", workspace=str(tmp_path), name="greeter")

    async def go():
        return [chunk async for chunk in agent.stream("hi")]

    try:
        chunks = asyncio.run(go())
        assert len(chunks) > 1 and "".join(chunks) == "Hello there, streaming friend."
    finally:
        agent.close()


def test_bad_keywords_name_the_keyword(tmp_path):
    with pytest.raises(ConfigError, match=r"clawkit.Agent\(limts=…\): unknown keyword \(did you mean limits=\?\)"):
        clawkit.Agent("openai/test", limts={"max_tool_rounds": 2})
    with pytest.raises(ConfigError, match=r"clawkit.Agent\(limits=…\): limits.max_tool_rounds: Input should be greater than 0"):
        clawkit.Agent("openai/test", limits={"max_tool_rounds": 0})
    with pytest.raises(ConfigError, match=r"clawkit.Agent\(memory=…\): plugins.memory.bogus: unknown key"):
        clawkit.Agent("openai/test", memory={"bogus": 1})
    with pytest.raises(ConfigError, match=r"^clawkit.Agent\(tools=…\): tools\[0\]: unknown tool 'no_such_tool'"):
        clawkit.Agent("openai/test", tools=["no_such_tool"], workspace=str(tmp_path))
    with pytest.raises(ConfigError, match=r"tools\[0\]: a lambda has no name"):
        clawkit.Agent("openai/test", tools=[lambda x: x])
    with pytest.raises(ConfigError, match="missing model"):
        clawkit.Agent(instructions="no model")
    # the pydantic-ai spelling of a model string is accepted too
    agent = clawkit.Agent("openai:gpt-4o-mini", workspace=str(tmp_path), persist=False)
    try:
        assert agent.config.model.name == "openai/gpt-4o-mini" and agent.config.name == "agent"
    finally:
        agent.close()


def test_the_docs_example_runs(server, tmp_path, monkeypatch, capsys):
    """docs/python-agents.md's first example, as printed, against the loopback server (OpenAI wire)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "python-agents.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    assert '"openai/gpt-4o-mini"' in code
    code = code.replace('"openai/gpt-4o-mini"', repr(model(server, "openai")))
    server.reset()
    server.script(Reply.tool_calls([("word_count", {"text": "to be or not to be"})]), "6 words.",
                  Reply.tool_calls([("today", {})]), "Today is the day.")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/python-agents.md", "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out == "6 words.\nToday is the day.\n"
    assert "6" in str(server.requests[1].messages)


@clawkit.tool(risk="unsafe")
def send_mail(to: str, body: str) -> str:
    """Send an e-mail."""
    WIPED.append(f"mail:{to}")
    return "sent"


def test_an_unsafe_python_tool_asks_the_approver(server, tmp_path):
    """``@clawkit.tool(risk="unsafe")`` on a plain function: the policy asks the approver, as for a builtin."""
    server.reset()
    WIPED.clear()
    asked: list[tuple[str, str]] = []

    def approver(call, reason, ctx):
        asked.append((call.name, reason))
        return call.arguments.get("to") == "me@example.org"

    server.script(Reply.tool_calls([("send_mail", {"to": "me@example.org", "body": "hi"})]), "Sent.",
                  Reply.tool_calls([("send_mail", {"to": "all@example.org", "body": "hi"})]), "Refused.")
    with clawkit.Agent(model(server, "openai"), tools=[send_mail], workspace=str(tmp_path), approver=approver) as agent:
        assert agent.tools.tools["send_mail"].definition.risk.value == "unsafe"
        ok = agent.run("mail me")
        refused = agent.run("mail everyone", session_id=ok.session_id)
    assert [name for name, _ in asked] == ["send_mail", "send_mail"]
    assert ok.reply == "Sent." and not ok.tool_calls[0]["is_error"]
    assert refused.tool_calls[0]["blocked"] and WIPED == ["mail:me@example.org"]
