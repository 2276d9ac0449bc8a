"""Memory inside an agent: tools, recall contributor, episodes, watcher, CLI, providers, end-to-end."""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

import clawkit_memory
from clawkit.testing import ScriptedReply, call, unwrapped
from clawkit_memory.chunking import chunk_markdown, finished_turns
from clawkit_memory.config import EmbeddingConfig
from clawkit_memory.embeddings import EmbeddingError, LocalStatic, resolve_provider
from clawkit_memory.local import LocalEmbeddings
from clawkit_memory.service import close_all, memory_for

TOOLS = ["memory_search", "memory_get", "memory_save"]


@pytest.fixture(autouse=True)
def _close_services():
    yield
    close_all()


@pytest.fixture
def notes(workspace: Path) -> Path:
    (workspace / "memory").mkdir()
    (workspace / "MEMORY.md").write_text(
        "# About the user\n\nThe user's cat is called Miso and she is afraid of the vacuum cleaner.\n\n"
        "## Work\n\nThe team deploys the billing service every Wednesday afternoon.\n")
    (workspace / "memory" / "2025-06-01.md").write_text(
        "# 2025-06-01\n\nWe agreed to move the analytics jobs to the EU region for data residency.\n")
    return workspace


def test_chunking_follows_headings_windows_and_lines():
    text = "# Title\n\n## A\n\nshort section\n\n```\n# not a heading\n```\n\n## B\n\n" + "\n".join(
        f"line {i} " + "word " * 30 for i in range(40))
    chunks = chunk_markdown(text, max_tokens=100, overlap=20)
    assert chunks[0].heading == "Title > A" and chunks[0].start_line == 3 and "# not a heading" in chunks[0].text
    b = [c for c in chunks if c.heading == "Title > B"]
    assert len(b) > 5
    assert all(c.start_line <= c.end_line for c in b)
    assert b[1].start_line <= b[0].end_line  # windows overlap


def test_finished_turns_skip_tool_traffic_and_open_turns():
    rows = [
        (1, "user", "what is the weather", None, 1.0),
        (2, "assistant", "", json.dumps({"tool_calls": [{"id": "c", "name": "w", "arguments": {}}]}), 1.1),
        (3, "tool", "sunny", None, 1.2),
        (4, "assistant", "It is sunny.", None, 1.3),
        (5, "user", "and tomorrow?", None, 2.0),
    ]
    turns = finished_turns(rows)
    assert len(turns) == 1 and turns[0].text == "User: what is the weather\nAssistant: It is sunny."
    assert (turns[0].first_id, turns[0].last_id) == (1, 4)


def test_tools_search_get_save(make_agent, notes):
    agent = make_agent(script=[
        ScriptedReply.calls(call("memory_search", query="what pet does the user have", k=2)),
        ScriptedReply.calls(call("memory_get", path="MEMORY.md", from_line=3, lines=1)),
        ScriptedReply.calls(call("memory_save", text="The user switched to oat milk.", tags=["diet"])),
        ScriptedReply.calls(call("memory_get", path="../secrets.txt")),
        "done",
    ], plugins=(clawkit_memory,), tools=TOOLS, approver=lambda *a: True)  # memory_save is guarded: the policy asks
    (notes.parent / "secrets.txt").write_text("top secret")
    result = agent.run("remember things")
    outs = [unwrapped(m.content) for m in agent.session(result.session_id).history if m.role == "tool"]
    assert "[MEMORY.md#L1-3]" in outs[0] and "Miso" in outs[0]
    assert outs[1] == "3: The user's cat is called Miso and she is afraid of the vacuum cleaner."
    saved = json.loads(outs[2])
    assert saved["saved"].startswith("memory/") and saved["tags"] == ["diet"]
    path = saved["saved"].split("#")[0]
    assert "oat milk" in (notes / path).read_text() and "tags: diet" in (notes / path).read_text()
    assert "not a memory source" in outs[3]
    mem = memory_for(agent.config)
    hits = mem.search("what milk does the user drink", k=1, filters={"tags": ["diet"]})
    assert hits and "oat milk" in hits[0].text  # indexed right away


def test_memory_save_refuses_paths_outside_memory_files(make_agent, notes):
    agent = make_agent(script=[ScriptedReply.calls(call("memory_save", text="x")), "ok"],
                       plugins=(clawkit_memory,), tools=TOOLS, approver=lambda *a: True)
    agent.config.plugins.memory.save_file = "../evil.md"
    result = agent.run("save")
    out = [m.content for m in agent.session(result.session_id).history if m.role == "tool"][0]
    assert "writes only to MEMORY.md" in out and not (notes.parent / "evil.md").exists()


def test_recall_contributor_injects_relevant_snippet_within_budget(make_agent, notes):
    agent = make_agent(script=["Miso hates the vacuum.", "ok"], plugins=(clawkit_memory,), tools=TOOLS)
    memory_for(agent.config).refresh(force=True)  # warm: index built, model loaded
    agent.run("is my cat scared of anything at home?")
    state_system = agent.provider.requests[0].system
    assert "## Relevant memory" in state_system and "[MEMORY.md#L1-3]" in state_system and "Miso" in state_system
    agent.run("what's the capital of Peru?")  # nothing similar enough: nothing injected
    assert "Relevant memory" not in (agent.provider.requests[1].system or "")


def test_recall_gives_up_at_the_budget(make_agent, notes, spy):
    class Slow(LocalStatic):
        def embed(self, texts):
            if len(texts) == 1 and "slow" in texts[0]:
                time.sleep(3)  # far past the budget: the bounds below tell giving up from waiting, whatever the load
            return super().embed(texts)

    @clawkit_memory.hookimpl
    def register_embedding_provider(register):
        register("slow", Slow)

    slow_plugin = type("SlowPlugin", (), {"register_embedding_provider": staticmethod(register_embedding_provider)})
    agent = make_agent(script=["ok"], plugins=(clawkit_memory, slow_plugin), tools=TOOLS)
    agent.config.plugins.memory.embedding.provider = "slow"
    agent.config.plugins.memory.recall.budget_ms = 100
    memory_for(agent.config, agent.hooks).refresh(force=True)
    agent.pm.register(spy)
    agent.hooks._cache.clear()
    t0 = time.perf_counter()
    agent.run("a slow question about the cat")
    seen = spy.states[0]
    assert seen["timed_out"] is True and seen["hits"] == []
    assert 90 <= seen["waited_ms"] < 1500
    assert "Relevant memory" not in (agent.provider.requests[0].system or "")
    assert time.perf_counter() - t0 < 3


@pytest.mark.parametrize("load_s, load_wait_ms, budget_ms, served", [(0.6, 3000, 400, True), (1.5, 400, 100, False)])
def test_the_model_load_is_waited_for_up_to_load_wait_then_the_budget_counts(make_agent, notes, load_s, load_wait_ms,
                                                                              budget_ms, served, spy):
    """A fresh process's model load (here a provider whose load takes ``load_s``) does not eat the
    search's budget (smaller than the load): it is waited for up to ``load_wait_ms`` from the
    message's arrival. (400 ms in the served case: a 100 ms search budget was missed at load ~12.)"""
    class SlowLoad(LocalStatic):
        loaded = False

        def load(self):
            if not SlowLoad.loaded:
                time.sleep(load_s)
                SlowLoad.loaded = True
            super().load()

    @clawkit_memory.hookimpl
    def register_embedding_provider(register):
        register("slowload", SlowLoad)

    plugin = type("SlowLoadPlugin", (), {"register_embedding_provider": staticmethod(register_embedding_provider)})
    agent = make_agent(script=["ok"], plugins=(clawkit_memory, plugin), tools=TOOLS,
                       plugin_config={"memory": {"embedding": {"provider": "slowload"}, "watch": False,
                                                 "recall": {"budget_ms": budget_ms, "load_wait_ms": load_wait_ms}}})
    mem = memory_for(agent.config, agent.hooks)
    mem.index.sync(mem.partition, mem.roots)  # the notes indexed; chunks embedded before the slow load is armed
    SlowLoad.loaded = False
    mem.index._query_cache.clear()
    agent.pm.register(spy)
    agent.hooks._cache.clear()
    agent.run("is my cat scared of anything at home?")
    seen = spy.states[0]
    system = agent.provider.requests[0].system or ""
    if served:
        assert seen["timed_out"] is False and seen["timings"]["load_ms"] >= load_s * 1000 * 0.9
        assert "Miso" in system and seen["waited_ms"] >= load_s * 1000 * 0.9
    else:
        assert seen["timed_out"] is True and "Relevant memory" not in system
        assert load_wait_ms * 0.9 <= seen["waited_ms"] < load_wait_ms + budget_ms + 400  # load_wait, then the budget


def test_episodes_from_past_sessions_and_read_only_partitions(make_agent, notes):
    a = make_agent(script=["Noted: we chose Postgres for the ledger.", "ok"], plugins=(clawkit_memory,), tools=TOOLS)
    first = a.run("For the ledger we decided on Postgres rather than DynamoDB.")
    mem = memory_for(a.config)
    mem.wait_idle()  # the turn's end queued its episode on the memory worker
    assert mem.last_episodes is not None and mem.last_episodes.files == 1 and mem.last_episodes.chunks == 1
    hits = mem.search("which database did we pick for the ledger", k=3, filters={"source": "episode"})
    assert hits and hits[0].path == f"session:{first.session_id}" and "Postgres" in hits[0].text
    again = mem.sync_sessions(a.store.path)
    assert again.files == 0 and again.unchanged == 0  # above the watermark: nothing new, nothing read

    b = make_agent(script=["ok"], plugins=(clawkit_memory,), tools=TOOLS, name="helper")
    b.config.plugins.memory.read_partitions = ["test-agent"]
    helper = memory_for(b.config)
    assert helper.partition == "helper"
    assert any("Miso" in h.text for h in helper.search("the user's cat", k=3))  # reads test-agent's memory
    (notes / "memory" / "x.md").write_text("# X\n\nhelper note\n")
    helper.refresh(force=True)  # writes go to its own partition only
    parts = {p for (p,) in helper.index.conn.execute("SELECT DISTINCT partition FROM memory_chunks WHERE path = 'memory/x.md'")}
    assert "helper" in parts


def test_watcher_reindexes_without_a_search(make_agent, notes):
    agent = make_agent(script=["ok"], plugins=(clawkit_memory,), tools=TOOLS)
    mem = memory_for(agent.config)
    mem.refresh(force=True)
    mem.start_watching()
    assert mem.watching
    time.sleep(0.2)
    before = mem.index.counters["files_indexed"]
    (notes / "memory" / "2025-06-01.md").write_text("# 2025-06-01\n\nThe analytics jobs stay in the US after all.\n")
    deadline = time.time() + 5
    while mem.index.counters["files_indexed"] == before and time.time() < deadline:
        time.sleep(0.05)
    assert mem.index.counters["files_indexed"] > before
    hits = mem.searcher.search("where do analytics jobs run", partitions=[mem.partition], k=1)
    assert "stay in the US" in hits[0].text


class _Cli:
    def __init__(self):
        self.parser = argparse.ArgumentParser(prog="clawkit")
        self.sub = self.parser.add_subparsers(dest="command")

    def command(self, name, help=""):
        return self.sub.add_parser(name, help=help)


def test_cli_index_search_stats_forget(notes, capsys):
    cli = _Cli()
    clawkit_memory.register_commands(cli)

    def run(*argv):
        args = cli.parser.parse_args(["memory", "--workspace", str(notes), *argv])
        return args.handler(args)

    assert run("index") == 0
    assert "2 sources indexed" in capsys.readouterr().out
    assert run("index") == 0 and "0 sources indexed" in capsys.readouterr().out
    assert run("search", "where will the analytics jobs run", "--k", "1", "--json") == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["citation"] == "memory/2025-06-01.md#L1-3"
    assert run("stats", "--json") == 0
    assert json.loads(capsys.readouterr().out)["partitions"]["default"]["file"]["chunks"] == 3
    assert run("forget", "memory/*.md") == 0 and "forgot 1 chunks" in capsys.readouterr().out
    assert run("forget") == 2
    assert run("forget", "--older-than", "soon") == 2
    assert run("index", "nope/") == 2
    assert run("search", "x", "--filter", "colour=red") == 2


def test_provider_auto_is_local_and_remote_goes_through_litellm():
    assert isinstance(resolve_provider(EmbeddingConfig(), {}), LocalEmbeddings)
    assert isinstance(resolve_provider(EmbeddingConfig(provider="static"), {}), LocalStatic)
    with pytest.raises(EmbeddingError, match="unknown provider 'nope'"):
        resolve_provider(EmbeddingConfig(provider="nope"), {})

    seen = []

    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.0]}
                    for i, t in enumerate(body["input"])]
            out = json.dumps({"object": "list", "data": data, "model": body["model"],
                              "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = EmbeddingConfig(model="openai/test-embed", api_base=f"http://127.0.0.1:{server.server_port}/v1",
                              api_key="sk-test")
        litellm_plugin = pytest.importorskip("clawkit_litellm")
        provider = resolve_provider(cfg, {"litellm": litellm_plugin.LiteLLMEmbeddings})
        # auto: the remote provider first, the local model as its fallback (issue 27 item 10)
        assert isinstance(provider.remote, litellm_plugin.LiteLLMEmbeddings)
        vecs = np.asarray(provider.embed(["ab", "abcd"]))
        assert np.allclose(vecs[:, 0], [2, 4]) and provider.dimensions == 3 and provider.fell_back is None
        assert seen[-1]["model"] == "test-embed" and seen[-1]["input"] == ["ab", "abcd"]
    finally:
        server.shutdown()
        server.server_close()


def test_end_to_end_through_model_server(model_server, notes, tmp_path):
    """Real HTTP + litellm: the model calls memory_search, gets cited snippets; recall is in the prompt."""
    clawkit_litellm = pytest.importorskip("clawkit_litellm")
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.testing import plugin_manager
    from clawkit.testing.server import Reply

    model_server.script(
        Reply.tool_calls([("memory_search", {"query": "when does the billing service ship", "k": 2})]),
        "The billing service deploys every Wednesday afternoon [MEMORY.md#L5-7].",
    )
    seen = {}

    class Spy:
        @clawkit_memory.hookimpl
        def before_llm_call(self, ctx, request):
            seen.setdefault("recall", dict(ctx.state["memory.recall"]))

    pm = plugin_manager(clawkit_litellm, clawkit_memory, Spy())  # the full install, as a user's run
    cfg = validate_agent({"name": "e2e", "workspace": str(notes), "tools": TOOLS,
                          "model": {"name": "openai/test", "api_base": model_server.url, "api_key": "sk-test",
                                    "max_retries": 0}},
                         "<e2e>", {}, collect_sections(HookRunner(pm)))
    agent = Agent(cfg, pm=pm)
    memory_for(cfg, agent.hooks).refresh(force=True)
    try:
        result = agent.run("When do we deploy billing?")
    finally:
        agent.store.close()
    assert "Wednesday" in result.reply
    first, second = model_server.requests
    system = first.messages[0]["content"]
    assert first.messages[0]["role"] == "system" and "[MEMORY.md#L5-7] ## Work The team deploys the billing service" in system
    assert {t["function"]["name"] for t in first.tools} == set(TOOLS)
    tool_msg = next(m for m in second.messages if m["role"] == "tool")
    assert "[MEMORY.md#L5-7]" in tool_msg["content"] and "Wednesday" in tool_msg["content"]
    recall = seen["recall"]
    assert recall["timed_out"] is False and recall["budget_ms"] == 300
    assert recall["timings"]["embed_ms"] + recall["timings"]["search_ms"] <= recall["budget_ms"]
    assert recall["hits"][0].citation == "MEMORY.md#L5-7"
