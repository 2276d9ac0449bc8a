"""How the kernel calls hooks: one implementation at a time, so that one failing
plugin is isolated (or, for security gates, fails closed) instead of aborting the
whole call as plain pluggy would.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import time
import types
from typing import Any, Callable

import pluggy

from .hookspecs import order_of, wants_event

log = logging.getLogger("clawkit.hooks")


async def _wrap(awaitable: Any) -> Any:
    return await awaitable


_COROUTINE = types.CoroutineType
_PLAIN = frozenset({type(None), str, bool, int, float, list, dict, tuple, _COROUTINE})


def isawaitable(value: Any) -> bool:
    """``inspect.isawaitable`` with the common answers first: hooks return None, plain values or
    coroutines many times per turn, and the ABC check behind ``inspect.isawaitable`` costs up to ~1 us."""
    t = type(value)
    if t in _PLAIN:
        return t is _COROUTINE
    return inspect.isawaitable(value)


async def maybe_await(value: Any) -> Any:
    if isawaitable(value):
        return await value
    return value


class HookFailure(Exception):
    """Raised by :meth:`HookRunner.call_gate` style callers; carries the plugin name."""

    def __init__(self, plugin: str, hook: str, error: BaseException):
        super().__init__(f"{plugin}.{hook} raised {type(error).__name__}: {error}")
        self.plugin = plugin
        self.hook = hook
        self.error = error


class HookRunner:
    """Calls hook implementations in pluggy's order, each on its own.

    ``emit(type, **data)`` reports isolated failures as ``hook.error`` events.
    Implementation lists are cached: the plugin set is fixed once an agent starts.
    """

    def __init__(self, pm: pluggy.PluginManager, emit: Callable[..., None] | None = None):
        self.pm = pm
        self.emit = emit
        self.trace = getattr(pm, "_clawkit_trace", False)
        self._cache: dict[str, list[tuple[str, Callable[..., Any], tuple[str, ...]]]] = {}
        self._tasks: set[asyncio.Task] = set()

    def impls(self, name: str) -> list[tuple[str, Callable[..., Any], tuple[str, ...]]]:
        """(plugin name, function, argnames) in call order: by position (``hook_order``; else
        0 for ``tryfirst``, 100, 200 for ``trylast``), then last-registered first."""
        cached = self._cache.get(name)
        if cached is None:
            caller = getattr(self.pm.hook, name)
            # explicit positions first (hook_order, tryfirst/trylast), pluggy's order among equals:
            # see docs/hook-order.md (sorted() is stable)
            ordered = sorted(reversed(caller.get_hookimpls()), key=order_of)
            cached = [(i.plugin_name, i.function, tuple(i.argnames)) for i in ordered]
            self._cache[name] = cached
        return cached

    def has(self, name: str) -> bool:
        return bool(self.impls(name))

    def call_event(self, event: Any) -> None:
        """``on_event`` for ``event``: the implementations that take its type (``@on_events``), each
        isolated; the list is cached per type."""
        key = ("on_event", event.type)
        impls = self._cache.get(key)  # type: ignore[call-overload]
        if impls is None:
            impls = [i for i in self.impls("on_event") if wants_event(i[1], event.type)]
            self._cache[key] = impls  # type: ignore[index]
        kw = {"event": event}
        for plugin, fn, argnames in impls:
            try:
                res = self._invoke("on_event", plugin, fn, argnames, kw)
                if isawaitable(res):
                    self._settle("on_event", plugin, res)
            except Exception as exc:
                self.report("on_event", plugin, exc)

    def _invoke(self, name: str, plugin: str, fn: Callable[..., Any], argnames: tuple[str, ...], kw: dict[str, Any]):
        if not self.trace:
            # positionally, in the implementation's own parameter order (pluggy's argnames): no
            # keyword dict per call — ~60 calls a turn with every builtin loaded
            n = len(argnames)
            if n == 1:
                return fn(kw[argnames[0]])
            if n == 2:
                return fn(kw[argnames[0]], kw[argnames[1]])
            if n == 3:
                return fn(kw[argnames[0]], kw[argnames[1]], kw[argnames[2]])
            return fn(*[kw[k] for k in argnames])
        args = {k: kw[k] for k in argnames}
        t0 = time.perf_counter()
        try:
            return fn(**args)
        finally:
            print(f"[clawkit trace] {name} [{plugin}] {(time.perf_counter() - t0) * 1e3:.3f} ms", file=sys.stderr)

    def report(self, name: str, plugin: str, exc: BaseException) -> None:
        log.warning("plugin %s failed in %s: %r", plugin, name, exc, exc_info=exc)
        if self.emit is not None and name != "on_event":
            self.emit("hook.error", hook=name, plugin=plugin, error=f"{type(exc).__name__}: {exc}")

    def call_sync(self, name: str, **kw: Any) -> list[Any]:
        """Every implementation, isolated; non-None results in order.

        Used where the kernel cannot wait (start-up registration, ``on_event``). An
        implementation that returns an awaitable is run to completion when no event
        loop is running, and scheduled as a task on the running loop otherwise.
        """
        out = []
        for plugin, fn, argnames in self.impls(name):
            try:
                res = self._invoke(name, plugin, fn, argnames, kw)
                if isawaitable(res):
                    res = self._settle(name, plugin, res)
            except Exception as exc:
                self.report(name, plugin, exc)
                continue
            if res is not None:
                out.append(res)
        return out

    def _settle(self, name: str, plugin: str, awaitable: Any) -> Any:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(_wrap(awaitable))
        task = loop.create_task(_wrap(awaitable))
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                self.report(name, plugin, t.exception())  # type: ignore[arg-type]

        task.add_done_callback(done)
        return None

    async def call(self, name: str, **kw: Any) -> list[tuple[str, Any]]:
        """Every implementation, awaited where needed, isolated; (plugin, result) pairs."""
        out = []
        for plugin, fn, argnames in self.impls(name):
            try:
                res = self._invoke(name, plugin, fn, argnames, kw)
                if isawaitable(res):
                    res = await res
            except Exception as exc:
                self.report(name, plugin, exc)
                continue
            if res is not None:
                out.append((plugin, res))
        return out

    async def call_first(self, name: str, *, fail_closed: bool = False, **kw: Any) -> Any:
        """The first non-None result. With ``fail_closed`` an exception propagates as HookFailure."""
        for plugin, fn, argnames in self.impls(name):
            try:
                res = self._invoke(name, plugin, fn, argnames, kw)
                if isawaitable(res):
                    res = await res
            except Exception as exc:
                self.report(name, plugin, exc)
                if fail_closed:
                    raise HookFailure(plugin, name, exc) from exc
                continue
            if res is not None:
                return res
        return None

    async def call_chain(self, name: str, value_key: str, accept: type | tuple[type, ...], **kw: Any) -> Any:
        """Each implementation may return a replacement for ``kw[value_key]``; the next sees it."""
        for plugin, fn, argnames in self.impls(name):
            try:
                res = self._invoke(name, plugin, fn, argnames, kw)
                if isawaitable(res):
                    res = await res
            except Exception as exc:
                self.report(name, plugin, exc)
                continue
            if res is not None and isinstance(res, accept):
                kw[value_key] = res
        return kw[value_key]
