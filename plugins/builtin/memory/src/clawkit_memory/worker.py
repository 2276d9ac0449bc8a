"""The memory worker: one daemon thread per memory service. Urgent jobs (a turn's recall)
run first, in order; background jobs (episode indexing) run when due and nothing urgent
waits, so indexing the last turn never sits in front of the next turn's recall."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable


class MemoryWorker:
    """``submit(fn, ...)`` (urgent) and ``later(delay, fn, ...)`` (background), both → Future."""

    def __init__(self, name: str):
        self.name = name
        self._cv = threading.Condition()
        self._urgent: deque = deque()
        self._later: list = []  # heap of (due, seq, job)
        self._seq = itertools.count()
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Run ``fn`` next, after the urgent jobs already queued."""
        fut: Future = Future()
        with self._cv:
            self._check()
            self._urgent.append((fut, fn, args, kwargs))
            self._cv.notify()
        return fut

    def later(self, delay: float, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Run ``fn`` once ``delay`` seconds have passed and no urgent job waits."""
        fut: Future = Future()
        with self._cv:
            self._check()
            heapq.heappush(self._later, (time.monotonic() + delay, next(self._seq), (fut, fn, args, kwargs)))
            self._cv.notify()
        return fut

    def flush(self, timeout: float = 10.0) -> None:
        """Make every background job due now and wait until all queued work is done."""
        with self._cv:
            self._later = [(0.0, seq, job) for _, seq, job in self._later]
            heapq.heapify(self._later)
        done = self.later(0.0, lambda: None)  # background jobs run in due order: this one is last
        done.result(timeout=timeout)

    def _check(self) -> None:
        if self._closed:
            raise RuntimeError(f"memory worker {self.name} is shut down")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _next(self) -> tuple | None:
        with self._cv:
            while True:
                if self._closed:
                    return None
                if self._urgent:
                    return self._urgent.popleft()
                now = time.monotonic()
                if self._later and self._later[0][0] <= now:
                    return heapq.heappop(self._later)[2]
                self._cv.wait(timeout=self._later[0][0] - now if self._later else None)

    def _run(self) -> None:
        while (job := self._next()) is not None:
            fut, fn, args, kwargs = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
                fut.set_exception(exc)

    def shutdown(self, timeout: float | None = 10.0) -> bool:
        """Stop the thread and join it (up to ``timeout`` seconds); queued jobs are
        cancelled, a running one finishes. True when the thread has ended. Idempotent."""
        with self._cv:
            self._closed = True
            pending = [job[0] for job in self._urgent] + [item[2][0] for item in self._later]
            self._urgent.clear()
            self._later.clear()
            self._cv.notify_all()
            thread = self._thread
        for fut in pending:
            fut.cancel()
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        if thread.is_alive():
            import logging

            logging.getLogger("clawkit.memory").warning("memory worker %s still busy after %ss", self.name, timeout)
            return False
        return True

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end (after :meth:`shutdown`); True when it has."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()
