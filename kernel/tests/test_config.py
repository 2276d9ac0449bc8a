"""Agent YAML: validation errors name file, line and field; interpolation; cascade."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from clawkit import hookimpl
from clawkit.config import ConfigError, collect_sections, load_agent
from clawkit.hooks import HookRunner
from clawkit.plugins import get_plugin_manager


class TruncSection(BaseModel):
    model_config = {"extra": "forbid"}
    max_share: float = Field(0.3, gt=0, le=1)


class Contribs(BaseModel):
    items: list[str] = []


class Cfg:
    @hookimpl
    def register_config(self, register):
        register("trunc", TruncSection)
        register("contributors", Contribs, top_level=True)


def sections():
    # narrow: the kernel's config-section mechanics with one probe plugin, not an agent
    return collect_sections(HookRunner(get_plugin_manager(extra=(Cfg(),), load_entry_points=False)))


def write(tmp_path, text, name="agent.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_minimal_agent_and_defaults(tmp_path):
    cfg = load_agent(write(tmp_path, "name: a\nmodel: openai/gpt-4o-mini\n"), env={})
    assert cfg.model.name == "openai/gpt-4o-mini" and cfg.model.provider == "auto"
    assert cfg.limits.max_tool_rounds == 20 and cfg.tools == []
    assert cfg.workspace == tmp_path.resolve()


def test_model_mapping_with_settings(tmp_path):
    text = "name: a\nmodel:\n  name: anthropic/claude\n  api_base: http://x\n  api_key: k\n  top_p: 0.5\n"
    cfg = load_agent(write(tmp_path, text), env={})
    assert cfg.model.api_base == "http://x" and cfg.model.settings() == {"top_p": 0.5}


def test_unknown_key_names_file_line_and_field(tmp_path):
    p = write(tmp_path, "name: a\nmodel: m\nlimits:\n  context_window: 1000\n  max_tool_round: 3\n")
    with pytest.raises(ConfigError) as e:
        load_agent(p, env={})
    assert f"{p}:5: limits.max_tool_round: unknown key" in str(e.value)


def test_wrong_type_names_line(tmp_path):
    p = write(tmp_path, "name: a\nmodel: m\nlimits:\n  max_tool_rounds: lots\n")
    with pytest.raises(ConfigError, match=r"agent.yaml:4: limits.max_tool_rounds: Input should be a valid integer"):
        load_agent(p, env={})


def test_missing_required_field(tmp_path):
    with pytest.raises(ConfigError, match=r"agent.yaml:1: model: Field required"):
        load_agent(write(tmp_path, "name: a\n"), env={})


def test_plugin_sections_validated_with_lines(tmp_path):
    p = write(tmp_path, "name: a\nmodel: m\nplugins:\n  trunc:\n    max_share: 2\ncontributors:\n  items: [x]\n")
    with pytest.raises(ConfigError, match=r"agent.yaml:5: plugins.trunc.max_share: Input should be less than or equal to 1"):
        load_agent(p, sections=sections(), env={})
    p = write(tmp_path, "name: a\nmodel: m\nplugins:\n  trunc:\n    max_share: 0.5\n    enabled: false\ncontributors:\n  items: [x]\n")
    cfg = load_agent(p, sections=sections(), env={})
    assert cfg.plugin("trunc").max_share == 0.5 and cfg.disabled_plugins() == ["trunc"]
    assert cfg.contributors.items == ["x"]


def test_unknown_plugin_section_is_an_error_unless_disabled(tmp_path):
    p = write(tmp_path, "name: a\nmodel: m\nplugins:\n  nosuch:\n    x: 1\n")
    with pytest.raises(ConfigError, match=r"agent.yaml:4: plugins.nosuch: no installed plugin declares this section"):
        load_agent(p, sections=sections(), env={})
    p = write(tmp_path, "name: a\nmodel: m\nplugins:\n  nosuch: {enabled: false}\n")
    assert load_agent(p, sections=sections(), env={}).disabled_plugins() == ["nosuch"]


def test_invalid_yaml_names_line(tmp_path):
    with pytest.raises(ConfigError, match=r"agent.yaml:3: invalid YAML"):
        load_agent(write(tmp_path, "name: a\nmodel: m\ntools: [a, b\n"), env={})


def test_duplicate_key_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"agent.yaml:2: duplicate key 'name'"):
        load_agent(write(tmp_path, "name: a\nname: b\nmodel: m\n"), env={})


def test_interpolation(tmp_path):
    p = write(tmp_path, "name: ${AGENT_NAME}\nmodel:\n  name: ${MODEL:-openai/gpt-4o-mini}\n  api_key: ${KEY}\n")
    cfg = load_agent(p, env={"AGENT_NAME": "bob", "KEY": "sk-1"})
    assert (cfg.name, cfg.model.name, cfg.model.api_key) == ("bob", "openai/gpt-4o-mini", "sk-1")
    with pytest.raises(ConfigError, match=r"agent.yaml:4: environment variable KEY is not set"):
        load_agent(p, env={"AGENT_NAME": "bob"})


def test_cascade_cli_over_env_over_file(tmp_path):
    p = write(tmp_path, "name: a\nmodel: file/model\nlimits:\n  max_tool_rounds: 5\n")
    assert load_agent(p, env={}).model.name == "file/model"
    env = {"CLAWKIT_MODEL": "env/model", "CLAWKIT_MAX_TOOL_ROUNDS": "7"}
    cfg = load_agent(p, env=env)
    assert cfg.model.name == "env/model" and cfg.limits.max_tool_rounds == 7
    cfg = load_agent(p, env=env, overrides={"model": "cli/model", "limits.max_tool_rounds": 9})
    assert cfg.model.name == "cli/model" and cfg.limits.max_tool_rounds == 9


def test_not_a_mapping(tmp_path):
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_agent(write(tmp_path, "- a\n- b\n"), env={})
