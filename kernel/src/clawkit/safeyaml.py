"""YAML from files an agent or a stranger may have written, loaded in bounded time and memory.

``yaml.safe_load`` never runs code, but an alias-heavy document ("billion laughs":
nine anchors, each a list of ten aliases of the one before) composes in
microseconds into a graph whose *expanded* size is 10⁹ nodes; whoever walks it
afterwards (config validation, ``json.dumps``, a recursive visitor) hangs. And
``[[[[…]]]]`` nested a few thousand deep raises ``RecursionError`` from the
composer. Here the composed graph is measured first — its expanded node count and
depth, each node measured once — and refused beyond the limits with a
:class:`~clawkit.errors.ConfigError` naming the file and line.
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import ConfigError

MAX_NODES = 200_000  # expanded (aliases counted each time they are used)
MAX_DEPTH = 64


def check(node: yaml.Node | None, where: str, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`ConfigError` when ``node`` expands to more than ``max_nodes`` nodes or nests
    deeper than ``max_depth``. Linear in the composed (unexpanded) graph."""
    if node is None:
        return
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, depth)
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    on_path: set[int] = set()
    while stack:
        current, done = stack.pop()
        key = id(current)
        if done:
            on_path.discard(key)
            children = _children(current)
            size = 1 + sum(sizes[id(c)][0] for c in children)
            depth = 1 + max((sizes[id(c)][1] for c in children), default=0)
            if size > max_nodes:
                raise ConfigError(f"{where}:{current.start_mark.line + 1}: YAML expands to more than {max_nodes:,} values "
                                  "(aliases of aliases?); refused")
            if depth > max_depth:
                raise ConfigError(f"{where}:{current.start_mark.line + 1}: YAML nested deeper than {max_depth} levels; refused")
            sizes[key] = (size, depth)
            continue
        if key in sizes:
            continue
        if key in on_path:  # a recursive alias (``&a [*a]``): infinite when expanded
            raise ConfigError(f"{where}:{current.start_mark.line + 1}: a YAML alias refers to itself; refused")
        on_path.add(key)
        stack.append((current, True))
        stack.extend((c, False) for c in _children(current) if id(c) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def compose(text: str, where: str = "<yaml>") -> yaml.Node | None:
    """``yaml.compose`` (safe loader), measured with :func:`check`. YAML syntax errors propagate."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ConfigError(f"{where}: YAML nested too deeply; refused") from None
    check(node, where)
    return node


def safe_load(text: str, where: str = "<yaml>") -> Any:
    """``yaml.safe_load`` in bounded time and memory (see the module doc)."""
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise ConfigError(f"{where}: YAML nested too deeply; refused") from None
        if node is None:
            return None
        check(node, where)
        return loader.construct_document(node)
    finally:
        loader.dispose()
