"""One-shot runs and chat first token: the whole ``clawkit`` install against simonw/llm, one run.

Run (see tests/benchmarks/README.md for the llm-alone environment):
    .venv/bin/python tests/benchmarks/bench_oneshot.py [--runs 9] [--llm /tmp/llm-alone/bin/llm]

Both programs talk to the same loopback OpenAI-compatible server (the test kit's
``ModelServer``, in this process: its CPU is not counted for either), which answers every
request with the same short streamed text.

* one-shot: ``clawkit run agent.yaml hi`` (every installed builtin plugin, persistence on,
  a fresh workspace per run) against ``llm -m scripted hi`` (llm alone in its own venv,
  configured through ``extra-openai-models.yaml``, logging to its own SQLite as it does by
  default). Whole process: CPU (user + system, from ``wait4``), wall, peak RSS.
* chat: ``clawkit chat agent.yaml`` and ``llm chat -m scripted``, one line on stdin; time
  from launch to the first byte of the streamed answer on stdout.

Runs are interleaved (clawkit, llm, llm, clawkit, …) so load hits both alike; the figures
are medians, and the ratios are clawkit / llm measured in this run. Bytecode is cached in a
temporary ``PYTHONPYCACHEPREFIX`` for both (as an installed package would be) after a
priming run. The load average is printed with the figures: run when the machine is quiet.

Goals (issue 13): CPU ≤ 1.5×, peak RSS ≤ 1.5×, chat first token ≤ 1.5×.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "kernel" / "src"))

from clawkit.testing.server import ModelServer, Reply  # noqa: E402

ANSWER = "Pong from the loopback model, nothing more."
MARKER = b"Pong"
GOAL = 1.5


def run_measured(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes | None = None,
                 first_marker: bytes | None = None, ok_codes: tuple[int, ...] = (0,)) -> dict[str, float]:
    """Run ``argv``; CPU and peak RSS of that process, wall time, and (with ``first_marker``)
    seconds from launch until the marker appeared on stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    first = None
    out = b""
    if stdin is not None:
        proc.stdin.write(stdin)
        proc.stdin.flush()
    if first_marker is not None:
        while MARKER not in out:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            out += chunk
        first = time.perf_counter() - t0
    proc.stdin.close()
    out += proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in ok_codes or MARKER not in out:
        raise SystemExit(f"broken run: {' '.join(argv)} exited {proc.returncode}\nstdout: {out[-500:]!r}\n"
                         f"stderr: {err[-2000:].decode(errors='replace')}")
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "rss": usage.ru_maxrss / 1024,
            **({"first": first} if first is not None else {})}


class Setup:
    def __init__(self, server: ModelServer, llm: str, root: Path, reuse: bool = False):
        self.server, self.llm, self.root, self.reuse = server, llm, root, reuse
        self.llm_home = root / "llm-home"
        self.llm_home.mkdir()
        (self.llm_home / "extra-openai-models.yaml").write_text(textwrap.dedent(f"""
            - model_id: scripted
              model_name: scripted
              api_base: "{server.url}"
              api_key_name: scripted
        """))
        (self.llm_home / "keys.json").write_text('{"scripted": "sk-loopback"}')
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONDONTWRITEBYTECODE", "CLAWKIT_LOAD_PLUGINS", "CLAWKIT_TRACE_PLUGINS")}
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        self.env = env
        self.clawkit = [str(Path(sys.executable).parent / "clawkit")]
        self.n = 0

    def workspace(self) -> Path:
        """A fresh clawkit workspace per run (a first run, as a new user's would be), or with
        ``--reuse-workspace`` one workspace for every run (memory then has sessions to index)."""
        self.n += 1
        ws = self.root / ("ws" if self.reuse else f"ws{self.n}")
        if ws.exists():
            return ws
        ws.mkdir()
        (ws / "agent.yaml").write_text(textwrap.dedent(f"""
            name: bench
            model: {{name: openai/scripted, api_base: "{self.server.url}", api_key: sk-loopback}}
            instructions: Answer briefly.
        """))
        return ws

    def clawkit_run(self) -> dict[str, float]:
        ws = self.workspace()
        return run_measured([*self.clawkit, "run", "agent.yaml", "hi"], self.env, ws)

    def llm_run(self) -> dict[str, float]:
        return run_measured([self.llm, "-m", "scripted", "hi"], {**self.env, "LLM_USER_PATH": str(self.llm_home)},
                            self.root)

    def clawkit_chat(self) -> dict[str, float]:
        ws = self.workspace()
        return run_measured([*self.clawkit, "chat", "agent.yaml"], self.env, ws, stdin=b"hi\n", first_marker=MARKER)

    def llm_chat(self) -> dict[str, float]:
        return run_measured([self.llm, "chat", "-m", "scripted"], {**self.env, "LLM_USER_PATH": str(self.llm_home)},
                            self.root, stdin=b"hi\n", first_marker=MARKER, ok_codes=(0, 1))  # EOF: "Aborted!"


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def report(title: str, ours: list[dict[str, float]], peer: list[dict[str, float]], keys: list[tuple[str, str, str]]) -> list[bool]:
    print(f"\n{title} (medians of {len(ours)} interleaved runs each)")
    print(f"  {'':<22}{'clawkit':>12}{'llm':>12}{'ratio':>9}  goal")
    met = []
    for key, label, unit in keys:
        a, b = median(ours, key), median(peer, key)
        scale = 1000 if unit == "ms" else 1
        goal = f"≤ {GOAL}×" if key in ("cpu", "rss", "first") else ""
        ok = a / b <= GOAL
        if goal:
            met.append(ok)
            goal += " met" if ok else " NOT MET"
        print(f"  {label:<22}{a * scale:>10.0f}{unit:>2}{b * scale:>10.0f}{unit:>2}{a / b:>8.2f}×  {goal}")
    return met


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--llm", default=os.environ.get("LLM_ALONE", "/tmp/llm-alone/bin/llm"),
                    help="the llm executable, installed alone in its own venv")
    ap.add_argument("--no-chat", action="store_true")
    ap.add_argument("--reuse-workspace", action="store_true",
                    help="every clawkit run in one workspace (past sessions to index and recall)")
    args = ap.parse_args()
    if not shutil.which(args.llm):
        print(f"llm not found at {args.llm}: see tests/benchmarks/README.md (llm alone in its own venv)")
        return 2
    root = Path(tempfile.mkdtemp(prefix="bench-oneshot-"))
    try:
        with ModelServer() as server:
            server.script(lambda request: Reply.text(ANSWER))
            s = Setup(server, args.llm, root, args.reuse_workspace)
            pairs = [("one-shot", s.clawkit_run, s.llm_run)]
            if not args.no_chat:
                pairs.append(("chat", s.clawkit_chat, s.llm_chat))
            results: dict[str, tuple[list, list]] = {name: ([], []) for name, _, _ in pairs}
            for name, ours, peer in pairs:  # priming: bytecode caches, llm's logs.db
                ours(), peer()
            load0 = os.getloadavg()
            for i in range(args.runs):
                for name, ours, peer in pairs:
                    first, second = (ours, peer) if i % 2 == 0 else (peer, ours)
                    a, b = first(), second()
                    results[name][0].append(a if first is ours else b)
                    results[name][1].append(b if first is ours else a)
            load1 = os.getloadavg()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {os.cpu_count()} CPUs")
    where = "one workspace for every run" if args.reuse_workspace else "a fresh workspace per run"
    print(f"clawkit: every builtin plugin, persistence on, {where}")
    met = report("one-shot: clawkit run agent.yaml hi  vs  llm -m scripted hi", *results["one-shot"],
                 [("cpu", "CPU (user+sys)", "ms"), ("wall", "wall", "ms"), ("rss", "peak RSS", "MiB")])
    if not args.no_chat:
        met += report("chat: launch to first streamed token", *results["chat"],
                      [("first", "first token", "ms"), ("cpu", "CPU (user+sys)", "ms")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
