"""How many approvals a realistic coding session asks for (issue 30 item 1: taint by provenance).

A 20-turn session in a small Python repository, through the real CLI (``clawkit run … --session S``
once per turn, in one interpreter via tests/security/cli_batch.py) with every builtin plugin
loaded, the model the loopback scripted server: look around, read sources and tests, run the
tests (a granted command), grep, edit, write a new test, read a doc, fetch a docs page from a
(granted, loopback) docs server, update the plan. Runs are non-interactive, so each question is
answered "no"; the count is the questions asked (ledger ``approval`` rows), split by why.

Configurations: the sandbox on (bubblewrap, the default) or off, times what the user vouches for
(``plugins.policy``): nothing; ``trusted_paths: ["src/**", "tests/**"]``; the whole repository
(``trusted_paths: ["."]``) and the granted commands' output (``trusted_commands``). Compare code
versions with ``--src``::

    git worktree add /tmp/old-main bf8c464          # the main before provenance (no venv needed)
    python tests/benchmarks/bench_approvals.py --src /tmp/old-main --trust none
    python tests/benchmarks/bench_approvals.py      # this checkout

``--src ROOT`` runs the CLI with ROOT's kernel and plugin sources first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "kernel" / "src"))

from clawkit.testing.server import ModelServer, Reply  # noqa: E402

BATCH = ROOT / "tests" / "security" / "cli_batch.py"

CALC = '''def add(a, b):
    return a - b  # bug


def mean(xs):
    return sum(xs) / len(xs)
'''
UTIL = '''def slug(text):
    return text.lower().replace(" ", "-")
'''
TEST = '''import unittest

from src.calc import add, mean


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 2), 4)

    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)
'''
EXTRA = '''import unittest

from src.util import slug


class UtilTest(unittest.TestCase):
    def test_slug(self):
        self.assertEqual(slug("Hello World"), "hello-world")
'''


def repo(ws: Path) -> None:
    for rel, text in {"README.md": "# calc\nA tiny calculator. Run the tests with `python3 -m unittest`.\n",
                      "src/__init__.py": "", "src/calc.py": CALC, "src/util.py": UTIL, "tests/__init__.py": "",
                      "tests/test_calc.py": TEST, "docs/usage.md": "# Usage\n\n`add(a, b)` adds.\n"}.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)


def session(docs_url: str) -> list[list]:
    """The 20 turns: each a list of replies (tool-call batches, then the final text)."""
    t = Reply.tool_calls
    test = ("shell_exec", {"command": "python3 -m unittest -q"})
    return [
        [t([("list_dir", {"path": "."}), ("read_file", {"path": "README.md"})]), "A small calculator repo."],
        [t([("read_file", {"path": "src/calc.py"})]), "add subtracts: a bug."],
        [t([("glob", {"pattern": "**/*.py"})]), "Five Python files."],
        [t([test]), "One test fails."],
        [t([("read_file", {"path": "tests/test_calc.py"})]), "The test expects 4."],
        [t([("edit_file", {"path": "src/calc.py", "old": "return a - b  # bug", "new": "return a + b"})]), "Fixed."],
        [t([test]), "Tests pass."],
        [t([("shell_exec", {"command": "grep -n def src/calc.py"})]), "Two functions."],
        [t([("write_file", {"path": "tests/test_extra.py", "content": EXTRA})]), "Added a test."],
        [t([test]), "Three tests pass."],
        [t([("shell_exec", {"command": "ls -la src"})]), "Listed."],
        [t([("read_file", {"path": "docs/usage.md"})]), "The usage doc."],
        [t([("edit_file", {"path": "docs/usage.md", "old": "adds.", "new": "adds two numbers."})]), "Doc updated."],
        [t([("update_plan", {"steps": [{"title": "fix add", "status": "done"}, {"title": "document", "status": "done"}]})]),
         "Plan updated."],
        [t([("shell_exec", {"command": "python3 -m unittest -q tests.test_extra"})]), "Passes."],
        [t([("web_fetch", {"url": f"{docs_url}/unittest.html"})]), "Read the unittest docs."],
        [t([("read_file", {"path": "src/util.py"})]), "slug is simple."],
        [t([("edit_file", {"path": "src/util.py", "old": "text.lower()", "new": "text.strip().lower()"})]), "Edited."],
        [t([test]), "All pass."],
        [t([("shell_exec", {"command": "python3 -m unittest -q"})]), "Done: add fixed, slug hardened, docs updated."],
    ]


class Script:
    """The model: the n-th answer after the latest user message tagged ``[turn K]`` is turn K's n-th reply."""

    def __init__(self, turns: list[list]):
        self.turns = turns

    def __call__(self, request):
        last = None
        for i, msg in enumerate(request.messages):
            if msg.get("role") == "user":
                m = re.search(r"\[turn (\d+)\]", json.dumps(msg.get("content")))
                if m:
                    last = (i, int(m.group(1)))
        if last is None:
            return "ok"
        start, k = last
        step = sum(1 for msg in request.messages[start:] if msg.get("role") == "assistant")
        replies = self.turns[k]
        return replies[step] if step < len(replies) else "ok"


class Docs(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = b"<html><body><h1>unittest</h1><p>Unit testing framework.</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


TRUST = {  # how much the user vouches for (plugins.policy)
    "none": "",
    "src,tests": '    trusted_paths: ["src/**", "tests/**"]\n',
    "repo+cmds": '    trusted_paths: ["."]\n    trusted_commands: ["python3 -m unittest*", "grep *", "ls*"]\n',
}


def agent_yaml(model_url: str, docs_host: str, sandbox: str, trust: str) -> str:
    body = textwrap.dedent(f"""\
        name: coder
        model: {{name: openai/test, api_base: "{model_url}", api_key: sk-test, max_retries: 0, timeout: 20}}
        tools: [read_file, write_file, edit_file, list_dir, glob, shell_exec, web_fetch, update_plan]
        plugins:
          sandbox: {{mode: {sandbox}}}
          policy:
            grants:
              - {{tools: [shell_exec], commands: ["python3 -m unittest*", "grep *", "ls*"]}}
              - {{tools: [web_fetch], hosts: ["{docs_host}"]}}
        """)
    return body + TRUST[trust]


def count(ws: Path, session_id: str) -> dict:
    conn = sqlite3.connect(ws / ".clawkit" / "state.db")
    try:
        rows = conn.execute("SELECT tool, reason FROM policy_audit WHERE session_id = ? AND kind = 'approval'",
                            (session_id,)).fetchall()
        first = conn.execute("SELECT data FROM policy_audit WHERE session_id = ? AND decision = 'provenance.untrusted' "
                             "ORDER BY seq LIMIT 1", (session_id,)).fetchone()
    finally:
        conn.close()
    why: dict[str, int] = {}
    for tool, reason in rows:
        reason = reason or ""
        key = ("untrusted content" if "untrusted" in reason else "guarded" if "guarded" in reason
               else "unsafe" if "unsafe" in reason else "other")
        why[f"{tool}: {key}"] = why.get(f"{tool}: {key}", 0) + 1
    marked = None
    if first:
        data = json.loads(first[0])
        marked = f"{data.get('kind') or '?'} `{data.get('detail') or data.get('source') or '?'}`"
    return {"asked": len(rows), "by": dict(sorted(why.items())), "first_untrusted": marked}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=str(ROOT), help="a checkout whose kernel and plugin sources run the CLI")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--trust", nargs="+", default=list(TRUST), choices=list(TRUST),
                    help="trust levels to run (old code rejects the trusted_* keys: use --trust none)")
    ap.add_argument("--sandbox", nargs="+", default=["bwrap", "off"], choices=["bwrap", "off"])
    args = ap.parse_args()
    src = Path(args.src).resolve()
    paths = [src / "kernel" / "src", *sorted((src / "plugins" / "builtin").glob("*/src"))]
    docs = ThreadingHTTPServer(("127.0.0.1", 0), Docs)
    threading.Thread(target=docs.serve_forever, daemon=True).start()
    docs_host = f"127.0.0.1:{docs.server_address[1]}"
    turns = session(f"http://{docs_host}")
    configs = [(s, t) for s in args.sandbox for t in args.trust]
    results = {}
    with ModelServer() as model, tempfile.TemporaryDirectory(prefix="bench-approvals-") as tmp:
        model.script(Script(turns))
        jobs, where = [], {}
        for sandbox, trusted in configs:
            name = f"sandbox={sandbox} trusted={trusted}"
            ws = Path(tmp) / f"{sandbox}-{trusted.replace(',', '-').replace('+', '-')}"
            ws.mkdir()
            repo(ws)
            (ws / "agent.yaml").write_text(agent_yaml(model.url, docs_host, sandbox, trusted))
            sid = f"ses_bench_{ws.name}"
            where[name] = (ws, sid)
            for k in range(len(turns)):
                flag = "--new-session" if k == 0 else "--session"
                jobs.append({"name": f"{name}/{k}", "cwd": str(ws),
                             "argv": ["run", "agent.yaml", f"[turn {k}] next step", "--json", flag, sid]})
        (Path(tmp) / "jobs.json").write_text(json.dumps(jobs))
        env = dict(os.environ)
        env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install: every builtin plugin
        env["PYTHONPATH"] = os.pathsep.join(map(str, paths)) + os.pathsep + env.get("PYTHONPATH", "")
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        env["CLAWKIT_AUDIT_HOME"] = str(Path(tmp) / "audit")
        proc = subprocess.run([sys.executable, str(BATCH), str(Path(tmp) / "jobs.json"), str(Path(tmp) / "out.json")],
                              env=env, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            sys.exit(proc.stderr[-3000:])
        failed = [o for o in json.loads((Path(tmp) / "out.json").read_text()) if o["rc"] != 0]
        if failed:
            sys.exit(f"{len(failed)} turns failed; first: {failed[0]['name']}: {failed[0]['stderr'][-2000:]}")
        for name, (ws, sid) in where.items():
            results[name] = count(ws, sid)
    docs.shutdown()
    if args.json:
        print(json.dumps({"src": str(src), "turns": len(turns), "results": results}, indent=1))
        return
    print(f"approvals asked in a {len(turns)}-turn coding session (code: {src})")
    for name, r in results.items():
        print(f"  {name:34s} {r['asked']:3d}   {', '.join(f'{k} x{v}' for k, v in r['by'].items())}"
              + (f"   (first untrusted: {r['first_untrusted']})" if r.get("first_untrusted") else ""))


if __name__ == "__main__":
    main()
