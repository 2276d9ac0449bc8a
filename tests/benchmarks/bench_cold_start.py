"""Cold start of ``clawkit --help`` (all installed plugins) against a bare interpreter, one run.

Run:
    .venv/bin/python tests/benchmarks/bench_cold_start.py            [--runs 15] [--no-uncached] [--baseline OTHER/.venv/bin/clawkit]
    /tmp/benchvenv/bin/python tests/benchmarks/bench_cold_start.py   (adds ``llm --help`` when installed)

Each command is a fresh subprocess of this interpreter's environment, timed from spawn
to exit; the figure is the median (and p90) of ``--runs`` runs, the commands
interleaved so machine load hits them alike. Goal: ``clawkit --help`` under 150 ms.

Bytecode: this environment may set ``PYTHONDONTWRITEBYTECODE=1``, so ``.pyc`` files are
not written and every start recompiles whatever has none. Both cases are measured, and
neither writes into the repository or the venv — the bytecode lives in a temporary
``PYTHONPYCACHEPREFIX`` directory:

* cached: the prefix is filled by one priming run of each command (what an installed
  clawkit sees: pip/uv compile on install, or the first run writes the cache);
* uncached: an empty prefix and ``PYTHONDONTWRITEBYTECODE=1`` (every module compiled from source).

Then ``python -X importtime`` of ``clawkit --help`` (cached; median of 5) shows what the
plugins cost to import, each plugin module with what it pulled in first, and the heaviest
third-party packages — the candidates for lazy imports. A module's "cumulative" time is
charged to the first plugin that imports it. The run also checks that ``clawkit --help``
leaves litellm unimported.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from importlib import metadata
from pathlib import Path

BIN = Path(sys.executable).parent


def command(name: str) -> list[str] | None:
    """argv for a console script of this environment (None when not installed)."""
    script = BIN / name
    if script.exists():
        return [str(script)]
    found = shutil.which(name)
    return [found] if found and Path(found).parent == BIN else None


def targets() -> list[tuple[str, list[str], dict[str, str], str]]:
    """(label, argv, extra env, text the output must contain)."""
    py = sys.executable
    clawkit = command("clawkit") or [py, "-m", "clawkit"]
    out = [
        ("python -c pass", [py, "-c", "pass"], {}, ""),
        ("python -c 'import clawkit'", [py, "-c", "import clawkit"], {}, ""),
        ("clawkit --help (no plugins)", clawkit + ["--help"], {"CLAWKIT_LOAD_PLUGINS": ""}, "usage: clawkit"),
        ("clawkit --help", clawkit + ["--help"], {}, "usage: clawkit"),
    ]
    llm = command("llm")
    if llm:
        out.append(("llm --help", llm + ["--help"], {}, "Usage: llm"))
    if BASELINE:
        out.append(("clawkit --help [baseline]", [BASELINE, "--help"], {}, "usage: clawkit"))
    return out


BASELINE = ""  # --baseline: another checkout's clawkit (e.g. the commit before a change), measured interleaved


def run_once(argv: list[str], env: dict[str, str], expect: str) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t0
    if p.returncode != 0 or expect not in p.stdout:
        raise SystemExit(f"BROKEN RUN: {' '.join(argv)} exited {p.returncode}:\n{p.stdout[-500:]}\n{p.stderr[-2000:]}")
    return took


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def measure(runs: int, cache_dir: str, write: bool) -> dict[str, list[float]]:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "CLAWKIT_LOAD_PLUGINS")}
    base["PYTHONPYCACHEPREFIX"] = cache_dir
    base["XDG_CACHE_HOME"] = os.path.join(cache_dir, "xdg")  # the plugin-hook cache, primed like the bytecode
    if not write:
        base["PYTHONDONTWRITEBYTECODE"] = "1"
    todo = targets()
    for label, argv, extra, expect in todo:  # priming (fills the cache when writing) and a sanity check
        run_once(argv, {**base, **extra}, expect)
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        for label, argv, extra, expect in todo:
            samples[label].append(run_once(argv, {**base, **extra}, expect))
    return samples


LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def importtime(cache_dir: str, repeat: int) -> tuple[dict[str, float], dict[str, float], dict[str, str], set[str]]:
    """For clawkit --help: median self and cumulative us per module, the plugin package each module was
    first imported under, and the modules loaded at the end.

    ``-X importtime`` only times ``import`` statements: entry points load through importlib and get
    no line of their own, but everything their packages import does.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS",)}
    env["PYTHONPYCACHEPREFIX"] = cache_dir
    selfs: dict[str, list[int]] = defaultdict(list)
    cums: dict[str, list[int]] = defaultdict(list)
    owner: dict[str, str] = {}
    modules: set[str] = set()
    for _ in range(repeat):
        p = subprocess.run([sys.executable, "-X", "importtime", "-c",
                            "import sys; sys.argv = ['clawkit', '--help']\nfrom clawkit.cli import main\n"
                            "try:\n    main()\nexcept SystemExit:\n    pass\nimport sys as _s\n"
                            "print('MODULES', ' '.join(sorted(_s.modules)), file=_s.stderr)"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        stack: list[tuple[int, str]] = []
        lines = p.stderr.splitlines()
        for line in lines:
            if line.startswith("MODULES "):
                modules = set(line.split()[1:])
        # importtime prints children before their parent: walk backwards to know each module's ancestors
        for line in reversed(lines):
            m = LINE.match(line)
            if not m:
                continue
            s, c, indent, name = int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)
            while stack and stack[-1][0] >= indent:
                stack.pop()
            plugin = next((n.split(".")[0] for _, n in stack if n.startswith("clawkit_")), None)
            if plugin and not name.startswith("clawkit_"):
                owner[name] = plugin
            stack.append((indent, name))
            selfs[name].append(s)
            cums[name].append(c)
    med_self = {k: statistics.median(v) for k, v in selfs.items()}
    med_cum = {k: statistics.median(v) for k, v in cums.items()}
    return med_self, med_cum, owner, modules


IN_ORDER = """
import json, sys, time
import clawkit, clawkit.cli, clawkit.hooks
from clawkit.plugins import _entry_points, _load, get_plugin_manager

def tops():
    return {m.split(".")[0] for m in sys.modules}

load, cmds, new = {}, {}, {}
names = {}
for ep in _entry_points():
    mod = names[ep.name] = ep.value.split(":")[0]
    before = tops()
    t = time.perf_counter()
    _load(ep)  # as the kernel loads it: read from its source, imported on a hook's first call
    load[mod] = time.perf_counter() - t
    new[mod] = sorted(tops() - before)

orig = clawkit.hooks.HookRunner.impls

def impls(self, name):  # time each plugin's register_commands as clawkit --help runs it
    found = orig(self, name)
    if name != "register_commands":
        return found

    def timed(plugin, fn):
        def call(**kw):
            before = tops()
            t = time.perf_counter()
            try:
                return fn(**kw)
            finally:
                mod = names.get(plugin, plugin)
                cmds[mod] = time.perf_counter() - t
                new[mod] = sorted(set(new.get(mod, [])) | (tops() - before))
        return call

    return [(p, timed(p, f), a) for p, f, a in found]

clawkit.hooks.HookRunner.impls = impls
clawkit.cli.build_parser(get_plugin_manager())
print(json.dumps([load, cmds, new]))
"""


def in_order(cache_dir: str, repeat: int) -> tuple[dict[str, float], dict[str, float], dict[str, list[str]]]:
    """As ``clawkit --help`` runs them, in one process: seconds each entry point's load takes
    (in clawkit's loading order) and its ``register_commands`` (median of ``repeat``), and the
    top-level packages each plugin loaded first."""
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}
    env["PYTHONPYCACHEPREFIX"] = cache_dir
    loads: dict[str, list[float]] = defaultdict(list)
    cmds: dict[str, list[float]] = defaultdict(list)
    first: dict[str, list[str]] = {}
    for _ in range(repeat):
        p = subprocess.run([sys.executable, "-c", IN_ORDER], env=env, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"BROKEN RUN: loading the plugins failed:\n{p.stderr[-2000:]}")
        load, cmd, first = json.loads(p.stdout)
        for mod, t in load.items():
            loads[mod].append(t)
        for mod, t in cmd.items():
            cmds[mod].append(t)
    med = statistics.median
    return {m: med(v) for m, v in loads.items()}, {m: med(v) for m, v in cmds.items()}, first


def isolated(cache_dir: str, plugin_modules: list[str], repeat: int) -> dict[str, float]:
    """Seconds to import each plugin module alone, after the kernel (median of ``repeat`` subprocesses)."""
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}
    env["PYTHONPYCACHEPREFIX"] = cache_dir
    code = ("import sys, time\nimport clawkit, clawkit.cli, clawkit.loop\nt = time.perf_counter()\n"
            "import importlib; importlib.import_module(sys.argv[1])\nprint(time.perf_counter() - t)")
    out: dict[str, list[float]] = defaultdict(list)
    for _ in range(repeat):
        for mod in plugin_modules:
            p = subprocess.run([sys.executable, "-c", code, mod], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"BROKEN RUN: importing {mod} failed:\n{p.stderr[-2000:]}")
            out[mod].append(float(p.stdout.strip()))
    return {m: statistics.median(v) for m, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="runs per command and bytecode mode (default 15)")
    ap.add_argument("--no-uncached", dest="uncached", action="store_false", help="skip the no-bytecode-cache mode")
    ap.add_argument("--importtime-runs", type=int, default=5)
    ap.add_argument("--baseline", default="", metavar="CLAWKIT",
                    help="another install's clawkit executable (e.g. a venv of the commit before a change), run interleaved")
    args = ap.parse_args()
    global BASELINE
    BASELINE = args.baseline

    plugins = sorted({ep.name for ep in metadata.entry_points(group="clawkit")})
    print(f"Python {sys.version.split()[0]} ({sys.executable}) on {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    print("clawkit plugins installed: " + ", ".join(plugins))
    if not command("llm"):
        print("skipped: llm --help (simonw/llm not installed here; see tests/benchmarks/README.md)")
    modes: list[tuple[str, dict[str, list[float]]]] = []
    with tempfile.TemporaryDirectory(prefix="clawkit-pyc-") as cached, tempfile.TemporaryDirectory(prefix="clawkit-nopyc-") as empty:
        t0 = time.perf_counter()
        modes.append(("bytecode cached", measure(args.runs, cached, write=True)))
        if args.uncached:
            modes.append(("no bytecode cache", measure(args.runs, empty, write=False)))
        took = time.perf_counter() - t0
        med_self, med_cum, owner, modules = importtime(cached, args.importtime_runs)
        eps = {ep.name: ep.value.split(":")[0] for ep in metadata.entry_points(group="clawkit")}
        alone = isolated(cached, sorted(set(eps.values())), args.importtime_runs)
        ordered, commands, first = in_order(cached, args.importtime_runs)

    print(f"\nmedian of {args.runs} runs each, wall ms from spawn to exit (p90 in brackets)")
    labels = [t[0] for t in targets()]
    head = f"{'command':30s}" + "".join(f"{m:>26s}" for m, _ in modes)
    print(head)
    for label in labels:
        row = f"{label:30s}"
        for _, samples in modes:
            s = samples[label]
            row += f"{statistics.median(s) * 1e3:16.0f} ({pct(s, 0.9) * 1e3:5.0f}) ms"
        print(row)
    for mode, samples in modes:
        bare = statistics.median(samples["python -c pass"])
        ck = statistics.median(samples["clawkit --help"])
        kern = statistics.median(samples["clawkit --help (no plugins)"])
        line = (f"{mode}: clawkit --help {ck * 1e3:.0f} ms = {ck / bare:.1f}x a bare interpreter "
                f"(+{(ck - bare) * 1e3:.0f} ms; plugins +{(ck - kern) * 1e3:.0f} ms)")
        if "clawkit --help [baseline]" in samples:
            base_ck = statistics.median(samples["clawkit --help [baseline]"])
            line += f"; baseline {base_ck * 1e3:.0f} ms, clawkit --help / baseline = {ck / base_ck:.3f}"
        if "llm --help" in samples:
            line += f"; llm --help / clawkit --help = {statistics.median(samples['llm --help']) / ck:.1f}x"
        print(line)
    ck = statistics.median(modes[0][1]["clawkit --help"])
    print("goal: clawkit --help under 150 ms (bytecode cached): " + ("met" if ck < 0.150 else f"NOT met ({ck * 1e3:.0f} ms)"))

    print(f"\nwhere clawkit --help spends its import time (bytecode cached, median of {args.importtime_runs} runs):")
    print("  per plugin, ms, as clawkit --help runs them in one process: 'load' = its entry point's import, in clawkit's"
          " loading order (a shared dependency is charged to the first plugin that imports it); 'commands' = its"
          " register_commands; 'alone' = its module imported by itself after the kernel; 'pulls in' = the heaviest"
          " packages it loaded first, with their own import time (-X importtime)")
    print(f"    {'plugin module':24s} {'load':>7s} {'commands':>9s} {'alone':>7s}   pulls in")
    by_pkg: dict[str, float] = defaultdict(float)
    for n, s in med_self.items():
        by_pkg[n.split(".")[0]] += s
    for mod in sorted(alone, key=lambda m: -(ordered.get(m, 0.0) + commands.get(m, 0.0))):
        heavy = sorted(((p, by_pkg.get(p, 0.0)) for p in first.get(mod, []) if p != mod), key=lambda kv: -kv[1])[:5]
        pulled = ", ".join(f"{p} {c / 1e3:.1f}" for p, c in heavy if c >= 1000)
        cmd = f"{commands[mod] * 1e3:9.1f}" if mod in commands else f"{'-':>9s}"
        print(f"    {mod:24s} {ordered.get(mod, 0.0) * 1e3:7.1f} {cmd} {alone[mod] * 1e3:7.1f}   {pulled}")
    print(f"    {'total':24s} {sum(ordered.values()) * 1e3:7.1f} {sum(commands.values()) * 1e3:9.1f}")
    kernel = [n for n in ("clawkit", "clawkit.cli", "pluggy", "pydantic", "yaml") if n in med_cum]
    print("  kernel: " + ", ".join(f"{n} {med_cum[n] / 1e3:.1f}" for n in kernel))
    stdlib = set(sys.stdlib_module_names)
    third = sorted(((p, s) for p, s in by_pkg.items() if p not in stdlib and not p.startswith(("clawkit", "_"))),
                   key=lambda kv: -kv[1])[:12]
    print("  heaviest third-party packages (summed self time): " + ", ".join(f"{p} {s / 1e3:.1f}" for p, s in third))
    print(f"  litellm imported by clawkit --help: {'YES (it should not be)' if 'litellm' in modules else 'no'}")
    print(f"\nmeasured in {took:.1f} s; load average {os.getloadavg()[0]:.1f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
