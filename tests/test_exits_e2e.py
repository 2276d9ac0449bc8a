"""`clawkit run` with every builtin plugin loaded (classifier configured, memory with stored
episodes and a recall, a tool call) exits 0 every time, none by a signal,
none hanging. 12 runs in a row here (CLAWKIT_EXIT_RUNS for more); the same loop at 200 runs: tests/benchmarks/bench_exits.py."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
RUNS = int(os.environ.get("CLAWKIT_EXIT_RUNS", "12"))  # 200 in tests/benchmarks/bench_exits.py


def _bench():
    path = Path(__file__).parent / "benchmarks" / "bench_exits.py"
    spec = importlib.util.spec_from_file_location("bench_exits", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_full_install_run_exits_cleanly_every_time(tmp_path):
    bench = _bench()
    outcomes = bench.run_many(RUNS, tmp_path)
    problems = [f"run {i}: {o.problem}" for i, o in enumerate(outcomes, 1) if o.abnormal]
    assert not problems, "\n".join(problems)
    assert all(o.code == 0 for o in outcomes) and len(outcomes) == RUNS
    # the memory really had an episode to recall: earlier runs' turns are indexed
    import sqlite3

    db = sqlite3.connect(tmp_path / "ws" / ".clawkit" / "state.db")
    assert db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == RUNS
