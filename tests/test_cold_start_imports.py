"""``clawkit --help`` imports every plugin's entry-point module (so plugins can add commands):
those modules must stay thin. Heavy libraries load inside the hooks and handlers that use them.

Each check runs in a fresh interpreter: load the plugins' entry points one by one, then build
the CLI parser (what ``clawkit --help`` does), and report which modules each step imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Never on the ``clawkit --help`` path, whatever is installed (tens to hundreds of ms each).
HEAVY = (
    "numpy", "litellm", "onnxruntime", "tokenizers", "tiktoken", "jsonschema", "json_repair", "watchfiles",
    "sqlite_vec", "sqlite_utils", "pysqlite3", "httpx", "openai", "re2", "regex", "wcmatch", "bs4", "lxml",
    "starlette", "uvicorn", "opentelemetry",
)
#: Cheaper, but together they cost more than the whole kernel start: builtin plugins must not
#: import them at import time either (unless the kernel itself already does).
MODERATE = (
    "pydantic", "pydantic_core", "yaml", "sqlite3", "asyncio", "concurrent.futures", "clawkit.types",
    "clawkit.config", "clawkit.prompt", "clawkit.tools", "clawkit.tokens",
)

PROBE = r"""
import json, sys
from importlib import metadata

def snapshot():
    return set(sys.modules)

from clawkit.cli import build_parser
from clawkit.plugins import get_plugin_manager, _load, _wanted_distributions, _norm

wanted = _wanted_distributions()
steps = {}
seen = snapshot()
for ep in metadata.entry_points(group="clawkit"):
    if wanted is not None and _norm(ep.dist.name if ep.dist else "?") not in wanted:
        continue
    _load(ep)  # as the kernel loads it: lazily, read from its source (clawkit.lazyplugin)
    now = snapshot()
    steps[f"plugin {ep.name}"] = sorted(now - seen)
    seen = now
build_parser(get_plugin_manager())
steps["build_parser"] = sorted(snapshot() - seen)
print(json.dumps({"steps": steps, "all": sorted(sys.modules)}))
"""


def _probe(load: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS", "CLAWKIT_TRACE_PLUGINS")}
    if load is not None:
        env["CLAWKIT_LOAD_PLUGINS"] = load
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _hits(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted({n for n in names for m in modules if m == n or m.startswith(n + ".")})


def _culprits(result: dict, names: tuple[str, ...], ignore: set[str] = frozenset()) -> dict[str, list[str]]:
    """step -> the listed modules it imported first (minus ``ignore``)."""
    found = {step: [n for n in _hits(mods, names) if n not in ignore] for step, mods in result["steps"].items()}
    return {step: hits for step, hits in found.items() if hits}


def _builtin_distributions() -> list[str]:
    names = []
    for pyproject in sorted((ROOT / "plugins" / "builtin").glob("*/pyproject.toml")):
        names.append(tomllib.loads(pyproject.read_text())["project"]["name"])
    return names


def test_no_installed_plugin_imports_heavy_libraries_for_the_cli():
    result = _probe(None)
    assert any(step.startswith("plugin ") for step in result["steps"]), "no clawkit plugins installed"
    assert _culprits(result, HEAVY) == {}


def test_builtin_plugins_import_nothing_beyond_the_kernel_for_the_cli():
    kernel = set(_hits(_probe("")["all"], HEAVY + MODERATE))  # what the kernel alone imports is not ours
    result = _probe(",".join(_builtin_distributions()))
    loaded = {step.removeprefix("plugin ") for step in result["steps"] if step.startswith("plugin ")}
    assert len(loaded) == len(_builtin_distributions()), f"not every builtin plugin is installed: loaded {sorted(loaded)}"
    assert _culprits(result, HEAVY + MODERATE, ignore=kernel) == {}
