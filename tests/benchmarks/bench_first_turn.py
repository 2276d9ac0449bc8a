"""The first turn of a one-shot run: does the classification shape its prompt, and does memory
recall reach it? Measures what the defaults ``plugins.classifier.wait_ms`` and
``plugins.memory.recall.load_wait_ms`` are chosen from.

Run:
    .venv/bin/python tests/benchmarks/bench_first_turn.py [--runs 5] [--delays 0,150,300,600]

Every run is a fresh ``clawkit run`` process with every builtin plugin, against the test kit's
loopback ``ModelServer`` (in this process). The classifier is a second model on the same
server, answering after a chosen delay (standing in for a hosted small model's latency);
its answer's domain ``security`` selects a tagged contributor, so the main request shows
whether the classification shaped the first prompt.

Part 1, classification (``wait_ms`` 5000, so nothing is cut): per run, from the
``classifier.timing`` event, ``warm_ms`` (the classifier provider's set-up: imports, not
counted in any budget) and ``request_ms`` (request → parsed answer; ``wait_ms`` counts from
the request). The overhead at delay 0 is what clawkit adds to a classifier's own latency.
Then the default ``wait_ms`` is checked: the share of first prompts classified per delay.

Part 2, recall: a workspace with a MEMORY.md fact, one question per fresh process, read
through the Python API (``ctx.state["memory.recall"]``): the embedding model's load
(``load_ms``, overlapping the rest of the turn), the query embedding and search, and
whether the fact reached the prompt with the default ``load_wait_ms``.

The load average is printed with the figures: absolute numbers move with it.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "kernel" / "src"))

from clawkit.testing.server import ModelServer  # noqa: E402

CLASSIFICATION = json.dumps({"label": "reviewing a login form for injection", "topic": "coding",
                             "complexity": "moderate", "domain": ["security"], "flags": []})
SECTION = "SECURITY-SECTION-SHAPED-BY-CLASSIFICATION"

PROBE = textwrap.dedent("""
    import json, sys
    from clawkit import hookimpl
    from clawkit.runtime import open_agent
    seen = {}
    class Spy:
        @hookimpl
        def before_llm_call(self, ctx, request):
            st = ctx.state.get("memory.recall") or {}
            seen.setdefault("recall", {"timings": st.get("timings"), "waited_ms": st.get("waited_ms"),
                                       "timed_out": st.get("timed_out"), "served": "## Relevant memory" in request.system})
    agent = open_agent(sys.argv[1], extra_plugins=(Spy(),))
    try:
        agent.run(sys.argv[2])
    finally:
        agent.close()
    print(json.dumps(seen.get("recall")))
""")


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": str(home), "NO_COLOR": "1"})
    return env


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def classification(server: ModelServer, runs: int, delays: list[int], wait_ms: int | None, root: Path) -> dict:
    state = {"delay": 0.0}

    def answer(request) -> str:
        system = next((m["content"] for m in request.messages if m["role"] == "system"), "")
        if "You classify a conversation" in system:
            time.sleep(state["delay"])
            return CLASSIFICATION
        return "ok"

    server.reset()
    server.script(answer)
    out: dict[int, dict] = {}
    for delay in delays:
        state["delay"] = delay / 1000
        rows = []
        for i in range(runs):
            ws = root / f"c{wait_ms}-{delay}-{i}"
            ws.mkdir(parents=True)
            wait = f"wait_ms: {wait_ms}, " if wait_ms is not None else ""
            (ws / "agent.yaml").write_text(
                f'name: first\nmodel: {{name: openai/main, api_base: "{server.url}", api_key: x, max_retries: 0}}\n'
                f"instructions: You help.\ntools: [read_file]\n"
                f'plugins: {{classifier: {{{wait}model: {{name: openai/classify, api_base: "{server.url}", api_key: x}}}}}}\n'
                f"contributors:\n  - id: sec\n    content: {SECTION}\n    tags: [domain:security]\n")
            n = len(server.requests)
            r = subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", "Please check my login form code."],
                               cwd=ws, env=env_for(ws), capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise SystemExit(f"clawkit run failed: {r.stderr[-2000:]}")
            main = [q for q in server.requests[n:] if "You classify" not in
                    next((m["content"] for m in q.messages if m["role"] == "system"), "")]
            shaped = any(SECTION in (q.messages[0].get("content") or "") for q in main[:1])
            db = sqlite3.connect(ws / ".clawkit" / "state.db")
            timing = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE type = 'classifier.timing'")]
            db.close()
            rows.append({"shaped": shaped, **(timing[0] if timing else {"warm_ms": float("nan"), "request_ms": float("nan")})})
        out[delay] = {
            "classified_first_prompt": sum(r["shaped"] for r in rows) / len(rows),
            "warm_ms_p50": statistics.median(r["warm_ms"] for r in rows),
            "warm_ms_max": max(r["warm_ms"] for r in rows),
            "request_ms_p50": statistics.median(r["request_ms"] for r in rows),
            "request_ms_max": max(r["request_ms"] for r in rows),
            "overhead_ms_max": max(r["request_ms"] for r in rows) - delay,
        }
    return out


def recall(server: ModelServer, runs: int, root: Path) -> list[dict]:
    server.reset()
    server.script(lambda request: "ok")
    ws = root / "recall"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("# Deploys\n\nThe production deploy window is Thursday 14:00 UTC.\n")
    (ws / "agent.yaml").write_text(
        f'name: first\nmodel: {{name: openai/main, api_base: "{server.url}", api_key: x, max_retries: 0}}\n'
        "instructions: You help.\ntools: [read_file]\n")
    rows = []
    for _ in range(runs + 1):  # the first run builds the index: not measured
        r = subprocess.run([sys.executable, "-c", PROBE, str(ws / "agent.yaml"), "When is the production deploy window?"],
                           cwd=ws, env=env_for(ws), capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise SystemExit(f"probe failed: {r.stderr[-2000:]}")
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return rows[1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--delays", default="0,150,300,600", help="classifier answer delays in ms")
    args = ap.parse_args()
    delays = [int(d) for d in args.delays.split(",")]
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (2-core machine expected)")
    with tempfile.TemporaryDirectory() as tmp, ModelServer() as server:
        root = Path(tmp)
        print(f"\n1a. classification, wait_ms 5000 (nothing cut), {args.runs} fresh `clawkit run` per delay")
        print(f"{'delay':>6} {'classified':>10} {'warm p50':>9} {'warm max':>9} {'req p50':>8} {'req max':>8} {'overhead max':>12}")
        for delay, r in classification(server, args.runs, delays, 5000, root / "a").items():
            print(f"{delay:>6} {r['classified_first_prompt']:>10.0%} {r['warm_ms_p50']:>9.0f} {r['warm_ms_max']:>9.0f}"
                  f" {r['request_ms_p50']:>8.0f} {r['request_ms_max']:>8.0f} {r['overhead_ms_max']:>12.0f}")
        print(f"\n1b. classification with the default wait_ms, {args.runs} runs per delay")
        for delay, r in classification(server, args.runs, delays, None, root / "b").items():
            print(f"{delay:>6} ms: first prompt classified in {r['classified_first_prompt']:.0%} of runs "
                  f"(request → answer p50 {r['request_ms_p50']:.0f} ms, max {r['request_ms_max']:.0f} ms)")
        print(f"\n2. recall in a fresh process, default load_wait_ms, {args.runs} runs")
        rows = recall(server, args.runs, root)
        for key in ("load_ms", "embed_ms", "search_ms"):
            vals = [r["timings"].get(key, 0.0) for r in rows if r and r.get("timings")]
            if vals:
                print(f"   {key:<10} p50 {statistics.median(vals):7.0f} ms   max {max(vals):7.0f} ms")
        waited = [r["waited_ms"] for r in rows if r and r.get("waited_ms") is not None]
        if waited:
            print(f"   waited     p50 {statistics.median(waited):7.0f} ms   max {max(waited):7.0f} ms (from the message's arrival)")
        print(f"   fact in the first prompt: {sum(bool(r and r['served']) for r in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()
