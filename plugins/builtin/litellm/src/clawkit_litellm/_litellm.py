"""Importing litellm, once, lazily, and configured for offline use.

litellm costs seconds to import, so nothing in this plugin imports it at module
level: the ``clawkit`` CLI loads this plugin's entry point on every start.
"""

from __future__ import annotations

import atexit
import gc
import os
import threading
import warnings
from typing import Any

from .tokens import configure_offline_tiktoken

_lock = threading.Lock()
_module: Any = None


def load_litellm() -> Any:
    """The ``litellm`` module, imported on first use with no network access.

    ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps it from fetching the price list at import
    (a blocked network stretches the import to ~10 s); the bundled tiktoken cache
    keeps tokenizers offline; debug banners on errors are silenced because clawkit
    reports errors itself.
    """
    global _module
    if _module is not None:
        return _module
    with _lock:
        if _module is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            configure_offline_tiktoken()
            # pydantic chatter about litellm's own types, at import and at first call
            warnings.filterwarnings("ignore", message=r".*is using the `ReadOnly` qualifier", category=UserWarning)
            # litellm builds the request coroutine in an executor thread; a call cancelled while
            # that thread runs (a classifier past its time budget, Ctrl-C) leaves the coroutine
            # unawaited and the garbage collector warns. The request was never sent: harmless.
            warnings.filterwarnings("ignore", message=r"coroutine '\w+\.acompletion' was never awaited",
                                    category=RuntimeWarning)
            import litellm

            try:  # an HTTP handler's __del__ imports this: imported then, a collection that runs during
                # another import deadlocks on the import lock (seen with several models in one process)
                import litellm.llms.custom_httpx.aiohttp_transport  # noqa: F401
            except ImportError:  # pragma: no cover - a litellm without it does not import it in __del__ either
                pass
            litellm.suppress_debug_info = True
            litellm.telemetry = False
            atexit.register(_release_clients, litellm)
            _module = litellm
    return _module


def _release_clients(litellm: Any) -> None:
    """Drop litellm's cached HTTP clients while the interpreter is still whole.

    A handler's ``__del__`` imports a module to dispose of its session; run during interpreter
    finalization (modules already torn down) that import can block forever on the import lock, so
    a finished ``clawkit run`` hung at exit now and then. Collected here, at ``atexit``, the
    imports work and nothing is left for finalization."""
    try:
        cache = getattr(litellm, "in_memory_llm_clients_cache", None)
        if cache is not None:
            cache.flush_cache()
        gc.collect()
        # handlers still referenced (litellm's module-level clients) are finalized with the
        # interpreter, where that import can still deadlock: their __del__ is disarmed now (the
        # process is ending; the OS closes its sockets)
        from litellm.llms.custom_httpx import http_handler

        for name in ("AsyncHTTPHandler", "HTTPHandler"):
            cls = getattr(http_handler, name, None)
            if cls is not None and "__del__" in vars(cls):
                cls.__del__ = _no_finalizer
    except Exception:  # exiting anyway: never turn a clean exit into a traceback
        pass


def _no_finalizer(self: Any) -> None:
    """An HTTP handler's finalizer at interpreter exit: nothing (see :func:`_release_clients`)."""
