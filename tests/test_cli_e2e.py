"""End to end through the CLI: an agent in YAML, the real provider plugins (the native
``clawkit-http``, which ``provider: auto`` picks for ``openai/…``, and ``clawkit-litellm``
where a test asks for it), real HTTP to the loopback model server, two tools called
concurrently, and every fault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clawkit.testing.server import Fault, Reply

PLUGIN = textwrap.dedent(
    '''
    import json, threading, time
    from clawkit import hookimpl

    def _log(name, start):
        with open("tool_spans.jsonl", "a") as f:
            f.write(json.dumps([name, start, time.time()]) + "\\n")

    # each call waits for the other to start: run one after the other, the first would give up (an
    # error result), so the answers below prove the two ran at the same time, whatever the load
    _both = threading.Barrier(2, timeout=60)

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        start = time.time()
        _both.wait()
        _log("get_weather", start)
        return f"{city}: 18C, sunny"

    def get_time(city: str) -> str:
        """Local time in a city."""
        start = time.time()
        _both.wait()
        _log("get_time", start)
        return f"{city}: 14:05"

    @hookimpl
    def register_tools(register, agent):
        register(get_weather)
        register(get_time)
    '''
)


@pytest.fixture
def agent_dir(tmp_path, model_server):
    (tmp_path / "weather_tools.py").write_text(PLUGIN)
    (tmp_path / "agent.yaml").write_text(
        textwrap.dedent(
            f"""
            name: weather-bot
            model:
              name: openai/test-model
              api_base: {model_server.url}
              api_key: ${{TEST_KEY:-not-a-real-key}}
              timeout: 1.5
              max_retries: 2
              retry_base_delay: 0.05
            instructions: You report the weather.
            tools: [get_weather, get_time]
            """
        )
    )
    # a local plugin installed the lightest way: a sitecustomize-free entry point via a .pth-free path
    dist = tmp_path / "site" / "weather_tools-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: weather-tools\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[clawkit]\nweather = weather_tools\n")
    (tmp_path / "site" / "weather_tools.py").write_text(PLUGIN)
    return tmp_path


BOTH = "clawkit-http,clawkit-litellm"  # both providers installed: auto picks clawkit-http for openai/…
PROVIDERS = pytest.mark.parametrize("providers", [BOTH, "clawkit-litellm"], ids=["http", "litellm"])


def clawkit(agent_dir: Path, *args: str, timeout: float = 60, providers: str = BOTH) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(agent_dir / "site"), env.get("PYTHONPATH", "")])
    env["CLAWKIT_LOAD_PLUGINS"] = f"{providers},weather-tools"  # the kernel path and the providers alone
    return subprocess.run(
        [sys.executable, "-m", "clawkit", *args], cwd=agent_dir, env=env, capture_output=True, text=True, timeout=timeout
    )


@PROVIDERS
def test_agent_answers_with_two_concurrent_tool_calls(agent_dir, model_server, providers):
    model_server.script(
        Reply.tool_calls([("get_weather", {"city": "Paris"}), ("get_time", {"city": "Paris"})]),
        "It is 18C and sunny in Paris, and 14:05.",
    )
    out = clawkit(agent_dir, "run", "agent.yaml", "Weather and time in Paris?", "--json", providers=providers)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["reply"] == "It is 18C and sunny in Paris, and 14:05."
    assert [c["name"] for c in result["tool_calls"]] == ["get_weather", "get_time"]
    assert result["usage"]["total_tokens"] > 0
    first, second = model_server.requests
    assert {t["function"]["name"] for t in first.tools} == {"get_weather", "get_time"}
    assert first.messages[0] == {"role": "system", "content": "You report the weather."}
    tool_msgs = [m for m in second.messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["Paris: 18C, sunny", "Paris: 14:05"]
    # the calls met at their barrier (tool_msgs above): they ran concurrently; both logged their span
    spans = [json.loads(line) for line in (agent_dir / "tool_spans.jsonl").read_text().splitlines()]
    assert sorted(s[0] for s in spans) == ["get_time", "get_weather"]
    # the session is on disk and can be shown and exported
    listed = clawkit(agent_dir, "sessions", "list", "--json")
    assert json.loads(listed.stdout)[0]["id"] == result["session_id"]
    exported = clawkit(agent_dir, "sessions", "export", result["session_id"])
    kinds = [json.loads(line)["type"] for line in exported.stdout.splitlines()]
    assert kinds.count("message") == 5
    shown = clawkit(agent_dir, "sessions", "show", result["session_id"])
    assert "get_weather" in shown.stdout and "usage" in shown.stdout
    # from anywhere, through the agent file (its workspace holds the database)
    elsewhere = clawkit(agent_dir / "site", "sessions", "list", "--json", "--agent", str(agent_dir / "agent.yaml"))
    assert json.loads(elsewhere.stdout)[0]["id"] == result["session_id"]


def test_streamed_reply_on_stdout_and_resume_session(agent_dir, model_server):
    model_server.script("Hello there, traveller.", "Still here.")
    out = clawkit(agent_dir, "run", "agent.yaml", "hi")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Hello there, traveller.\n"
    sid = out.stderr.strip().split()[-1].rstrip("]")
    out2 = clawkit(agent_dir, "run", "agent.yaml", "still there?", "--session", sid, "--json")
    assert json.loads(out2.stdout)["session_id"] == sid
    assert [m["content"] for m in model_server.requests[1].messages[1:]] == ["hi", "Hello there, traveller.", "still there?"]
    assert model_server.requests[0].stream


@pytest.mark.parametrize(
    "fault",
    [Fault.rate_limit(retry_after=0.2), Fault.status(500), Fault.status(503), Fault.delay(2.5), Fault.cut_stream(after_chunks=0)],
    ids=["429-retry-after", "500", "503", "timeout", "cut-stream"],
)
def test_recovers_from_a_transient_fault(agent_dir, model_server, fault):
    model_server.script(fault, "Recovered answer.")
    t0 = time.perf_counter()
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["reply"] == "Recovered answer."
    assert len(model_server.requests) == 2
    if fault.kind == "rate_limit":
        gap = model_server.requests[1].received - model_server.requests[0].received
        assert gap >= 0.2, "Retry-After was not honoured"
    del t0


@PROVIDERS
def test_fails_clearly_when_retries_are_exhausted(agent_dir, model_server, providers):
    model_server.script(Fault.status(503), Fault.status(503), Fault.status(503))
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", providers=providers)
    assert out.returncode == 3
    assert "model call failed" in out.stderr and "503" in out.stderr and "3 attempts" in out.stderr
    assert "Traceback" not in out.stderr


def test_malformed_tool_arguments_reach_the_model_as_an_error(agent_dir, model_server):
    model_server.script(Reply.malformed_tool_call("get_weather", '{"city": "Par'), "Sorry, let me fix that.")
    out = clawkit(agent_dir, "run", "agent.yaml", "weather?", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["tool_calls"][0]["is_error"]
    tool_msg = [m for m in model_server.requests[1].messages if m["role"] == "tool"][0]
    assert "not valid JSON" in tool_msg["content"]


def test_context_overflow_without_compaction_is_a_clear_error(agent_dir, model_server):
    model_server.script(Fault.context_overflow())
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--set", "plugins={}")
    assert out.returncode == 3 and "context" in out.stderr.lower()


def test_bad_config_exits_2_naming_file_line_field(agent_dir):
    (agent_dir / "bad.yaml").write_text("name: x\nmodel: m\nlimits:\n  max_tool_rounds: -1\n")
    out = clawkit(agent_dir, "run", "bad.yaml", "hi")
    assert out.returncode == 2
    assert "bad.yaml:4: limits.max_tool_rounds" in out.stderr
    out = clawkit(agent_dir, "run", "missing.yaml", "hi")
    assert out.returncode == 2 and "missing.yaml: no such agent file" in out.stderr
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--set", "nonsense")
    assert out.returncode == 2 and "expected KEY=VALUE" in out.stderr


def test_chat_reads_one_message_per_line_when_piped(agent_dir, model_server):
    model_server.script("First reply.", "Second reply.")
    env = dict(os.environ, PYTHONPATH=str(agent_dir / "site"), CLAWKIT_LOAD_PLUGINS=f"{BOTH},weather-tools")
    out = subprocess.run(
        [sys.executable, "-m", "clawkit", "chat", "agent.yaml"], input="hello\n\nhow are you?\n", cwd=agent_dir,
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["First reply.", "Second reply."]
    assert len(model_server.requests[1].messages) == 4  # system + hello + reply + how are you


def test_plugins_command_lists_hooks(agent_dir):
    out = clawkit(agent_dir, "plugins", "--json")
    infos = {p["name"]: p for p in json.loads(out.stdout)}
    assert infos["weather"]["hooks"] == ["register_tools"]
    assert infos["litellm"]["distribution"] == "clawkit-litellm"


def test_init_then_schema(agent_dir):
    out = clawkit(agent_dir, "init", "new.yaml", "--name", "n1")
    assert out.returncode == 0 and (agent_dir / "new.yaml").exists()
    assert clawkit(agent_dir, "init", "new.yaml").returncode == 2
    schema = json.loads(clawkit(agent_dir, "schema").stdout)
    assert {"name", "model", "tools", "plugins", "limits", "workspace", "instructions"} <= set(schema["properties"])


def test_help_and_plugins_do_not_import_litellm():
    code = (
        "import sys\n"
        "from clawkit.cli import main\n"
        "for argv in (['--help'], ['plugins']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr


def test_version():
    out = subprocess.run([sys.executable, "-m", "clawkit", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("clawkit ")


def test_provider_retries_are_session_events(agent_dir, model_server, monkeypatch):
    from clawkit.runtime import open_agent

    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "clawkit-litellm")
    model_server.script(Fault.status(503), "ok after a retry")
    agent = open_agent(agent_dir / "agent.yaml", {"tools": []})
    result = agent.run("hi")
    assert result.reply == "ok after a retry"
    retries = agent.store.events(result.session_id, "llm.retry")
    assert retries and retries[0]["data"]["by"] == "provider" and "503" in retries[0]["data"]["error"]


def test_demo_runs_a_full_turn_offline(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}
    out = subprocess.run([sys.executable, "-m", "clawkit", "demo", "--json"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [c["name"] for c in result["tool_calls"]] == ["list_dir"] and "notes.txt" in result["reply"]
    assert result["reply"].startswith("This folder holds 2 entries: .clawkit/, notes.txt.")  # no data marker counted
    assert (tmp_path / ".clawkit" / "state.db").is_file()
