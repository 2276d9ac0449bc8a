"""The .claws parser, the IDL compiler, SKILL.md and telemetry write-back."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from clawkit_skills import (
    SkillCompileError,
    compile_claws,
    compile_file,
    compile_skill_md,
    missing_requirements,
    parse_claws,
    with_telemetry,
    write_telemetry,
)
from clawkit_skills.claws import split_blocks

REPO = Path(__file__).resolve().parents[4]
SHIPPED = sorted(list((REPO / "skills").rglob("*.claws")) + list((REPO / "skills").rglob("SKILL.md")))

MIN = """# MANIFEST
id: mini
permissions: []
---
# VIBE
**Purpose:** Do one small thing.
---
# CLAW-IDL
interface MiniArgs {
  thing: string;
}
"""


def test_every_marker_style_is_recognised():
    text = "\n---\n".join([
        "# CRYPTOGRAPHIC IDENTITY\nsigned_by: me",
        "## MANIFEST\nid: m",
        "/* BLOCK 2: THE VIBE */\nPurpose: x",
        "// CLAW-IDL\ninterface A { a: string }",
        "# engine\n1. go",
        "\n\n/* TELEMETRY */\n{}",
        "# STATE CHECKPOINT\n{}",
        "# FORMAL VERIFICATION PROOF\nStatus: VERIFIED",
        "/* BLOCK 8: THE LEXICON */\n{}",
        "# BLOCK 9: NEURAL FINGERPRINT\nneural_digest: x",
    ])
    kinds = [b.kind for b in split_blocks(text)]
    assert kinds == ["identity", "manifest", "vibe", "idl", "engine", "telemetry", "state", "verification", "lexicon", "fingerprint"]
    titles = [b.title for b in split_blocks(text)]
    assert titles[2] == "BLOCK 2: THE VIBE" and titles[8] == "BLOCK 8: THE LEXICON"


def test_section_without_marker_continues_previous_block_and_preamble():
    text = "intro text\n---\n# VIBE\n**Purpose:** a\n---\nmore vibe text\n---\n# MANIFEST\nid: x\n"
    blocks = split_blocks(text)
    assert [b.kind for b in blocks] == ["preamble", "vibe", "manifest"]
    assert "more vibe text" in blocks[1].text and "---" in blocks[1].text


def test_yaml_with_two_and_four_space_indentation():
    four = MIN.replace("permissions: []", "permissions:\n    - capability: net.http\n      allow: [\"a.com\"]\n    - deny: fs.write")
    two = MIN.replace("permissions: []", "permissions:\n  - capability: net.http\n    allow:\n      - a.com\n  - deny: fs.write")
    for text in (four, two):
        sk = compile_claws(text, "x.claws")
        assert sk.capability_requests == [
            {"capability": "net.http", "allow": ["a.com"], "skill": "mini"},
            {"deny": "fs.write", "skill": "mini"},
        ]
        assert any("`a.com`" in g for g in sk.guardrails) and any("may not write files" in g for g in sk.guardrails)


@pytest.mark.parametrize("vibe", [
    "**Purpose:** Find things.\n**Trigger:** asked.\n**Tone:** calm.\n**Constraint:** one.\n**Constraint:** two.",
    "Purpose: Find things.\nTrigger: asked.\nTone: calm.\nConstraint: one.\nConstraint: two.",
    "## Purpose\nFind things.\n\n## Trigger\nasked.\n\n## Tone\ncalm.\n\n## Constraint\n- one.\n- two.",
    "**Purpose**: Find things.\n- **Trigger:** asked.\n### Tone\ncalm.\n## Constraints\n1. one.\n2. two.",
])
def test_vibe_forms(vibe):
    sk = compile_claws(MIN.replace("**Purpose:** Do one small thing.", vibe), "v.claws")
    section = sk.system_prompt_section
    assert "Find things." in section and "Use it when: asked." in section and "Tone: calm." in section
    assert "- one.\n- two." in section
    assert sk.description == "Find things."


def test_idl_trailing_comments_arrays_unions_and_dialect():
    idl = """interface SearchArgs {
  // @dialect:context.query (main search query)
  query: string
  limit?: integer          // how many results
  tags?: string[];         // labels to filter by
  matrix?: Array<number[]>,
  mode?: "fast" | "deep"
  where?: Place;
  extra?: Record<string, string>;
}
interface Place { lat: number; lon: number }
interface SearchResult { hits: string[] }
"""
    sk = compile_claws(MIN.replace("interface MiniArgs {\n  thing: string;\n}\n", idl), "s.claws")
    assert [t.name for t in sk.tool_definitions] == ["skill_mini"]  # Place is referenced, SearchResult is output
    params = sk.tool_definitions[0].parameters
    props = params["properties"]
    assert params["required"] == ["query"]
    assert props["query"]["description"] == "main search query"
    assert props["limit"] == {"type": "integer", "description": "how many results"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "description": "labels to filter by"}
    assert props["matrix"] == {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}
    assert props["mode"] == {"type": "string", "enum": ["fast", "deep"]}
    assert props["where"]["required"] == ["lat", "lon"]
    assert props["extra"]["additionalProperties"] == {"type": "string"}
    assert sk.dialect_hints == {"skill_mini": {"query": "context.query"}}


def test_several_tool_interfaces_get_distinct_names():
    idl = "interface GetForecast { city: string }\ninterface MiniAlertsRequest { region: string }\n"
    sk = compile_claws(MIN.replace("interface MiniArgs {\n  thing: string;\n}\n", idl), "s.claws")
    assert [t.name for t in sk.tool_definitions] == ["skill_mini_get_forecast", "skill_mini_alerts"]


def _assert_valid_tool(td):
    """Valid for OpenAI function calling and Anthropic tool use."""
    import re

    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", td.name)
    assert td.description and len(td.description) <= 1024
    schema = td.parameters
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema["type"] == "object" and isinstance(schema["properties"], dict)
    assert set(schema.get("required", [])) <= set(schema["properties"])
    json.dumps(td.openai_schema())  # serialisable
    anthropic = {"name": td.name, "description": td.description, "input_schema": schema}
    assert anthropic["input_schema"]["type"] == "object"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name + "/" + p.name)
def test_shipped_skills_compile_with_valid_tool_schemas(path):
    sk = compile_file(path)
    assert sk.name and sk.description and sk.system_prompt_section
    for td in sk.tool_definitions:
        _assert_valid_tool(td)
    if sk.lexicon:
        for short, full in sk.lexicon.get("mappings", {}).items():
            assert short not in sk.system_prompt_section.split() and f'"{short}"' not in sk.system_prompt_section


def test_shipped_set_has_both_formats_and_a_weather_skill():
    formats = {compile_file(p).format for p in SHIPPED}
    assert formats == {"claws", "skill.md"} and len(SHIPPED) >= 5
    weather = compile_file(REPO / "skills" / "weather.claws")
    assert weather.tool_definitions[0].name == "skill_weather" and weather.verification == "verified"


def test_json_blocks_with_comments_camel_case_and_lexicon_kept_out_of_prompt():
    text = MIN + """---
# TELEMETRY
{
  // written by the runtime
  "executionCount": 40, /* many */
  "successRate": 0.5,
  "errors": [],
}
---
# THE LEXICON
{ "mode": "x", "mappings": { "QZXW": "weather-lookup-secret" } }
"""
    sk = compile_claws(text, "t.claws")
    assert sk.metadata["telemetry"]["execution_count"] == 40
    assert sk.weight == 0.5
    assert sk.lexicon["mappings"] == {"QZXW": "weather-lookup-secret"}
    assert "QZXW" not in sk.system_prompt_section and "weather-lookup-secret" not in sk.system_prompt_section
    assert all("QZXW" not in t.description for t in sk.tool_definitions)


def test_verification_gives_confidence_and_engine_gives_plan():
    script = MIN + '---\n# ENGINE\n<script lang="python">\n# Look it up\nx = await fetch_it()\n# Report back\n</script>\n---\n# VERIFICATION\nStatus: FAILED\n'
    sk = compile_claws(script, "e.claws")
    assert sk.execution_plan == ["Look it up", "Report back"] and sk.verification == "failed" and sk.confidence == 0.0
    assert "When performing this skill, follow these steps:\n1. Look it up\n2. Report back" in sk.system_prompt_section
    assert sk.metadata["engine_lang"] == "python"


@pytest.mark.parametrize("broken, block, line, needle", [
    (MIN.replace("permissions: []", "permissions: [\n  - bad"), "MANIFEST", 4, "invalid YAML"),
    (MIN.replace("thing: string;", "thing: strng;"), "CLAW-IDL", 10, "unknown type 'strng'"),
    (MIN.replace("  thing: string;\n}", "  thing: string;\n"), "CLAW-IDL", 12, "missing '}'"),
    (MIN.replace("# VIBE\n**Purpose:** Do one small thing.\n---\n", ""), "VIBE", 1, "missing required block"),
    (MIN + "---\n# TELEMETRY\n{\n  \"a\": 1\n  \"b\": 2\n}\n", "TELEMETRY", 16, "invalid JSON"),
    (MIN.replace("permissions: []", "permissions:\n  - allow: [x]"), "MANIFEST", 4, "capability"),
])
def test_errors_name_file_block_and_line(broken, block, line, needle):
    with pytest.raises(SkillCompileError) as info:
        compile_claws(broken, "skills/broken.claws")
    err = info.value.errors[0]
    assert (err.file, err.block, err.line) == ("skills/broken.claws", block, line), err.format()
    assert needle in err.message
    assert err.format().startswith(f"skills/broken.claws:{line}: [{block}]")


def test_telemetry_round_trip_preserves_every_other_byte(tmp_path):
    original = (REPO / "skills" / "weather.claws").read_text(encoding="utf-8").replace("\n", "\r\n")
    p = tmp_path / "w.claws"
    p.write_bytes(original.encode())
    before = parse_claws(original, p)
    write_telemetry(p, {"executionCount": 3, "success_rate": 0.67, "errors": ["timeout"]})
    after_text = p.read_bytes().decode()
    after = parse_claws(after_text, p)
    assert json.loads(after.block("telemetry").text) == {"execution_count": 3, "success_rate": 0.67, "errors": ["timeout"]}
    assert [b.kind for b in before.blocks] == [b.kind for b in after.blocks]
    for b0, b1 in zip(before.blocks, after.blocks):
        if b0.kind != "telemetry":
            assert b0.text == b1.text, b0.kind
    # everything before and after the telemetry body is byte-identical
    t0, t1 = before.block("telemetry"), after.block("telemetry")
    assert after_text[: t1.start] == original[: t0.start]
    assert after_text[t1.end :] == original[t0.end :]
    assert compile_file(p).metadata["telemetry"]["execution_count"] == 3


def test_telemetry_appended_when_absent():
    out = with_telemetry(MIN, {"execution_count": 1})
    assert out.startswith(MIN) and out.endswith('---\n# TELEMETRY\n{\n  "execution_count": 1\n}\n')
    assert compile_claws(out, "m.claws").metadata["telemetry"] == {"execution_count": 1}


def test_skill_md_frontmatter_requirements_and_gating(tmp_path):
    text = """---
name: deploy
description: Deploy the app.
metadata: {"openclaw": {"requires": {"bins": ["definitely-not-a-binary-xyz"], "env": ["DEPLOY_TOKEN"], "config": ["deploy.target"]}}}
---
# Deploy
Run the deploy.
"""
    sk = compile_skill_md(text, tmp_path / "deploy" / "SKILL.md")
    assert sk.name == "deploy" and sk.format == "skill.md" and "Run the deploy." in sk.system_prompt_section
    reasons = missing_requirements(sk, config={}, env={"PATH": "/nonexistent"})
    assert reasons == [
        "missing binaries: definitely-not-a-binary-xyz",
        "missing environment variables: DEPLOY_TOKEN",
        "missing config: deploy.target",
    ]
    sk.requires["bins"] = ["sh"]
    import os

    ok = missing_requirements(sk, config={"deploy": {"target": "prod"}}, env={"PATH": os.environ["PATH"], "DEPLOY_TOKEN": "t"})
    assert ok == []


def test_skill_md_errors_name_file_and_line():
    with pytest.raises(SkillCompileError) as info:
        compile_skill_md("---\nname: x\ndescription: [unclosed\n---\nbody\n", "x/SKILL.md")
    assert info.value.errors[0].line == 3 and "invalid YAML" in info.value.errors[0].message
    with pytest.raises(SkillCompileError) as info:
        compile_skill_md("# no frontmatter\n", "y/SKILL.md")
    assert info.value.errors[0].format().startswith("y/SKILL.md:1:")
