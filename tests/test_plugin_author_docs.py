"""What docs/writing-a-plugin.md and docs/testing.md tell a third-party author, checked against
the code (issue 11, point 11): each test runs a statement of those pages."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import clawkit
from clawkit import Decision, SessionClassification, StaticContributor, hookimpl
from clawkit.testing import ScriptedReply, call
from clawkit.testing.server import ModelServer, Reply

REPO = Path(__file__).resolve().parents[1]


def test_hook_types_import_from_clawkit_and_dir_lists_them():
    names = ["Decision", "SessionClassification", "ToolCall", "ToolResult", "Message", "Outbound", "Event", "Risk",
             "PromptContributor", "PromptSection", "StaticContributor", "Tag", "ContributorContext", "tool",
             "ToolError", "hookimpl", "hook_order"]
    listed = dir(clawkit)
    for name in names:
        assert name in listed, name
        assert getattr(clawkit, name) is not None
    doc = (REPO / "docs" / "writing-a-plugin.md").read_text()
    assert "from clawkit import Decision, SessionClassification" in doc and "dir(clawkit)" in doc
    hooks = (REPO / "docs" / "hooks.md").read_text()
    assert "from clawkit import Decision, SessionClassification" in hooks  # where Decision & co. come from


def test_static_contributor_signature_is_the_documented_one():
    sig = str(inspect.signature(StaticContributor))
    assert sig == ("(id: 'str', content: 'str', *, heading: 'str' = '', tags: 'Iterable[Any]' = (), "
                   "priority: 'int' = 100, max_chars: 'int | None' = None)")
    doc = (REPO / "docs" / "writing-a-plugin.md").read_text()
    assert 'StaticContributor(id, content, *, heading="", tags=(), priority=100, max_chars=None)' in doc


class Gate:
    name = "my-gate"  # a plugin object is named by its ``name`` (an entry point by its entry-point name)

    @hookimpl
    def before_tool_call(self, ctx, call):
        if call.name == "echo":
            return Decision.block("echo is off today")


def echo(text: str) -> str:
    """Say it back."""
    return text


class Echo:
    name = "echo-tool"

    @hookimpl
    def register_tools(self, register, agent):
        register(echo)


def test_a_block_reads_error_blocked_by_plugin_reason(make_agent):
    agent = make_agent([ScriptedReply.calls(call("echo", text="hi")), "ok"], plugins=(Gate(), Echo()), tools=["echo"])
    agent.run("go")
    result = agent.provider.requests[1].messages[-1]
    assert result.content == "Error: blocked by my-gate: echo is off today"
    assert result.tool_result.metadata["blocked"] is True


def test_a_tagged_contributor_that_does_not_match_keeps_the_instructions(make_agent):
    class Tagged:
        name = "tagged"

        @hookimpl
        def register_prompt_contributor(self, register, agent):
            register(StaticContributor("sec", "SECURITY", tags=["domain:security"]))

    agent = make_agent(["ok"], plugins=(Tagged(),), instructions="You are terse.")
    agent.run("hi")
    system = agent.provider.requests[0].system  # (the full install's contributors add their sections)
    assert "You are terse." in system and "SECURITY" not in system
    narrowed = make_agent(["ok"], plugins=(Tagged(),), instructions="You are terse.",
                          narrow="the exact prompt of one contributor, without the installed ones")
    narrowed.run("hi")
    assert narrowed.provider.requests[0].system == "You are terse."


def test_make_agent_loads_the_full_install_unless_narrowed(make_agent):
    agent = make_agent(["ok"], plugins=(Gate(),))
    names = {name for name, _ in agent.pm.list_name_plugin()}
    assert "my-gate" in names and {"policy", "shield", "skills", "memory", "litellm"} <= names
    narrowed = make_agent(["ok"], plugins=(Gate(),), narrow="only my gate, for its own mechanics")
    names = {name for name, _ in narrowed.pm.list_name_plugin()}
    assert "my-gate" in names and not names & {"policy", "shield", "skills", "memory", "litellm"}


def test_http_agent_loads_the_full_install_and_your_plugins(http_agent, model_server):
    names = {name for name, _ in http_agent(plugins=(Gate(),)).pm.list_name_plugin()}
    assert {"litellm", "my-gate", "policy", "shield"} <= names
    agent = http_agent("Hello.", plugins=(Gate(),), narrow="the provider and my gate only, for the exact request")
    names = {name for name, _ in agent.pm.list_name_plugin()}
    # the provider users get for openai/… (clawkit-http), under its plugin name
    assert {"http", "my-gate"} <= names and not names & {"policy", "shield", "skills", "litellm"}
    assert agent.run("hi").reply == "Hello."
    (req,) = model_server.requests
    assert req.path == "/v1/chat/completions" and req.messages[-1] == {"role": "user", "content": "hi"}


def test_giving_a_session_a_classification_both_ways(make_agent):
    class Sections:
        name = "sections"

        @hookimpl
        def register_prompt_contributor(self, register, agent):
            register(StaticContributor("sec", "SECURITY-NOTES", tags=["domain:security"]))

    class Classify:
        name = "classify"

        @hookimpl
        def classify_session(self, session, messages):
            return SessionClassification(topic="coding", domain=["security"])

    agent = make_agent(["ok"], plugins=(Sections(), Classify()))
    agent.run("is this safe?")
    assert "SECURITY-NOTES" in agent.provider.requests[0].system

    agent = make_agent(["ok"], plugins=(Sections(),))
    session = agent.session()
    session.classification = SessionClassification(topic="coding", domain=["security"])
    agent.run("is this safe?", session_id=session.id)
    assert "SECURITY-NOTES" in agent.provider.requests[0].system


def test_model_server_function_gets_the_recorded_request(model_server, http_agent):
    seen = []

    def answer(request):  # fn(request: RecordedRequest) -> Reply | Fault | str
        seen.append(request)
        return Reply.text("fine") if request.tools else "no tools"

    model_server.script(answer)
    agent = http_agent(plugins=(Echo(),), tools=["echo"])
    assert agent.run("hi").reply == "fine"
    (req,) = seen
    assert req is model_server.requests[0]
    assert req.method == "POST" and req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.body["messages"] == req.messages and req.tools == req.body["tools"] and req.stream is True
    assert {t["function"]["name"] for t in req.tools} == {"echo"}
    model_server.reset()
    assert model_server.requests == []


def test_model_server_standalone_for_clawkit_run(tmp_path):
    """docs/testing.md, "Running the server for `clawkit run`", as written there."""
    with ModelServer() as server:
        server.script("Hello from the scripted model.")
        (tmp_path / "agent.yaml").write_text(
            f'name: t\nmodel: {{name: openai/test, api_base: "{server.url}", api_key: x}}\ntools: []\n')
        out = subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", "hi"], capture_output=True,
                             text=True, cwd=tmp_path, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "Hello from the scripted model."
        assert server.url.endswith("/v1") and not server.base_url.endswith("/v1")


@pytest.mark.cassette("cassettes/unused.json")
def test_the_cassette_marker_is_registered(request):
    """The test kit registers its marker (no PytestUnknownMarkWarning)."""
    assert any("cassette(path)" in line for line in request.config.getini("markers"))
