"""Issue 27 item 10: memory's embedding providers by name — ``openai`` (POST /v1/embeddings), ``gemini``
(embedContent / batchEmbedContents, ``x-goog-api-key``) and ``auto`` (a configured remote provider
first, the local model when it fails) — through the real CLI with every builtin loaded, against a
loopback server speaking each API, with the model on both wire formats. Switching provider rebuilds
the index under the new space (never mixed); keys come from the environment and show up nowhere else."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawkit.testing.server import ModelServer


def _load_server():  # the loopback embedding server, a helper module beside this one (tests/ is not a package)
    import importlib.util

    spec = importlib.util.spec_from_file_location("websearch_embedserver", Path(__file__).with_name("websearch_embedserver.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.EmbeddingServer


EmbeddingServer = _load_server()

pytestmark = pytest.mark.e2e

OPENAI_KEY = "sk-emb-0123456789abcdef-SECRET"
GEMINI_KEY = "AIza-emb-0123456789abcdef-SECRET"
MEMORY = "# Notes\n\n## Bots\n\nThe deploy bot is named Gertrude and runs every night.\n\n## Food\n\nLunch is at noon on Fridays.\n"
BATCH = Path(__file__).parent / "security" / "cli_batch.py"


def _agent(ws: Path, server: ModelServer, embedding: str, *, anthropic: bool = False, name: str = "agent.yaml") -> None:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "MEMORY.md").write_text(MEMORY)
    model, base = ("anthropic/claude-test", server.base_url) if anthropic else ("openai/test", server.url)
    (ws / name).write_text(textwrap.dedent(f"""\
        name: rememberer
        model: {{name: {model}, api_base: "{base}", api_key: sk-test, max_retries: 0, timeout: 20}}
        tools: []
        plugins:
          memory:
            embedding: {embedding}
        """))


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    root = tmp_path_factory.mktemp("embeddings")
    with ModelServer() as model, EmbeddingServer({"openai": OPENAI_KEY, "gemini": GEMINI_KEY}) as emb:
        model.script(lambda request: "ok")
        jobs = []

        def job(name, ws, *argv):
            jobs.append({"name": name, "cwd": str(root / ws), "argv": list(argv)})

        e = emb.url
        _agent(root / "openai", model, f'{{provider: openai, model: hashed-64, api_base: "{e}/v1", api_key_env: EMB_KEY}}')
        _agent(root / "gemini", model, f'{{provider: gemini, model: hashed-64, api_base: "{e}/v1beta"}}', anthropic=True)
        _agent(root / "auto_down", model, f'{{provider: auto, remote: openai, model: hashed-64, api_base: "{e}/fail/v1", '
                                          f'api_key_env: EMB_KEY}}')
        _agent(root / "auto_up", model, f'{{provider: auto, remote: gemini, model: hashed-64, api_base: "{e}/v1beta"}}',
               anthropic=True)
        # one workspace, two agent files: the openai space first, then gemini at 32 dimensions
        _agent(root / "switch", model, f'{{provider: openai, model: hashed-64, api_base: "{e}/v1", api_key_env: EMB_KEY}}',
               name="a.yaml")
        _agent(root / "switch", model, f'{{provider: gemini, model: hashed-64, api_base: "{e}/v1beta", dimensions: 32}}',
               name="b.yaml")
        _agent(root / "yaml_key", model, f'{{provider: openai, model: hashed-64, api_base: "{e}/v1", api_key: {OPENAI_KEY}}}')
        for ws in ("openai", "gemini", "auto_down", "auto_up"):
            job(f"{ws}.index", ws, "memory", "index", "--agent", "agent.yaml")
            job(f"{ws}.run", ws, "run", "agent.yaml", f"who is the deploy bot? [ws {ws}]", "--json")
            job(f"{ws}.stats", ws, "memory", "stats", "--agent", "agent.yaml")
            job(f"{ws}.stats_json", ws, "memory", "stats", "--agent", "agent.yaml", "--json")
        job("switch.a", "switch", "memory", "search", "deploy bot", "--agent", "a.yaml", "--json")
        job("switch.a_stats", "switch", "memory", "stats", "--agent", "a.yaml", "--json")
        job("switch.b", "switch", "memory", "search", "deploy bot", "--agent", "b.yaml", "--json")
        job("switch.b_stats", "switch", "memory", "stats", "--agent", "b.yaml", "--json")
        job("yaml_key.search", "yaml_key", "memory", "search", "deploy bot", "--agent", "agent.yaml", "--mode", "vector")
        (root / "jobs.json").write_text(json.dumps(jobs))
        env = dict(os.environ, EMB_KEY=OPENAI_KEY, GEMINI_API_KEY=GEMINI_KEY, LITELLM_LOCAL_MODEL_COST_MAP="True",
                   CLAWKIT_AUDIT_HOME=str(root / "audit"))
        env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install
        proc = subprocess.run([sys.executable, str(BATCH), str(root / "jobs.json"), str(root / "out.json")], env=env,
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results = {r["name"]: r for r in json.loads((root / "out.json").read_text())}
        # the fallback is logged once (a warning: shown with --verbose), in a process of its own
        results["auto_down.verbose"] = vars(subprocess.run(
            [sys.executable, "-m", "clawkit", "-v", "run", "agent.yaml", "who is the deploy bot? [ws verbose]"],
            cwd=root / "auto_down", env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL))
        yield results, list(model.requests), list(emb.seen), root


def _prompts(requests, ws: str) -> str:
    """What the model was sent in the run of workspace ``ws``."""
    return "\n".join(b for b in (json.dumps(r.body) for r in requests) if f"[ws {ws}]" in b)


@pytest.mark.parametrize("ws,space", [("openai", "openai/hashed-64"), ("gemini", "gemini/hashed-64"),
                                      ("auto_up", "gemini/hashed-64"), ("auto_down", "local/")])
def test_recall_through_each_provider(outcome, ws, space):
    results, requests, seen, root = outcome
    for step in ("index", "run", "stats"):
        assert results[f"{ws}.{step}"]["rc"] == 0, results[f"{ws}.{step}"]["stderr"][-2000:]
    stats = json.loads(results[f"{ws}.stats_json"]["stdout"])
    assert stats["model"].startswith(space), stats
    # the recalled fact reached the model's prompt (both wire formats)
    reply = json.loads(results[f"{ws}.run"]["stdout"])
    assert reply["reply"] == "ok"
    sent = _prompts(requests, ws)
    assert sent and "Gertrude" in sent


def test_each_api_was_spoken_as_documented(outcome):
    results, requests, seen, root = outcome
    oa = [s for s in seen if s["path"] == "/v1/embeddings"]
    assert oa and oa[0]["headers"]["Authorization"] == f"Bearer {OPENAI_KEY}"
    assert oa[0]["body"]["model"] == "hashed-64" and isinstance(oa[0]["body"]["input"], list)
    batch = [s for s in seen if s["path"] == "/v1beta/models/hashed-64:batchEmbedContents"]
    single = [s for s in seen if s["path"] == "/v1beta/models/hashed-64:embedContent"]
    assert batch and single and all(s["headers"]["X-Goog-Api-Key"] == GEMINI_KEY for s in batch + single)
    assert batch[0]["body"]["requests"][0]["model"] == "models/hashed-64"
    assert any(r["body"]["requests"][0].get("outputDimensionality") == 32 for r in batch)


def test_auto_falls_back_to_local_and_says_so(outcome):
    results, requests, seen, root = outcome
    text = results["auto_down.stats"]["stdout"]
    assert "auto: openai" in text and "failed" in text and "using the local model" in text, text
    assert "HTTP 500" in json.loads(results["auto_down.stats_json"]["stdout"])["embedder"]
    verbose = results["auto_down.verbose"]
    assert verbose["returncode"] == 0, verbose["stderr"][-2000:]
    assert verbose["stderr"].count("the openai provider failed") == 1, verbose["stderr"][-2000:]
    up = results["auto_up.stats"]["stdout"]
    assert "auto: gemini (gemini/hashed-64), local model as fallback" in up, up


def test_switching_provider_rebuilds_the_space(outcome):
    results, requests, seen, root = outcome
    a, b = (json.loads(results[f"switch.{x}_stats"]["stdout"]) for x in ("a", "b"))
    assert a["model"] == "openai/hashed-64" and b["model"] == "gemini/hashed-64@32"
    for x in ("a", "b"):
        hits = json.loads(results[f"switch.{x}"]["stdout"])
        assert hits and "Gertrude" in hits[0]["text"], hits
    conn = sqlite3.connect(root / "switch" / ".clawkit" / "memory.db")
    try:
        meta = dict(conn.execute("SELECT key, value FROM memory_meta").fetchall())
        spaces = {m for (m,) in conn.execute("SELECT DISTINCT model FROM memory_embeddings")}
    finally:
        conn.close()
    assert meta["model"] == "gemini/hashed-64@32" and meta["dims"] == "32"
    assert {"openai/hashed-64", "gemini/hashed-64@32"} <= spaces  # each kept under its own name, never mixed


def test_keys_from_the_environment_only(outcome):
    results, requests, seen, root = outcome
    bad = results["yaml_key.search"]
    assert bad["rc"] != 0 and "environment" in bad["stderr"] and OPENAI_KEY not in bad["stderr"]
    for name, r in results.items():
        if not name.startswith("yaml_key"):
            assert OPENAI_KEY not in r["stdout"] + r["stderr"] and GEMINI_KEY not in r["stdout"] + r["stderr"]
    for ws in ("openai", "gemini"):
        for db in ("memory.db", "state.db"):
            blob = (root / ws / ".clawkit" / db).read_bytes()
            assert OPENAI_KEY.encode() not in blob and GEMINI_KEY.encode() not in blob
