"""Abnormal exits of `clawkit run` with the full install: N runs in a row, counted.

Every builtin plugin is loaded; the agent has a classifier model, memory (a MEMORY.md
and, after the first run, stored episodes that each run recalls) and a tool call per
turn, against the loopback model server. An abnormal exit is a non-zero code, a death
by signal (the SIGABRT of a native thread alive at teardown), a run that hangs past
the time bound, or a Python warning/traceback on stderr. Goal: 0.

    .venv/bin/python tests/benchmarks/bench_exits.py            # 200 runs
    .venv/bin/python tests/benchmarks/bench_exits.py --runs 20  # quicker

``tests/test_exits_e2e.py`` runs the same thing 30 times in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from clawkit.testing.server import ModelServer, Reply

CLASSIFIER_MARK = "You classify"
BAD_STDERR = ("Traceback", "Warning:", "was never awaited", "terminate called", "Exception ignored")


def respond(req):
    """Classifier prompts get a verdict; the main model calls read_file, then answers."""
    system = next((m.get("content") or "" for m in req.messages if m.get("role") == "system"), "")
    if system.startswith(CLASSIFIER_MARK):
        return json.dumps({"label": "notes", "topic": "coding", "complexity": "simple", "domain": ["notes"], "flags": []})
    if req.messages and req.messages[-1].get("role") == "tool":
        return "Your notes say the sky is teal."
    return Reply.tool_calls([("read_file", {"path": "notes.txt"})])


def build_workspace(root: Path, url: str) -> Path:
    """An agent directory for the full install; returns the agent file."""
    ws = root / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "notes.txt").write_text("the sky is teal\n")
    (ws / "MEMORY.md").write_text("# Memory\n\nThe user likes teal skies and short answers about their notes.\n")
    model = {"name": "openai/main-model", "api_base": url, "api_key": "sk-test", "max_retries": 1}
    agent = {
        "name": "exits", "model": model, "instructions": "You read the user's notes.", "workspace": "ws",
        "tools": ["read_file", "memory_search"],
        "plugins": {"classifier": {"model": {"name": "openai/tiny-classifier", "api_base": url, "api_key": "sk-test"}}},
    }
    path = root / "agent.yaml"
    path.write_text(yaml.safe_dump(agent))
    return path


@dataclass
class Outcome:
    code: int
    seconds: float
    problem: str = ""

    @property
    def abnormal(self) -> bool:
        return bool(self.problem)


def one_run(agent: Path, n: int, timeout: float = 180.0) -> Outcome:
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}  # every builtin plugin
    started = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "clawkit", "run", agent.name, f"what do my notes say? ({n})"],
                           cwd=agent.parent, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Outcome(-1, time.monotonic() - started, f"hung for more than {timeout:g}s")
    took = time.monotonic() - started
    if p.returncode < 0:
        return Outcome(p.returncode, took, f"killed by signal {-p.returncode}: {p.stderr[-300:]}")
    if p.returncode != 0:
        return Outcome(p.returncode, took, f"exit {p.returncode}: {p.stderr[-300:]}")
    if "sky is teal" not in p.stdout:
        return Outcome(p.returncode, took, f"wrong reply: {p.stdout[-200:]!r}")
    bad = [b for b in BAD_STDERR if b in p.stderr]
    if bad:
        return Outcome(p.returncode, took, f"stderr has {bad}: {p.stderr[-300:]}")
    return Outcome(p.returncode, took)


def run_many(count: int, root: Path, progress: bool = False) -> list[Outcome]:
    with ModelServer() as server:
        server.script(respond)
        agent = build_workspace(root, server.url)
        outcomes = []
        for n in range(1, count + 1):
            outcomes.append(one_run(agent, n))
            if progress:
                o = outcomes[-1]
                print(f"run {n:4}: exit {o.code:4} in {o.seconds:5.1f}s {o.problem[:160]}", flush=True)
        return outcomes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    print(f"load average: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = run_many(args.runs, Path(tmp), progress=not args.quiet)
    bad = [o for o in outcomes if o.abnormal]
    times = sorted(o.seconds for o in outcomes)
    print(f"\n{len(outcomes)} runs, {len(bad)} abnormal exits "
          f"({sum(o.code < 0 for o in bad)} by signal, {sum(o.code == -1 for o in bad)} hung); "
          f"time per run: median {times[len(times) // 2]:.1f}s, max {times[-1]:.1f}s")
    for o in bad[:10]:
        print(f"  - {o.problem[:300]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
