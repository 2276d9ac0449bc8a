"""Plugins registered without importing them: the hooks are read from the source.

An entry point names a plugin's *front door*, the module whose ``@hookimpl`` functions are the
plugin. ``clawkit --help`` and every agent start load all installed plugins, so instead of
importing that module the kernel reads its source: each top-level ``@hookimpl`` function (with
its ``hookimpl(...)`` options, ``@hook_order`` and ``@on_events``, and its argument names), and
each ``from .module import name`` that re-exports a hook implementation from a submodule. It
registers a :class:`LazyPlugin` with one small proxy per hook, carrying the same pluggy options
and signature, so pluggy orders, prunes arguments and validates exactly as for the module. The
first call of a hook imports the module that defines it — only that one — and the proxy then
forwards to the real function.

A front door that re-exports keeps start-up cheap for heavy plugins::

    # clawkit_mine/hooks.py — entry point: mine = "clawkit_mine.hooks"
    from .cli import register_commands          # imported by ``clawkit --help``
    from .engine import after_tool_call, register_config   # imported by the first turn

What the reader does not understand — another decorator, a computed option, ``import *``, a
module without any ``@hookimpl`` — makes :func:`declare` return None, and the kernel imports the
module as it always did. On import, the real functions are checked against what was read (a
mismatch is a :class:`~clawkit.plugins.PluginError`-style ``LazyPluginError``).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import threading
import types
from importlib import import_module
from importlib.machinery import PathFinder
from typing import Any

PROJECT = "clawkit"
_OPT_KEYS = ("wrapper", "hookwrapper", "optionalhook", "tryfirst", "trylast", "specname")
_PATTERNS = {  # compiled on the first scan (a start from the cache scans nothing)
    "decorated": r"^@",
    "from": r"^from[ \t]+([\w.]+)[ \t]+import\b",
    "def": r"^(?:async[ \t]+def|def|class)[ \t]",
    "simple_names": r"[ \t]+\w+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*\w+(?:[ \t]+as[ \t]+\w+)?)*[ \t]*(?:#.*)?$",
}


def _rx(name: str) -> re.Pattern[str]:
    return re.compile(_PATTERNS[name], re.M)


class LazyPluginError(Exception):
    """A lazily registered plugin's module does not match what was read from its source."""


class HookDecl:
    """One hook implementation as read from source (a plain class: a dataclass costs start-up)."""

    __slots__ = ("attr", "module", "name", "opts", "argnames", "order", "events")

    def __init__(self, attr: str, module: str, name: str, opts: dict[str, Any], argnames: tuple[str, ...],
                 order: int | None = None, events: frozenset[str] | None = None):
        self.attr = attr  # the function's name in the front door
        self.module = module  # the module that defines it
        self.name = name  # the function's own name there
        self.opts = opts
        self.argnames = argnames
        self.order = order
        self.events = events

    def _key(self) -> tuple[Any, ...]:
        return (self.attr, self.module, self.name, self.opts, self.argnames, self.order, self.events)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HookDecl) and self._key() == other._key()

    def __repr__(self) -> str:
        return "HookDecl(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


class _Scan:
    def __init__(self) -> None:
        self.hooks: dict[str, HookDecl] = {}
        self.reexports: list[tuple[str, str, str]] = []  # (module, name, as)


def _spec(module: str) -> Any:
    """``module``'s spec without importing it or its parent packages (``importlib.util.find_spec``
    of a submodule imports the package; a plugin's package may be the heavy part)."""
    if module in sys.modules:
        return getattr(sys.modules[module], "__spec__", None)
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    name = top
    for part in rest:
        if spec is None or spec.submodule_search_locations is None:
            return None
        name = f"{name}.{part}"
        if name in sys.modules:
            spec = getattr(sys.modules[name], "__spec__", None)
            continue
        spec = PathFinder.find_spec(name, list(spec.submodule_search_locations))
    return spec


def _source(module: str) -> tuple[str, bool] | None:
    """(source text, is a package) of ``module``, without importing anything."""
    found = _read_source(module)
    if _READ is not None:
        _READ.append(found[2] if found else "")  # "": not found, the answer is not cached
    return found[:2] if found else None


def _read_source(module: str) -> tuple[str, bool, str] | None:
    try:
        spec = _spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8") as fh:
            return fh.read(), spec.submodule_search_locations is not None, spec.origin
    except OSError:
        return None


_READ: list[str] | None = None  # the files :func:`declare` read, while :mod:`clawkit.lazycache` records


def _statement(source: str, start: int, header: bool) -> tuple[ast.Module, int] | None:
    """Parse the shortest run of lines from offset ``start`` that is a complete statement (a def
    header gets a body); the tree and the offset where the run ends."""
    end = start
    for _ in range(60):
        nl = source.find("\n", end)
        end = len(source) if nl < 0 else nl + 1
        text = source[start:end]
        if header and not re.search(r":[ \t]*(#.*)?\s*$", text):
            continue
        try:
            return ast.parse(text + ("    pass\n" if header else "")), end
        except SyntaxError:
            if end >= len(source):
                return None
    return None


def _literal(node: ast.AST) -> Any:
    return ast.literal_eval(node)


def _decorator_name(node: ast.AST) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return ""


def _hook(fn: ast.FunctionDef | ast.AsyncFunctionDef, module: str) -> HookDecl | None | bool:
    """The declaration of one decorated function; None if not a hook; False if not understood."""
    opts: dict[str, Any] | None = None
    order = None
    events = None
    for dec in fn.decorator_list:
        name = _decorator_name(dec)
        try:
            if name == "hookimpl":
                opts = {k: False for k in _OPT_KEYS[:-1]} | {"specname": None}
                if isinstance(dec, ast.Call):
                    if dec.args:
                        return False
                    for kw in dec.keywords:
                        if kw.arg not in _OPT_KEYS:
                            return False
                        opts[kw.arg] = _literal(kw.value)
            elif name == "hook_order" and isinstance(dec, ast.Call) and len(dec.args) == 1:
                order = int(_literal(dec.args[0]))
            elif name == "on_events" and isinstance(dec, ast.Call):
                events = frozenset(str(_literal(a)) for a in dec.args)
            else:
                return False  # a decorator that may change the function: import it
        except (ValueError, TypeError, SyntaxError):
            return False  # a computed option
    if opts is None:
        return None
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    required = positional[: len(positional) - len(a.defaults)] if a.defaults else positional
    return HookDecl(fn.name, module, fn.name, opts, tuple(p.arg for p in required), order, events)


def _scan(module: str) -> _Scan | None:
    found = _source(module)
    if found is None:
        return None
    source, is_package = found
    package = module if is_package else module.rpartition(".")[0]
    scan = _Scan()
    done = 0
    for match in _rx("decorated").finditer(source) if "hookimpl" in source else ():
        if match.start() < done:
            continue  # inside the block just read
        body = _rx("def").search(source, match.start())
        if body is None:
            break
        if "hookimpl" not in source[match.start() : body.start()]:
            done = body.start()
            continue  # decorators without @hookimpl: not a hook (nothing to parse)
        parsed = _statement(source, match.start(), header=True)
        if parsed is None:
            return None  # a @hookimpl block the reader cannot parse: import the module
        tree, done = parsed
        node = tree.body[0]
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        decl = _hook(node, module)
        if decl is False:
            return None
        if decl is not None:
            scan.hooks[node.name] = decl
    for match in _rx("from").finditer(source):
        source_module = match.group(1)
        if source_module.startswith("."):
            source_module = importlib.util.resolve_name(source_module, package)
        elif not source_module.startswith(package.split(".")[0] + "."):
            continue  # the kernel or a library: no hook implementations of this plugin
        if source_module in (package, module):
            continue  # ``from . import submodule``
        line = source[match.end() : source.find("\n", match.end())]
        if _rx("simple_names").match(line):  # ``from .x import a, b as c`` on one line: no parser needed
            names = [tuple(n.split()[::2]) if " as " in n else (n.strip(), n.strip())
                     for n in line.split("#", 1)[0].split(",")]
        else:
            parsed = _statement(source, match.start(), header=False)
            if parsed is None or not isinstance(parsed[0].body[0], ast.ImportFrom):
                return None
            names = [(a.name, a.asname or a.name) for a in parsed[0].body[0].names]
        for name, attr in names:
            if name == "*":
                return None
            scan.reexports.append((source_module, name, attr))
    return scan


def declare(module: str) -> dict[str, HookDecl] | None:
    """The hook implementations of ``module`` read from its source (attribute -> declaration),
    following ``from .x import name`` re-exports; None when the module must be imported instead."""
    scans: dict[str, _Scan | None] = {}

    def scan_of(name: str) -> _Scan | None:
        if name not in scans:
            scans[name] = _scan(name)
        return scans[name]

    def lookup(source_module: str, name: str, depth: int) -> HookDecl | None | bool:
        scan = scan_of(source_module)
        if scan is None or depth > 3:
            return False
        if name in scan.hooks:
            return scan.hooks[name]
        for inner, inner_name, attr in scan.reexports:
            if attr == name:
                return lookup(inner, inner_name, depth + 1)
        return None

    front = scan_of(module)
    if front is None:
        return None
    hooks = dict(front.hooks)
    for source_module, name, attr in front.reexports:
        if name[:1].isupper():
            continue  # a class or a constant, not a hook implementation
        decl = lookup(source_module, name, 1)
        if decl is False:
            return None
        if decl is not None:
            hooks[attr] = HookDecl(attr, decl.module, decl.name, decl.opts, decl.argnames, decl.order, decl.events)
    return hooks


_CODE: dict[tuple[tuple[str, ...], bool], types.CodeType] = {}


def _proxy(decl: HookDecl, load: Any) -> types.FunctionType:
    """A function with ``decl``'s signature and options that calls ``load(decl)(...)``."""
    generator = bool(decl.opts.get("wrapper") or decl.opts.get("hookwrapper"))
    key = (decl.argnames, generator)
    code = _CODE.get(key)
    if code is None:
        params = ", ".join(decl.argnames)
        body = f"return (yield from _t[0]({params}))" if generator else f"return _t[0]({params})"
        namespace: dict[str, Any] = {}
        exec(compile(f"def proxy({params}):\n    {body}\n", "<clawkit lazy hook>", "exec"), namespace)
        code = _CODE[key] = namespace["proxy"].__code__
    target: list[Any] = []

    def first(*args: Any) -> Any:
        fn = load(decl)
        target[0] = fn
        return fn(*args)

    target.append(first)
    fn = types.FunctionType(code, {"_t": target}, decl.attr)
    fn.__qualname__ = decl.attr
    fn.__module__ = decl.module
    setattr(fn, f"{PROJECT}_impl", dict(decl.opts))
    if decl.order is not None:
        fn.clawkit_order = decl.order  # type: ignore[attr-defined]
    if decl.events is not None:
        fn.clawkit_events = decl.events  # type: ignore[attr-defined]
    return fn


class LazyPlugin:
    """Stands for module ``module`` in the plugin manager until one of its hooks runs.

    Its attributes are the hook proxies; any other attribute imports the module and is read from
    it (``pm.get_plugin("x").SomeClass`` keeps working).
    """

    def __init__(self, module: str, hooks: dict[str, HookDecl]):
        self.__name__ = module
        self._clawkit_module = module
        self._clawkit_hooks = hooks
        self._clawkit_lock = threading.Lock()
        for attr, decl in hooks.items():
            setattr(self, attr, _proxy(decl, self._load))

    def __dir__(self) -> list[str]:
        # what pluggy's register walks: only the hooks (each other name costs it a static lookup)
        return list(self._clawkit_hooks)

    def __repr__(self) -> str:
        return f"<lazy clawkit plugin {self._clawkit_module} ({len(self._clawkit_hooks)} hooks)>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name.startswith("_clawkit"):
            raise AttributeError(name)
        return getattr(import_module(self._clawkit_module), name)

    def _load(self, decl: HookDecl) -> Any:
        module = import_module(decl.module)
        fn = getattr(module, decl.name, None)
        problem = _mismatch(decl, fn)
        if problem:
            raise LazyPluginError(
                f"{decl.module}.{decl.name}: {problem} (read from the source of {self._clawkit_module}); "
                "define hook implementations as plain top-level `@hookimpl def` functions"
            )
        return fn

    def modules(self) -> list[str]:
        """The modules its hooks come from (imported or not)."""
        return sorted({d.module for d in self._clawkit_hooks.values()})


def _mismatch(decl: HookDecl, fn: Any) -> str:
    if fn is None:
        return "not found"
    opts = getattr(fn, f"{PROJECT}_impl", None)
    if opts is None:
        return "not a @hookimpl"
    if dict(opts) != decl.opts:
        return f"options {dict(opts)} differ from {decl.opts}"
    if getattr(fn, "clawkit_order", None) != decl.order:
        return "hook_order differs"
    if getattr(fn, "clawkit_events", None) != decl.events:
        return "on_events differs"
    from pluggy._hooks import varnames

    if tuple(varnames(fn)[0]) != decl.argnames:
        return f"arguments {varnames(fn)[0]} differ from {decl.argnames}"
    return ""


def lazy_plugin(module: str) -> LazyPlugin | None:
    """A :class:`LazyPlugin` for ``module``, or None when it must be imported (see module doc).
    The kernel passes declarations from :mod:`clawkit.lazycache` instead (see ``plugins._load``)."""
    hooks = declare(module)
    return LazyPlugin(module, hooks) if hooks else None
