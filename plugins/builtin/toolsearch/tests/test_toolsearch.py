"""clawkit-toolsearch: 300 registered tools through the real loop (scripted model) and real SQLite."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import clawkit_toolsearch
from clawkit import hookimpl
from clawkit.testing import ScriptedReply, call
from clawkit.tools import tool_from_function

sys.path.insert(0, str(Path(__file__).parent / "data"))
from catalog import TOOLS  # noqa: E402
from labelled import REQUESTS  # noqa: E402


def _make(name, description, args):
    """A real tool that reports how it was called, with the catalog's description and arguments."""
    from pydantic import Field, create_model

    def fn(**kwargs):
        return f"{name} ran with {sorted(kwargs)}"

    t = tool_from_function(lambda: None, name=name)
    t.definition.description = description
    t.definition.parameters = {"type": "object", "properties": {a: {"type": "string"} for a in args}}
    t.fn = fn
    t.args_model = create_model(f"{name}_args", **{f"{a}_": (str | None, Field(None, alias=a)) for a in args})
    return t


class Catalog:
    """Registers the 300 catalog tools."""

    @hookimpl
    def register_tools(self, register, agent):
        for name, description, args in TOOLS:
            register(_make(name, description, args))


def test_each_request_carries_at_most_k_definitions_including_the_needed_one(make_agent):
    agent = make_agent(
        [ScriptedReply.calls(call("weather_forecast", city="Rome", days="2")), "Sunny."],
        plugins=(clawkit_toolsearch, Catalog()), tools=["*"],
        plugin_config={"toolsearch": {"embeddings": None}},
    )
    r = agent.run("Will it be sunny in Rome this weekend? Check the weather forecast")
    first, second = agent.provider.requests
    names = [t.name for t in first.tools]
    assert len(names) <= 8 + 1 and "weather_forecast" in names and "find_tools" in names
    assert "weather_forecast" in [t.name for t in second.tools]  # a used tool stays
    ev = [e["data"] for e in agent.store.events(r.session_id) if e["type"] == "context.tools_selected"][0]
    assert ev["offered"] >= 301 and ev["sent"] == len(names) and ev["tokens_after"] < ev["tokens_before"] / 10  # 300 + find_tools + the full install's own tools


def test_find_tools_brings_another_tool_into_the_next_request(make_agent):
    agent = make_agent(
        [ScriptedReply.calls(call("find_tools", query="send an sms text message")),
         ScriptedReply.calls(call("twilio_send_sms", to="+1555", body="ready")), "Texted."],
        plugins=(clawkit_toolsearch, Catalog()), tools=["*"],
        plugin_config={"toolsearch": {"embeddings": None}},
    )
    r = agent.run("Let the customer know their car is ready")
    first, second, third = agent.provider.requests
    assert "twilio_send_sms" not in [t.name for t in first.tools]
    assert "twilio_send_sms" in [t.name for t in second.tools]
    assert r.tool_calls[1]["name"] == "twilio_send_sms" and not r.tool_calls[1]["is_error"]
    assert "twilio_send_sms" in agent.store.load_metadata(r.session_id)["toolsearch.active"]


def test_allowlist_still_decides(make_agent):
    agent = make_agent(
        [ScriptedReply.calls(call("find_tools", query="sms")), ScriptedReply.calls(call("twilio_send_sms", to="1", body="x")), "no"],
        plugins=(clawkit_toolsearch, Catalog()), tools=["find_tools", "weather_*", "maps_*", "files_*", "browser_*", "finance_*"],
        plugin_config={"toolsearch": {"embeddings": None, "max_tools": 20}},
    )
    r = agent.run("text the customer")
    found = [m.content for m in agent.provider.requests[1].messages if m.role == "tool"][0]
    assert "twilio" not in found
    assert r.tool_calls[1]["is_error"]  # not allowed: never runs
    assert all(not t.name.startswith("twilio") for q in agent.provider.requests for t in q.tools)


def test_few_tools_are_all_sent(make_agent):
    agent = make_agent(["ok"], plugins=(clawkit_toolsearch, Catalog()), tools=["weather_*", "find_tools"])
    agent.run("hi")
    assert len(agent.provider.requests[0].tools) == 11


def test_bm25_retrieval_recall_on_the_labelled_set():
    """What BM25 alone reaches on 135 labelled requests (the hybrid figure is in bench_toolsearch.py)."""
    from clawkit_toolsearch.index import ToolIndex

    idx = ToolIndex(tuple((n, d, tuple(a)) for n, d, a in TOOLS))
    recall = sum(want in idx.search(q, 8) for q, want in REQUESTS) / len(REQUESTS)
    assert len(REQUESTS) >= 100 and recall >= 0.75


def test_hybrid_retrieval_recall_on_the_labelled_set(make_agent):
    """The ranking select_tools and find_tools use, with the default ``local`` provider (clawkit-memory's
    MiniLM in numpy; from issue 29's first pass to its fifth a static WordLlama table). Score fusion was
    chosen for the static table, where it beat reciprocal-rank fusion on both counts (recall@8 0.911 vs
    0.881). With MiniLM it ranks the right tool higher (MRR@10 0.786 vs 0.745) for 3 requests fewer in
    the 8 sent (0.933 vs 0.956) — docs/plugins/toolsearch.md."""
    pytest.importorskip("clawkit_memory")  # the local embedding provider
    from clawkit_toolsearch import vectors
    from clawkit_toolsearch.index import ToolIndex

    agent = make_agent([], plugins=(clawkit_toolsearch, __import__("clawkit_memory")))
    emb = vectors.provider(agent.hooks, "local")
    key = tuple((n, d, tuple(a)) for n, d, a in TOOLS)
    idx = ToolIndex(key)
    ranked = {q: vectors.hybrid(emb, key, q, idx.scores(q), 10) for q, _ in REQUESTS}
    recall = sum(want in ranked[q][:8] for q, want in REQUESTS) / len(REQUESTS)
    mrr = sum(1 / (ranked[q].index(want) + 1) for q, want in REQUESTS if want in ranked[q]) / len(REQUESTS)
    fused = {q: vectors.fuse(idx.search(q, 50), vectors.rank(emb, key, q, 50), k=10) for q, _ in REQUESTS}
    rrf_mrr = sum(1 / (fused[q].index(want) + 1) for q, want in REQUESTS if want in fused[q]) / len(REQUESTS)
    assert recall >= 0.92 and mrr >= 0.75 and mrr > rrf_mrr, (recall, mrr, rrf_mrr)
