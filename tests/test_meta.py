"""Meta-tests: every hook has a docstring, a test that implements it, and a docs entry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clawkit import hookspecs

ROOT = Path(__file__).resolve().parents[1]
HOOKS = sorted(n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n), "clawkit_spec"))
TEST_SOURCES = "\n".join(
    p.read_text(encoding="utf-8")
    for p in ROOT.glob("**/test_*.py")
    if ".venv" not in p.parts and p.name != "test_meta.py"
)


def test_the_contract_is_complete():
    expected = {
        "register_prompt_contributor", "classify_session", "before_tool_call", "after_tool_call", "message_received",
        "before_llm_call", "message_sending", "register_tools", "register_providers", "register_commands",
        "register_config", "on_event",
    }
    assert expected <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_full_docstring(hook):
    doc = getattr(hookspecs, hook).__doc__ or ""
    assert len(doc.split()) >= 25, f"{hook}: docstring too thin"
    assert re.search(r"fail", doc, re.I), f"{hook}: docstring does not state its failure policy"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_test_implementing_it(hook):
    assert re.search(rf"def {hook}\(", TEST_SOURCES), f"no test implements {hook}"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_docs_entry(hook):
    text = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    m = re.search(rf"^### {hook}\n(.*?)(?=^### |\Z)", text, re.S | re.M)
    assert m, f"docs/hooks.md has no '### {hook}' entry"
    assert "```python" in m.group(1), f"docs/hooks.md: {hook} has no example"
