"""Fast checks of the pieces behind fallbacks and the Anthropic features (the e2e tests drive the CLI):
what a fallback inherits, which failures fall back where, config errors naming file and line, the
breakpoint limit, and thinking's constraints."""

from __future__ import annotations

import pytest

from clawkit.config import ModelConfig
from clawkit.errors import ConfigError, ProviderError
from clawkit.fallback import chain, falls_back, next_model
from clawkit.provider_features import caching_on, cost, thinking_limits
from clawkit.types import Usage
from clawkit_http import anthropic_features


def test_a_fallback_inherits_call_settings_not_identity():
    cfg = ModelConfig(name="openai/a", api_base="http://a", api_key="ka", timeout=5, max_retries=1, temperature=0.3,
                      cache="off", top_p=0.5, fallbacks=["openai/b", {"name": "anthropic/c", "timeout": 9}])
    a, b, c = chain(cfg)
    assert (b.name, b.timeout, b.max_retries, b.temperature, b.cache) == ("openai/b", 5, 1, 0.3, "off")
    assert b.api_base is None and b.api_key is None and "top_p" not in b.settings()
    assert c.timeout == 9 and c.fallbacks == []


def test_cache_accepts_yaml_booleans():
    assert ModelConfig(name="m", cache=False).cache == "off"
    assert ModelConfig(name="m", cache=True).cache == "on"


def test_which_failures_fall_back():
    assert falls_back(ProviderError("x", kind="connection"))
    assert falls_back(ProviderError("x", status=503))
    assert falls_back(ProviderError("x", status=429))
    assert not falls_back(ProviderError("x", status=401))
    assert not falls_back(ProviderError("x", status=400))
    assert not falls_back(ProviderError("x", status=409, kind="http"))
    assert not falls_back(ProviderError("x", kind="connection"), shown=True)
    assert not falls_back(ProviderError("x", kind="stream_cut", partial_text="hi"))


def test_context_overflow_skips_smaller_windows():
    models = chain(ModelConfig(name="a", context_window=8000, fallbacks=[
        {"name": "small", "context_window": 4000}, {"name": "unknown-model-x"}, {"name": "big", "context_window": 100000}]))
    overflow = ProviderError("x", kind="context_overflow")
    assert next_model(models, 0, overflow) == 3
    assert next_model(models, 0, ProviderError("x", status=500)) == 1
    assert next_model(models, 3, overflow) is None


def test_config_errors_name_file_and_line(tmp_path):
    from clawkit.runtime import load_config

    path = tmp_path / "agent.yaml"
    path.write_text("name: a\nmodel:\n  name: openai/a\n  fallbacks:\n    - {api_base: http://x}\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert "agent.yaml:5" in str(err.value) and "fallbacks" in str(err.value) and "name" in str(err.value)
    path.write_text("name: a\nmodel:\n  name: openai/a\n  fallbacks: [{name: b, fallbacks: [c]}]\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert "agent.yaml:4" in str(err.value) and "fallbacks of its own" in str(err.value)


def test_at_most_four_breakpoints_and_none_on_thinking():
    body = {"tools": [{"name": "t"}], "system": "sys",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]},
                         {"role": "assistant", "content": [{"type": "thinking", "thinking": "..", "signature": "s"},
                                                           {"type": "text", "text": "b"}]},
                         {"role": "user", "content": [{"type": "text", "text": "c"}]}]}
    placed = anthropic_features.add_breakpoints(body)
    assert placed == 4
    assert "cache_control" not in body["messages"][1]["content"][0]


def test_thinking_limits():
    params = {"max_tokens": 2000, "temperature": 0.2, "top_k": 5, "top_p": 0.5}
    thinking_limits(params, 10_000, 4096)
    assert params == {"max_tokens": 12_000, "top_p": 0.95}


def test_cache_on_where_the_table_says():
    assert caching_on(ModelConfig(name="anthropic/claude-sonnet-4-5"))
    assert not caching_on(ModelConfig(name="anthropic/claude-sonnet-4-5", cache="off"))
    assert not caching_on(ModelConfig(name="some/unknown-model"))
    assert caching_on(ModelConfig(name="anthropic/claude-opus-4-1"))  # a Claude the table does not list
    assert not caching_on(ModelConfig(name="anthropic/claude-test"))  # not a Claude model's name


def test_cache_tokens_priced_with_multipliers_when_the_table_has_none():
    usage = Usage(prompt_tokens=1100, completion_tokens=10, cache_read_tokens=1000)
    assert cost(usage, 1e-6, 2e-6, "some/unknown-model") == pytest.approx(100e-6 + 1000 * 0.1e-6 + 20e-6)


def test_whole_anthropic_answer_keeps_thinking_and_cache_usage():
    from clawkit_http.anthropic_format import parse_response

    r = parse_response({"content": [{"type": "thinking", "thinking": "hmm " * 10, "signature": "s1"},
                                    {"type": "redacted_thinking", "data": "xx"}, {"type": "text", "text": "hi"}],
                        "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5,
                                  "output_tokens": 30}, "stop_reason": "end_turn"})
    assert r.content == "hi" and [b["type"] for b in r.thinking] == ["thinking", "redacted_thinking"]
    assert (r.usage.prompt_tokens, r.usage.cache_read_tokens, r.usage.cache_write_tokens) == (105, 90, 5)
    assert 0 < r.usage.reasoning_tokens <= 30


def test_api_key_env(tmp_path, monkeypatch):
    from clawkit.runtime import load_config

    monkeypatch.setenv("OTHER_ACCOUNT_KEY", "sk-other")
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    path = tmp_path / "agent.yaml"
    path.write_text("name: a\nmodel:\n  name: openai/a\n  fallbacks:\n    - {name: openai/b, api_key_env: OTHER_ACCOUNT_KEY}\n")
    cfg, _ = load_config(str(path))
    assert chain(cfg.model)[1].api_key == "sk-other" and "api_key_env" not in cfg.model.fallbacks[0].settings()
    path.write_text("name: a\nmodel:\n  name: openai/a\n  fallbacks:\n    - {name: openai/b, api_key_env: NO_SUCH_KEY_VAR}\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert "agent.yaml:5" in str(err.value) and "NO_SUCH_KEY_VAR is not set" in str(err.value)


@pytest.mark.parametrize("page", ["fallbacks.md", "anthropic.md"])
def test_the_docs_agent_files_load(tmp_path, monkeypatch, page):
    """The pages' agent files are valid as written (their YAML blocks that name an agent)."""
    import re
    from pathlib import Path

    from clawkit.runtime import load_config

    monkeypatch.setenv("BACKUP_ANTHROPIC_KEY", "sk-x")
    text = (Path(__file__).parent.parent / "docs" / page).read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if b.lstrip().startswith(("# agent.yaml", "name:"))]
    assert blocks
    for block in blocks:
        path = tmp_path / "agent.yaml"
        path.write_text(block)
        cfg, _ = load_config(str(path))
        assert cfg.model.name
