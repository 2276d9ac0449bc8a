"""Issue 27 item 2 (seed 001, Approach C) through the real CLI with every builtin loaded: a tool
result's ``__directives`` block is stripped before the model sees it, recorded as a session flag and
enforced on the next call — for a trusted source only. The tool is a real MCP server's ``echo``
(plugins/builtin/mcp/tests/mcp_test_server.py): MCP is untrusted unless ``sequence.directives.
trusted_tools`` names it. Old main: the block reached the model verbatim and nothing was enforced."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from clawkit.testing.server import Reply

from .conftest import Cases, run_batch, write_agent

pytestmark = pytest.mark.e2e

SERVER = Path(__file__).parents[2] / "plugins" / "builtin" / "mcp" / "tests" / "mcp_test_server.py"
TOOLS = ["read_file", "list_dir", "mcp__local__echo"]


def echo(block: dict[str, Any]) -> Reply:
    return Reply.tool_calls([("mcp__local__echo", {"text": json.dumps({"status": "migrated", "__directives": block})})])


# ``trusted: true``: the user vouches for the test server's tool *descriptions*, so they do not mark the
# session untrusted (provenance, issue 30) and the first echo is not asked for (denied non-interactively).
# What these tests prove — who may set directives — is decided by ``sequence.directives``, not by this flag:
# the echo's *result* is still untrusted content and still needs ``trusted_tools`` to set a directive.
MCP = ("mcp:\n  servers:\n    local: {command: " + json.dumps(sys.executable) + ", args: [" + json.dumps(str(SERVER))
       + "], trusted: true}\n")


def plugins(trusted: bool) -> str:
    text = "policy:\n  risk: {\"mcp__*\": safe, read_file: safe, list_dir: safe}\n"
    if trusted:
        text += "sequence:\n  directives: {trusted_tools: [\"mcp__local__*\"]}\n"
    return text


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, server, audit_home):
    root = tmp_path_factory.mktemp("seeds-directives")
    cases = Cases()
    server.reset()
    server.script(*([cases] * 80))
    jobs: list[dict[str, Any]] = []

    def job(name: str, trusted: bool, *replies: Any, ws_name: str = "", args: tuple = ()) -> None:
        ws = root / (ws_name or name)
        if not ws_name:
            write_agent(ws, server, TOOLS, plugins(trusted), extra=MCP)
            (ws / "notes.md").write_text("notes\n")
        tag = cases.add(name, *replies)
        jobs.append({"name": name, "cwd": str(ws), "argv": ["run", "agent.yaml", f"migrate the notes {tag}", "--json", *args]})

    read = Reply.tool_calls([("read_file", {"path": "notes.md"})])
    job("require", True, echo({"requireBeforeNext": ["list_dir"], "expires": {"calls": 5}}), read,
        Reply.tool_calls([("list_dir", {"path": "."})]), read, "done")
    job("untrusted", False, echo({"requireBeforeNext": ["list_dir"]}), read, "done")
    job("escalate", True, echo({"escalateToOwner": True}), read, read, "done")
    # the default expiry is the end of the turn: the next turn's read runs
    job("expired", True, echo({"requireBeforeNext": ["list_dir"]}), "done", args=("--new-session", "ses_expire"))
    job("expired2", True, read, "done", ws_name="expired", args=("--session", "ses_expire"))
    return {"root": root, "cases": cases, "results": run_batch(jobs, audit_home, root)}


def _result(outcome, name):
    res = outcome["results"][name]
    assert res["rc"] == 0, res["stderr"][-3000:]
    return res["json"]


def _events(outcome, name, session_id, type_):
    from clawkit.sessions import SessionStore

    store = SessionStore(outcome["root"] / name / ".clawkit" / "state.db")
    try:
        return store.events(session_id, type_)
    finally:
        store.close()


@pytest.mark.parametrize("case", ["require", "untrusted", "escalate", "expired"])
def test_the_model_never_sees_the_block(outcome, case):
    _result(outcome, case)
    echoed = outcome["cases"].tool_list(case)[0]  # the echo's result as the model was sent it
    assert "migrated" in echoed  # the rest of the result is delivered
    assert "__directives" not in echoed and "requireBeforeNext" not in echoed and "escalateToOwner" not in echoed


def test_require_before_next_blocks_other_tools_until_the_required_one_ran(outcome):
    result = _result(outcome, "require")
    reads = [c for c in result["tool_calls"] if c["name"] == "read_file"]
    assert [c["blocked"] for c in reads] == [True, False]
    said = outcome["cases"].tool_list("require")
    block = next(t for t in said if "requireBeforeNext" in t or "directive" in t)
    assert "the directive requireBeforeNext set by mcp__local__echo" in block and "list_dir" in block
    assert _events(outcome, "require", result["session_id"], "sequence.directive_set")


def test_an_untrusted_source_cannot_set_directives(outcome):
    result = _result(outcome, "untrusted")
    assert [c["blocked"] for c in result["tool_calls"] if c["name"] == "read_file"] == [False]
    (ignored,) = _events(outcome, "untrusted", result["session_id"], "sequence.directive_ignored")
    assert "untrusted" in ignored["data"]["reason"]


def test_escalate_to_owner_asks_for_the_next_call_only(outcome):
    result = _result(outcome, "escalate")
    reads = [c for c in result["tool_calls"] if c["name"] == "read_file"]
    assert [c["blocked"] for c in reads] == [True, False]  # asked (a run cannot answer: denied), then spent
    said = outcome["cases"].tool_list("escalate")
    assert any("escalateToOwner set by mcp__local__echo" in t and "not approved" in t for t in said)


def test_a_directive_expires_with_its_turn(outcome):
    first = _result(outcome, "expired")
    assert _events(outcome, "expired", first["session_id"], "sequence.directive_set")
    result = _result(outcome, "expired2")
    assert result["session_id"] == first["session_id"]
    assert [c["blocked"] for c in result["tool_calls"] if c["name"] == "read_file"] == [False]
    assert _events(outcome, "expired", result["session_id"], "sequence.directive_expired")
