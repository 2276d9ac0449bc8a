"""The kernel wheel plus ONE plugin wheel, installed alone in a fresh environment, works.

Builds real wheels with ``uv build`` and installs them with ``uv pip`` into a new
virtualenv (dependencies come from the package index or uv's cache), then checks
the plugin is discovered through its entry point and an agent runs with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIRS = sorted(p for p in (ROOT / "plugins").glob("*/*") if (p / "pyproject.toml").is_file())
UV = shutil.which("uv") or str(Path(sys.executable).parent / "uv")

pytestmark = pytest.mark.skipif(not Path(UV).exists() and shutil.which("uv") is None, reason="uv is not installed")

SMOKE = """
import json, sys
from clawkit.config import collect_sections, validate_agent
from clawkit.hooks import HookRunner
from clawkit.loop import Agent
from clawkit.plugins import get_plugin_manager, plugin_infos
from clawkit.testing import ScriptedProvider

pm = get_plugin_manager()
cfg = validate_agent({"name": "solo", "model": "scripted/x", "workspace": sys.argv[1]}, "<smoke>", {},
                     collect_sections(HookRunner(pm)))
agent = Agent(cfg, pm=pm, provider=ScriptedProvider(["fine"]))
reply = agent.run("hello").reply
print(json.dumps({"plugins": [i.name for i in plugin_infos(pm)], "reply": reply}))
"""


def run(*cmd: str, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CLAWKIT_LOAD_PLUGINS")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, **kw)
    assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def kernel_wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    run(UV, "build", "--wheel", "--quiet", "-o", str(dist), str(ROOT / "kernel"))
    return next(dist.glob("clawkit_kernel-*.whl"))


@pytest.mark.parametrize("plugin_dir", PLUGIN_DIRS, ids=[p.name for p in PLUGIN_DIRS])
def test_kernel_plus_one_plugin_alone(plugin_dir: Path, kernel_wheel: Path, tmp_path: Path):
    dist = tmp_path / "dist"
    run(UV, "build", "--wheel", "--quiet", "-o", str(dist), str(plugin_dir))
    wheel = next(dist.glob("*.whl"))
    venv = tmp_path / "venv"
    run(UV, "venv", "--quiet", "--python", sys.executable, str(venv))
    py = venv / "bin" / "python"
    run(UV, "pip", "install", "--quiet", "--python", str(py), str(kernel_wheel), str(wheel))
    ws = tmp_path / "ws"
    ws.mkdir()
    out = run(str(py), "-c", SMOKE, str(ws), cwd=ws)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["plugins"] == [plugin_dir.name]
    assert result["reply"]
    listed = json.loads(run(str(venv / "bin" / "clawkit"), "plugins", "--json", cwd=ws).stdout)
    assert [p["name"] for p in listed] == [plugin_dir.name]
    run(str(venv / "bin" / "clawkit"), "--help", cwd=ws)
    if plugin_dir.name == "skills":  # the shipped example skills travel inside the wheel
        listed = run(str(venv / "bin" / "clawkit"), "skills", "list", cwd=ws).stdout
        assert "weather" in listed and "code-review" in listed
