"""The wasmtime side of WebAssembly tools: the engine, compiled modules, the epoch ticker, a
WASI *command* run once (:func:`run_module`), and a live WASI *reactor* instance that serves
the calls of one task (:class:`Reactor`).

Every call runs under a linear-memory limit, a fuel budget (instructions) and an epoch
deadline (wall clock: a shared ticker advances the engine's epoch every ``TICK`` seconds
while calls run). No network (WASI preview 1 has no sockets), no environment, only the
preopened directories. The module's only other way out is the import
``clawkit.call_tool(name, name_len, args, args_len, out, out_cap) -> i32`` (a host proxy:
the tool layer decides what it may reach).
"""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawkit.tools import ToolError

TICK = 0.01
MODULES = Path(__file__).parent / "modules"
OUTPUT_CAP = 1 << 20
_lock = threading.Lock()
_engine: Any = None
_modules: dict[tuple[str, float], Any] = {}
_live: "weakref.WeakSet[Reactor]" = weakref.WeakSet()


def engine() -> Any:
    """The process's wasmtime engine: fuel metering and epoch interruption on."""
    global _engine
    if _engine is None:
        import wasmtime

        with _lock:
            if _engine is None:
                cfg = wasmtime.Config()
                cfg.consume_fuel = True
                cfg.epoch_interruption = True
                _engine = wasmtime.Engine(cfg)
                atexit.register(_release)
    return _engine


def _release() -> None:
    """Free wasmtime objects before interpreter teardown (their finalisers need its modules)."""
    global _engine
    for reactor in list(_live):
        reactor.close()
    for module in _modules.values():
        module.close()
    _modules.clear()
    if _engine is not None:
        _engine.close()
        _engine = None


def compiled(path: str) -> Any:
    """The compiled module at ``path`` (.wasm, or .wat text), cached until the file changes."""
    import wasmtime

    try:
        key = (path, os.stat(path).st_mtime)
    except OSError as exc:
        raise ToolError(f"WebAssembly module {path!r} cannot be read: {exc.strerror}") from None
    found = _modules.get(key)
    if found is None:
        try:
            found = wasmtime.Module.from_file(engine(), path)
        except wasmtime.WasmtimeError as exc:
            raise ToolError(f"WebAssembly module {path!r} is not valid: {str(exc).splitlines()[0]}") from None
        _modules[key] = found
    return found


class _Ticker:
    """Advances the engine epoch every TICK seconds, only while calls are running."""

    def __init__(self) -> None:
        self.active = 0
        self.cond = threading.Condition()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> "_Ticker":
        with self.cond:
            self.active += 1
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="clawkit-wasm-epoch", daemon=True)
                self.thread.start()
            self.cond.notify()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self.active -= 1

    def _run(self) -> None:
        while True:
            with self.cond:
                if not self.cond.wait_for(lambda: self.active > 0, timeout=5.0):
                    self.thread = None
                    return
            engine().increment_epoch()
            threading.Event().wait(TICK)


_ticker = _Ticker()


@dataclass
class Outcome:
    stdout: str
    exit_code: int | None
    failure: str | None = None
    created: bool = False  # a task's instance was created for this call
    discarded: bool = False  # the call failed and its task's instance was destroyed


def run_module(path: str, stdin: bytes, *, memory_mb: int, fuel: int, timeout: float,
               preopens: list[tuple[str, str, bool]] = (), host_call: Any = None) -> Outcome:
    """Run a WASI command module once: fresh store and instance, limits applied. Blocking."""
    import wasmtime

    module = compiled(path)
    store = wasmtime.Store(engine())
    store.set_limits(memory_size=memory_mb << 20)
    store.set_fuel(fuel)
    store.set_epoch_deadline(max(1, int(timeout / TICK) + 1))
    with tempfile.TemporaryDirectory(prefix="clawkit-wasm-") as tmp:
        stdin_path, stdout_path = os.path.join(tmp, "stdin.json"), os.path.join(tmp, "stdout")
        with open(stdin_path, "wb") as fh:
            fh.write(stdin)
        # stdout goes through a FIFO drained by a thread: capped in memory, never on disk (a
        # Python stdout_custom callback makes wasmtime's runtime abort at interpreter exit)
        os.mkfifo(stdout_path, 0o600)
        drain = _Drain(stdout_path)
        linker = _linker(store, path, preopens, host_call, stdin=stdin_path, stdout=stdout_path)
        code: int | None = 0
        failure = None
        memory = None
        try:
            instance = linker.instantiate(store, module)
            memory = instance.exports(store).get("memory")
            instance.exports(store)["_start"](store)
        except wasmtime.ExitTrap as exc:
            code = exc.code
        except wasmtime.Trap as exc:
            code, failure = None, _why(exc, store, memory, memory_mb, fuel, timeout)
        except wasmtime.WasmtimeError as exc:
            code, failure = None, f"could not start: {str(exc).splitlines()[0]}"
        limit_hit = _at_limit(store, memory, memory_mb)
        store.close()  # closes the WASI context and so the module's end of the stdout FIFO
        out = drain.finish()
    if code not in (0, None) and failure is None and limit_hit:
        failure = f"exited with code {code} at the memory limit ({memory_mb} MiB)"
    return Outcome(out.decode("utf-8", "replace"), code, failure)


class _Drain:
    """Reads the module's stdout FIFO in a thread: keeps OUTPUT_CAP bytes, discards the rest."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.data = bytearray()
        self.thread = threading.Thread(target=self._read, name="clawkit-wasm-stdout", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.path, "rb", buffering=0) as fh:
            while chunk := fh.read(65536):
                room = OUTPUT_CAP - len(self.data)
                if room > 0:
                    self.data.extend(chunk[:room])

    def finish(self) -> bytes:
        if self.thread.is_alive():
            try:  # the module never opened stdout: unblock the reader's open()
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass
        self.thread.join(5.0)
        return bytes(self.data)


def _at_limit(store: Any, memory: Any, memory_mb: int) -> bool:
    """Was the module near its memory limit when it failed? (wasmtime refuses ``memory.grow``
    past the limit without saying so; a grow of any size from over half the limit may be it.)"""
    try:
        return memory is not None and memory.data_len(store) * 2 >= (memory_mb << 20)
    except Exception:
        return False


def _used(store: Any, memory: Any) -> str:
    try:
        return f"; {memory.data_len(store) / (1 << 20):.1f} MiB in use, more was refused"
    except Exception:
        return ""


def _why(exc: Any, store: Any, memory: Any, memory_mb: int, fuel: int, timeout: float) -> str:
    import wasmtime

    code = exc.trap_code
    if code == wasmtime.TrapCode.OUT_OF_FUEL:
        return f"stopped: it used up its fuel ({fuel:,} instructions)"
    if code == wasmtime.TrapCode.INTERRUPT:
        return f"stopped: it ran past its deadline ({timeout:g} s)"
    lines = [ln.strip() for ln in str(exc.message).splitlines() if ln.strip()]
    first = code.name.lower().replace("_", " ") if code is not None else (lines[-1] if lines else "trap")
    if _at_limit(store, memory, memory_mb):
        return f"stopped at the memory limit ({memory_mb} MiB{_used(store, memory)}): {first}"
    return f"trapped: {first}"


def _linker(store: Any, path: str, preopens: list[tuple[str, str, bool]], host_call: Any, *,
            stdin: str | None = None, stdout: str | None = None) -> Any:
    """WASI for ``store`` (argv, the preopened directories, stdin/stdout files when given) and a
    linker offering WASI preview 1 and the host-tool import ``clawkit.call_tool``."""
    import wasmtime

    wasi = wasmtime.WasiConfig()
    wasi.argv = [Path(path).stem]
    if stdin is not None:
        wasi.stdin_file = stdin
    if stdout is not None:
        wasi.stdout_file = stdout
    for host, guest, writable in preopens:
        wasi.preopen_dir(host, guest, writable)
    store.set_wasi(wasi)
    linker = wasmtime.Linker(engine())
    linker.define_wasi()
    i32 = wasmtime.ValType.i32()
    linker.define_func("clawkit", "call_tool", wasmtime.FuncType([i32] * 6, [i32]), _host_import(host_call),
                       access_caller=True)
    return linker


def _host_import(host_call: Any):
    def call_tool(caller: Any, name_ptr: int, name_len: int, args_ptr: int, args_len: int, out_ptr: int,
                  out_cap: int) -> int:
        memory = caller["memory"]
        name = bytes(memory.read(caller, name_ptr, name_ptr + name_len)).decode("utf-8", "replace")
        args = bytes(memory.read(caller, args_ptr, args_ptr + args_len)).decode("utf-8", "replace")
        text = host_call(name, args) if host_call is not None else "Error: host tools are not available here"
        data = text.encode("utf-8")[: max(0, out_cap)]
        memory.write(caller, data, out_ptr)
        return len(data)

    return call_tool




class _held:
    """Release an already acquired lock on exit."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


class Reactor:
    """A WASI *reactor* instance serving the calls of one task (an agent run).

    Created on the task's first call — store, memory limit, the preopens fixed then (a grant
    made later in the task does not widen it), ``_initialize`` run once — then each call
    writes its JSON arguments into the buffer ``clawkit_alloc(len)`` returns and calls
    ``clawkit_handle(ptr, len) -> i64`` (the response's ``ptr << 32 | len``). Fuel and the
    deadline are reset for every call; the memory limit holds for the instance. A call that
    traps or exits (fuel, deadline, memory, a crash) discards the instance: its state may be
    half-updated, so the task's next call starts a fresh one. Calls are serialised.
    """

    EXPORTS = ("clawkit_alloc", "clawkit_handle")

    def __init__(self, path: str, *, memory_mb: int, preopens: list[tuple[str, str, bool]]) -> None:
        self.path, self.memory_mb, self.preopens = path, memory_mb, list(preopens)
        self.lock = threading.Lock()
        self.store: Any = None
        self.exports: Any = None
        self.memory: Any = None
        self.host_call: Any = None
        self.closing = False
        self.calls = 0
        self.created = 0

    @classmethod
    def is_reactor(cls, path: str) -> bool:
        names = {e.name for e in compiled(path).exports}
        return all(n in names for n in cls.EXPORTS)

    @property
    def alive(self) -> bool:
        return self.store is not None

    def _create(self, fuel: int, timeout: float) -> None:
        import wasmtime

        module = compiled(self.path)
        if not self.is_reactor(self.path):
            raise ToolError(f"WebAssembly module {self.path!r} cannot keep an instance per task: it must be a WASI "
                            f"reactor exporting {' and '.join(self.EXPORTS)} (build with -mexec-model=reactor); "
                            "a command module (_start) runs with `instance: call`")
        store = wasmtime.Store(engine())
        store.set_limits(memory_size=self.memory_mb << 20)
        store.set_fuel(fuel)
        store.set_epoch_deadline(max(1, int(timeout / TICK) + 1))
        linker = _linker(store, self.path, self.preopens,
                         lambda name, args: self.host_call(name, args) if self.host_call else
                         "Error: host tools are not available here")
        self.store = store  # set first: a trap in _initialize still closes it
        _live.add(self)
        instance = linker.instantiate(store, module)
        self.exports = instance.exports(store)
        self.memory = self.exports.get("memory")
        self.created += 1
        init = self.exports.get("_initialize")
        if init is not None:
            init(store)

    def call(self, payload: bytes, *, fuel: int, timeout: float, host_call: Any = None) -> Outcome:
        """One call: arguments in, response out. Blocking; run it in a worker thread."""
        import wasmtime

        if not self.lock.acquire(timeout=max(timeout, 0.0)):  # a host call re-entering its own task's instance
            return Outcome("", None, f"not run: the task's instance is busy with another call past this call's deadline "
                                     f"({timeout:g} s)")
        with _held(self.lock):
            if self.closing:
                return Outcome("", None, "not run: the task's instance was destroyed (its run ended)")
            self.host_call = host_call
            fresh = self.store is None
            store = None
            try:
                if fresh:
                    self._create(fuel, timeout)
                store = self.store
                store.set_fuel(fuel)
                store.set_epoch_deadline(max(1, int(timeout / TICK) + 1))
                ptr = self.exports["clawkit_alloc"](store, len(payload))
                if not ptr:
                    return Outcome("", None, f"refused a request of {len(payload)} bytes (clawkit_alloc returned 0)",
                                   created=fresh)
                self.memory.write(store, payload, ptr)
                packed = self.exports["clawkit_handle"](store, ptr, len(payload)) & 0xFFFF_FFFF_FFFF_FFFF
                start, size = packed >> 32, min(packed & 0xFFFF_FFFF, OUTPUT_CAP)
                out = bytes(self.memory.read(store, start, start + size))
                self.calls += 1
                return Outcome(out.decode("utf-8", "replace"), 0, created=fresh)
            except wasmtime.ExitTrap as exc:
                return self._failed(fresh, f"exited with code {exc.code}", code=exc.code)
            except wasmtime.Trap as exc:
                return self._failed(fresh, _why(exc, store, self.memory, self.memory_mb, fuel, timeout))
            except wasmtime.WasmtimeError as exc:
                return self._failed(fresh, f"failed: {str(exc).splitlines()[0]}")
            finally:
                self.host_call = None
                if self.closing:
                    self._destroy()

    def _failed(self, fresh: bool, why: str, code: int | None = None) -> Outcome:
        self._destroy()
        return Outcome("", code, why, created=fresh, discarded=True)

    def _destroy(self) -> None:
        store, self.store, self.exports, self.memory = self.store, None, None, None
        if store is not None:
            store.close()

    def close(self, wait: float = 0.0) -> bool:
        """Destroy the instance: now when no call runs (waiting up to ``wait`` s for one to stop),
        else as soon as the running call stops (it stops at its deadline at the latest).
        True when it was destroyed now."""
        self.closing = True
        got = self.lock.acquire(timeout=wait) if wait > 0 else self.lock.acquire(blocking=False)
        if not got:
            return False
        try:
            self._destroy()
        finally:
            self.lock.release()
        return True
