"""docs/architecture.md's table of which plugin implements which hook is the full install's
own answer, so the map a new maintainer reads cannot drift from the code.

Regenerate the table after a plugin gains or loses a hook: ``python tests/test_architecture_doc.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
START, END = "<!-- plugin-hooks:start -->", "<!-- plugin-hooks:end -->"


def _table() -> str:
    from clawkit.plugins import get_plugin_manager

    pm = get_plugin_manager()
    rows = ["| plugin | hooks it implements |", "|---|---|"]
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda np: np[0]):
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
        rows.append(f"| {name} | {', '.join(f'`{h}`' for h in hooks)} |")
    return "\n".join(rows)


def _documented() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(re.escape(START) + r"\n(.*?)\n" + re.escape(END), text, re.S)
    assert match, f"{DOC}: the {START} … {END} block is missing"
    return match.group(1)


def test_the_plugin_table_is_what_the_full_install_registers():
    expected = _table()
    assert _documented() == expected, (
        f"{DOC.name}'s plugin table is out of date; run `python tests/test_architecture_doc.py`.\n"
        f"expected:\n{expected}")


def test_every_test_file_the_page_names_exists():
    root = DOC.parents[1]
    named = set(re.findall(r"`((?:tests|plugins)/[\w/.-]+?\.py)(?:::\w+)?`", DOC.read_text(encoding="utf-8")))
    assert named, "the page names no tests"
    missing = sorted(p for p in named if "*" not in p and not (root / p).exists())
    assert not missing, f"{DOC.name} names test files that do not exist: {missing}"


if __name__ == "__main__":  # regenerate the table in place
    text = DOC.read_text(encoding="utf-8")
    block = f"{START}\n{_table()}\n{END}"
    DOC.write_text(re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _m: block, text, flags=re.S), encoding="utf-8")
    sys.exit(0)
