"""schemas/agent.schema.json is generated from the pydantic models (kernel + every
builtin plugin) and must be current. Regenerate with:

    CLAWKIT_UPDATE_SCHEMA=1 uv run pytest tests/test_schema.py
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from clawkit.commands.core import agent_schema
from clawkit.plugins import get_plugin_manager

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schemas" / "agent.schema.json"
BUILTIN = sorted(p.name for p in (ROOT / "plugins" / "builtin").iterdir() if (p / "pyproject.toml").is_file())


def generate(monkeypatch) -> str:
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", ",".join(f"clawkit-{n}" for n in BUILTIN))
    return json.dumps(agent_schema(get_plugin_manager()), indent=2, sort_keys=True) + "\n"


def test_schema_is_current(monkeypatch):
    text = generate(monkeypatch)
    if os.environ.get("CLAWKIT_UPDATE_SCHEMA") == "1":
        SCHEMA.parent.mkdir(exist_ok=True)
        SCHEMA.write_text(text, encoding="utf-8")
    assert SCHEMA.exists(), "schemas/agent.schema.json is missing: " + __doc__
    assert SCHEMA.read_text(encoding="utf-8") == text, "schemas/agent.schema.json is stale: " + __doc__


def test_schema_has_every_builtin_plugin_section(monkeypatch):
    schema = json.loads(generate(monkeypatch))
    plugins_ref = schema["properties"]["plugins"]["$ref"].split("/")[-1]
    sections = set(schema["$defs"][plugins_ref]["properties"]) | set(schema["properties"])
    missing = [n for n in BUILTIN if n not in sections and n not in ("litellm", "http", "postgres")]  # providers: configured under model:; storage: chosen by the database URL
    assert not missing, f"builtin plugins without a config section in the schema: {missing}"


def test_agent_yaml_reference_covers_the_schema(monkeypatch):
    """docs/agent-yaml.md documents every top-level key and every plugin section."""
    schema = json.loads(generate(monkeypatch))
    doc = (ROOT / "docs" / "agent-yaml.md").read_text(encoding="utf-8")
    plugins_ref = schema["properties"]["plugins"]["$ref"].split("/")[-1]
    keys = list(schema["properties"]) + [f"plugins.{n}" for n in schema["$defs"][plugins_ref]["properties"]]
    missing = [k for k in keys if not re.search(rf"`{re.escape(k)}`", doc)]
    assert not missing, f"docs/agent-yaml.md does not document: {missing}"
