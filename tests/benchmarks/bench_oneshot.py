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
* later one-shot runs (issue 29): the same command in ONE workspace that already holds
  ``--stored`` (default 20) earlier sessions, made by as many ``clawkit run`` calls before the
  measurement, and a ``MEMORY.md``; the prompt asks about something MEMORY.md holds, so
  memory's recall has work to do on every measured run (llm gets the same prompt).
* chat: ``clawkit chat agent.yaml`` and ``llm chat -m scripted``, one line on stdin; time
  from launch to the first byte of the streamed answer on stdout.

The baseline is llm when its executable is found (``--llm``), else the kernel alone
(``CLAWKIT_LOAD_PLUGINS=""``: no plugin, the kernel's native provider); the output says which.

Runs are interleaved (clawkit, llm, llm, clawkit, …) so load hits both alike; the figures
are medians, and the ratios are clawkit / llm measured in this run. Bytecode is cached in a
temporary ``PYTHONPYCACHEPREFIX`` for both (as an installed package would be) after a
priming run. The load average is printed with the figures: run when the machine is quiet.

Goals (issue 13, and issue 29 for the later runs): CPU ≤ 1.5×, peak RSS ≤ 1.5×, chat first
token ≤ 1.5×.
"""

from __future__ import annotations

import argparse
import os
import shutil
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

from clawkit.testing.server import ModelServer, Reply  # noqa: E402

ANSWER = "Pong from the loopback model, nothing more."
PROMPT = "what is the name of my cat, and what is it scared of?"
MEMORY_MD = """# About me

- My cat is called Miso; she hides under the bed when the vacuum cleaner runs.
- I deploy the billing service on Tuesdays, never on Fridays.
- My editor is Helix; I keep my dotfiles in a private repository.
"""
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
    def __init__(self, server: ModelServer, llm: str, root: Path):
        self.server, self.llm, self.root = server, llm, root
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
        """A fresh clawkit workspace per run (a first run, as a new user's would be)."""
        self.n += 1
        ws = self.root / f"ws{self.n}"
        ws.mkdir()
        (ws / "agent.yaml").write_text(self._agent_yaml())
        return ws

    def clawkit_run(self) -> dict[str, float]:
        ws = self.workspace()
        return run_measured([*self.clawkit, "run", "agent.yaml", PROMPT], self.env, ws)

    def stored_workspace(self, sessions: int) -> None:
        """The workspace of the later runs: MEMORY.md and ``sessions`` earlier one-shot sessions."""
        self.later_ws = self.root / "ws-later"
        self.later_ws.mkdir()
        (self.later_ws / "agent.yaml").write_text(self._agent_yaml())
        (self.later_ws / "MEMORY.md").write_text(MEMORY_MD)
        topics = ["the staging database", "my travel plans", "the quarterly report", "a recipe for soup",
                  "the release checklist"]
        for i in range(sessions):
            run_measured([*self.clawkit, "run", "agent.yaml", f"note {i}: remind me about {topics[i % len(topics)]}"],
                         self.env, self.later_ws)
        n = sqlite3.connect(self.later_ws / ".clawkit" / "state.db").execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
        if n < sessions:
            raise SystemExit(f"expected {sessions} stored sessions, found {n}")

    def _agent_yaml(self) -> str:
        return textwrap.dedent(f"""
            name: bench
            model: {{name: openai/scripted, api_base: "{self.server.url}", api_key: sk-loopback}}
            instructions: Answer briefly.
        """)

    def clawkit_later(self) -> dict[str, float]:
        return run_measured([*self.clawkit, "run", "agent.yaml", PROMPT], self.env, self.later_ws)

    def kernel_run(self) -> dict[str, float]:
        """The kernel alone (no plugin), fresh workspace: the baseline when llm is not installed."""
        ws = self.workspace()
        return run_measured([*self.clawkit, "run", "agent.yaml", PROMPT], {**self.env, "CLAWKIT_LOAD_PLUGINS": ""}, ws)

    def llm_run(self) -> dict[str, float]:
        return run_measured([self.llm, "-m", "scripted", PROMPT], {**self.env, "LLM_USER_PATH": str(self.llm_home)},
                            self.root)

    def clawkit_chat(self) -> dict[str, float]:
        ws = self.workspace()
        return run_measured([*self.clawkit, "chat", "agent.yaml"], self.env, ws, stdin=b"hi\n", first_marker=MARKER)

    def llm_chat(self) -> dict[str, float]:
        return run_measured([self.llm, "chat", "-m", "scripted"], {**self.env, "LLM_USER_PATH": str(self.llm_home)},
                            self.root, stdin=b"hi\n", first_marker=MARKER, ok_codes=(0, 1))  # EOF: "Aborted!"


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def report(title: str, ours: list[dict[str, float]], peer: list[dict[str, float]], keys: list[tuple[str, str, str]],
           peer_name: str = "llm") -> list[bool]:
    print(f"\n{title} (medians of {len(ours)} interleaved runs each)")
    print(f"  {'':<22}{'clawkit':>12}{peer_name[:10]:>12}{'ratio':>9}  goal")
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
                    help="the llm executable, installed alone in its own venv (else the kernel alone is the baseline)")
    ap.add_argument("--stored", type=int, default=20, help="earlier sessions in the later runs' workspace")
    ap.add_argument("--no-chat", action="store_true")
    args = ap.parse_args()
    have_llm = bool(shutil.which(args.llm))
    base_name = "llm" if have_llm else "kernel"
    root = Path(tempfile.mkdtemp(prefix="bench-oneshot-"))
    try:
        with ModelServer() as server:
            server.script(lambda request: Reply.text(ANSWER))
            s = Setup(server, args.llm, root)
            kinds = {"1st": s.clawkit_run, "later": s.clawkit_later, "base": s.llm_run if have_llm else s.kernel_run}
            if not args.no_chat and have_llm:
                kinds.update({"chat": s.clawkit_chat, "llm chat": s.llm_chat})
            s.clawkit_run()  # priming: bytecode caches
            s.stored_workspace(args.stored)
            for run in kinds.values():  # priming: llm's logs.db, the later workspace's first catch-up
                run()
            results: dict[str, list] = {k: [] for k in kinds}
            load0 = os.getloadavg()
            for i in range(args.runs):
                order = list(kinds) if i % 2 == 0 else list(reversed(kinds))  # interleaved, alternating
                for k in order:
                    results[k].append(kinds[k]())
            load1 = os.getloadavg()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {os.cpu_count()} CPUs")
    base = (f"llm ({args.llm} -m scripted)" if have_llm
            else "the kernel alone (CLAWKIT_LOAD_PLUGINS='', native provider): llm not found at " + args.llm)
    print(f"clawkit: every builtin plugin, persistence on; baseline: {base}")
    keys = [("cpu", "CPU (user+sys)", "ms"), ("wall", "wall", "ms"), ("rss", "peak RSS", "MiB")]
    report("one-shot, 1st run in a fresh workspace", results["1st"], results["base"], keys, base_name)
    report(f"one-shot, later runs in one workspace ({args.stored}+ stored sessions, MEMORY.md, recall)",
           results["later"], results["base"], keys, base_name)
    if "chat" in results:
        report("chat: launch to first streamed token", results["chat"], results["llm chat"],
               [("first", "first token", "ms"), ("cpu", "CPU (user+sys)", "ms")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
