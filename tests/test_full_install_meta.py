"""Meta test: the full install is the test default (issue 30 item 13).

Every test module that builds agents either uses the full install — the kit's ``make_agent`` /
``http_agent`` / ``clawkit.testing.plugin_manager`` load every installed plugin — or narrows
visibly, with a reason a reader can check:

* ``narrow="<why>"`` on a kit call (a literal sentence of three words or more; a name is
  accepted only as a pass-through parameter of a helper, whose callers give the literal);
* ``pytest.mark.narrow("<why>")`` on a test, class or module;
* a direct ``get_plugin_manager(..., load_entry_points=False)`` or ``CLAWKIT_LOAD_PLUGINS`` set
  to a subset carries a ``# narrow: <why>`` comment on the call's lines or the line above.

The kit refuses a reason-less narrowing at run time too (``NarrowingError``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_PARTS = {".venv", "node_modules", "benchmarks", ".hypothesis", "build", "dist"}
COMMENT = re.compile(r"#\s*narrow:\s*(?P<why>\S.*)")

# Subprocess/env narrowings (CLAWKIT_LOAD_PLUGINS set to a subset) that predate this rule and were
# not swept yet: a ratchet — remove a file once its narrowings carry a ``# narrow:`` comment; a new
# file must carry them from the start.
ENV_NARROWING_NOT_YET_ANNOTATED = {
    "plugins/builtin/classifier/tests/test_classifier_e2e.py",
    "plugins/builtin/memory/tests/test_memory_docs_eval.py",
    "plugins/builtin/policy/tests/test_policy_ledger.py",
    "plugins/builtin/skills/tests/test_skills_cli.py",
    "tests/test_cli_workspace_options.py",
    "tests/test_chat_skill_reload.py",
    "tests/test_cold_start_imports.py",
    "tests/test_cli_exits.py",
    "tests/test_composition_e2e.py",
    "tests/test_schema.py",
    "tests/test_cli_e2e.py",
}
# files whose subject is the loader or the switch itself
ENV_NARROWING_IS_THE_SUBJECT = {"kernel/tests/test_plugins.py", "tests/test_plugin_seams.py"}


def collect_test_files() -> list[Path]:
    out = []
    for base in (ROOT / "kernel" / "tests", ROOT / "plugins", ROOT / "tests"):
        for p in base.rglob("*.py"):
            parts = set(p.relative_to(ROOT).parts)
            if parts & SKIP_PARTS or "tests" not in parts:
                continue
            if p.name.startswith(("test_", "conftest")) and p.name != "test_full_install_meta.py":  # (its own probes)
                out.append(p)
    return sorted(out)


FILES = collect_test_files()


def _is_reason(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value.split()) >= 3


def _str_value(node: ast.AST) -> str | None:
    """A literal string, or the joined literal parts of an implicit concatenation / f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def _commented(lines: list[str], node: ast.AST) -> bool:
    start = max(node.lineno - 4, 0)  # the call, or a comment up to three lines above it
    end = getattr(node, "end_lineno", node.lineno)
    for line in lines[start:end]:
        m = COMMENT.search(line)
        if m and len(m.group("why").split()) >= 3:
            return True
    return False


def _params(tree: ast.AST) -> set[str]:
    names = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = fn.args
            names |= {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    return names


def problems(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(text)
    lines = text.splitlines()
    params = _params(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        if func.endswith("mark.narrow"):
            arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "reason"), None)
            value = _str_value(arg) if arg is not None else None
            if value is None or len(value.split()) < 3:
                out.append(f"{rel}:{node.lineno}: pytest.mark.narrow needs a literal reason (three words or more)")
        for kw in node.keywords:
            if kw.arg == "narrow":
                v = kw.value
                ok = (_str_value(v) is not None and len(_str_value(v).split()) >= 3) or (
                    isinstance(v, ast.Constant) and v.value is None) or (isinstance(v, ast.Name) and v.id in params)
                if not ok:
                    out.append(f"{rel}:{node.lineno}: narrow= needs a literal reason (three words or more), got {ast.unparse(v)}")
            if kw.arg == "load_entry_points" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                if func.split(".")[-1] in ("make_agent", "http_agent") or not _commented(lines, node):
                    out.append(f"{rel}:{node.lineno}: {func}(load_entry_points=False) narrows without a reason: "
                               "use the kit's narrow=\"<why>\", or add a '# narrow: <why>' comment")
    if rel not in ENV_NARROWING_NOT_YET_ANNOTATED | ENV_NARROWING_IS_THE_SUBJECT:
        for i, line in enumerate(lines, 1):
            if "CLAWKIT_LOAD_PLUGINS" in line and re.search(r"setenv\(\s*\"CLAWKIT_LOAD_PLUGINS\"|CLAWKIT_LOAD_PLUGINS\"?\s*[]:=]", line):
                if not any(COMMENT.search(x) for x in lines[max(i - 2, 0):i]):
                    out.append(f"{rel}:{i}: CLAWKIT_LOAD_PLUGINS set to a subset without a '# narrow: <why>' comment")
    return out


def test_the_scan_sees_the_suite():
    rels = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert "plugins/builtin/tools/tests/conftest.py" in rels and "kernel/tests/test_loop.py" in rels
    assert len(FILES) > 100


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_narrowing_carries_a_reason(path):
    assert problems(path) == []


def test_the_ratchet_lists_only_files_that_still_narrow_by_env():
    stale = []
    for rel in sorted(ENV_NARROWING_NOT_YET_ANNOTATED):
        p = ROOT / rel
        if not p.exists():
            stale.append(f"{rel} (gone)")
            continue
        lines = p.read_text(encoding="utf-8").splitlines()
        unannotated = [i for i, line in enumerate(lines, 1) if "CLAWKIT_LOAD_PLUGINS" in line
                       and re.search(r"setenv\(\s*\"CLAWKIT_LOAD_PLUGINS\"|CLAWKIT_LOAD_PLUGINS\"?\s*[]:=]", line)
                       and not any(COMMENT.search(x) for x in lines[max(i - 2, 0):i])]
        if not unannotated:
            stale.append(rel)
    assert stale == [], "these files no longer narrow without a comment: remove them from the ratchet"


def test_the_kit_refuses_a_narrowing_without_a_reason(make_agent):
    from clawkit.testing.install import NarrowingError

    with pytest.raises(NarrowingError, match="says why"):
        make_agent(["ok"], narrow="no")
    with pytest.raises(NarrowingError, match="load_entry_points=False"):
        make_agent(["ok"], load_entry_points=False)
    full = make_agent(["ok"])
    assert full.test_install == "full" and full.pm.get_plugin("policy") is not None
    narrowed = make_agent(["ok"], narrow="the kernel alone for this check")
    assert narrowed.test_install == "the kernel alone for this check" and narrowed.pm.get_plugin("policy") is None


@pytest.mark.narrow("a module-level or test-level marker narrows every agent of the test")
def test_the_marker_narrows(make_agent, http_agent):
    assert make_agent(["ok"]).pm.get_plugin("shield") is None
    agent = http_agent("ok")
    assert agent.pm.get_plugin("shield") is None and agent.test_install.startswith("a module-level")


def test_an_installed_module_passed_again_is_loaded_once(make_agent, http_agent):
    import clawkit_tools

    agent = make_agent(["ok"], plugins=(clawkit_tools,), tools=["read_file"])
    assert [p for p in agent.pm.get_plugins() if p is clawkit_tools] == [clawkit_tools]
    assert http_agent("ok").pm.get_plugin("litellm") is not None


def test_a_plugin_turned_off_in_the_config_is_not_loaded(make_agent):
    agent = make_agent(["ok"], plugin_config={"memory": {"enabled": False}})
    assert agent.pm.get_plugin("memory") is None and agent.pm.get_plugin("policy") is not None


def test_unwrapped_gives_the_bare_tool_result(make_agent, workspace):
    from clawkit.testing import ScriptedReply, call, unwrapped

    (workspace / "a.txt").write_text("alpha")
    agent = make_agent([ScriptedReply.calls(call("read_file", path="a.txt")), "ok"], tools=["read_file"])
    agent.run("read it")
    content = [m.content for m in agent.provider.requests[1].messages if m.role == "tool"][0]
    assert content != "alpha" and unwrapped(content) == "alpha"
    assert unwrapped("plain") == "plain"
