"""WebAssembly tools: WASI preview 1 modules run with wasmtime, one fresh instance per call.

A call gets a new Store: a linear-memory limit, a fuel budget (instructions), and an
epoch deadline (wall clock: a shared ticker advances the engine's epoch every
``TICK`` seconds while calls run). Arguments arrive as JSON on stdin; stdout is the
result. No network (WASI preview 1 has no sockets), no environment, and only the
directories the tool declares *and* that lie in the workspace or in a policy grant
for the tool are preopened. The module's only other way out is the import
``clawkit.call_tool(name, name_len, args, args_len, out, out_cap) -> i32``: it runs a
host tool through the kernel's executor — the ``before_tool_call`` gates (policy,
shield), approval, ``after_tool_call`` and the audit ledger — and only tools the
declaration lists in ``host_tools`` (and the agent allows).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from clawkit.tools import Tool, ToolError
from clawkit.types import Risk, ToolCall, ToolDef

from .config import SandboxConfig, WasmToolConfig

TICK = 0.01
MODULES = Path(__file__).parent / "modules"
OUTPUT_CAP = 1 << 20
EXAMPLE = WasmToolConfig(
    name="text_stats", module=str(MODULES / "text_stats.wasm"), risk="safe", dirs=["."], host_tools=["read_file"],
    description="Count bytes, lines and words of a text (and find its longest word). Runs as a sandboxed "
    "WebAssembly module. Give exactly one of: text (the text itself), path (a workspace file), or host_file "
    "(a file the host's read_file tool reads for the module).",
    parameters={"type": "object", "properties": {
        "text": {"type": "string", "description": "the text to analyse"},
        "path": {"type": "string", "description": "a file in the workspace, relative to it"},
        "host_file": {"type": "string", "description": "a file read through the host's read_file tool"}}},
)

_lock = threading.Lock()
_engine: Any = None
_modules: dict[tuple[str, float], Any] = {}


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
        wasi = wasmtime.WasiConfig()
        wasi.argv = [Path(path).stem]
        wasi.stdin_file = stdin_path
        wasi.stdout_file = stdout_path
        for host, guest, writable in preopens:
            wasi.preopen_dir(host, guest, writable)
        store.set_wasi(wasi)
        linker = wasmtime.Linker(engine())
        linker.define_wasi()
        i32 = wasmtime.ValType.i32()
        linker.define_func("clawkit", "call_tool", wasmtime.FuncType([i32] * 6, [i32]),
                           _host_import(host_call), access_caller=True)
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


# --- the tool ----------------------------------------------------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="allow")


class WasmTool(Tool):
    """A :class:`clawkit.tools.Tool` whose arguments go to the module as JSON (schema: the declaration's)."""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"arguments": dict(arguments)}


def _preopens(ctx: Any, decl: WasmToolConfig) -> list[tuple[str, str, bool]]:
    workspace = os.path.realpath(str(ctx.workspace))
    state = getattr(ctx, "state", None) or {}
    granted = [p.rstrip("/") for p in ((state.get("granted") or {}).get(decl.name) or {}).get("paths", ())]
    out = []
    for spec in decl.dirs:
        parts = spec.split(":")
        host = parts[0]
        readonly = parts[-1] == "ro" and len(parts) > 1
        guest = parts[1] if len(parts) > 1 and parts[1] != "ro" else ("." if host == "." else host)
        real = os.path.realpath(os.path.join(workspace, os.path.expanduser(host)))
        inside = real == workspace or real.startswith(workspace + "/")
        if not (inside or any(real == g or real.startswith(g + "/") for g in granted)):
            continue  # declared but not granted: the module does not see it
        if os.path.isdir(real):
            out.append((real, guest, not readonly))
    return out


def wasm_tool(decl: WasmToolConfig, cfg: SandboxConfig | None = None, base: str | None = None) -> WasmTool:
    """Build the tool for one declaration (plugins may register the result in ``register_tools``)."""
    cfg = cfg or SandboxConfig()
    module = decl.module if os.path.isabs(decl.module) or base is None else os.path.join(base, decl.module)
    memory_mb, fuel, timeout = decl.memory_mb or cfg.wasm_memory_mb, decl.fuel or cfg.wasm_fuel, decl.timeout or cfg.wasm_timeout
    counter = itertools.count(1)

    async def run(ctx: Any, arguments: dict[str, Any]) -> str:
        loop = asyncio.get_running_loop()
        parent = getattr(ctx, "step_id", None) or "wasm"
        runtime = getattr(ctx, "runtime", None)

        def host_call(name: str, args_text: str) -> str:
            if name not in decl.host_tools:
                return f"Error: {decl.name} may not call host tool {name!r} (host_tools: {decl.host_tools})"
            if runtime is None:
                return "Error: host tools need a running agent"
            try:
                args = json.loads(args_text)
            except ValueError as exc:
                return f"Error: arguments for {name} are not JSON: {exc}"
            call = ToolCall(id=f"{parent}.host{next(counter)}", name=name, arguments=args if isinstance(args, dict) else {})
            ctx.emit("tool.host_call", call_id=call.id, tool=name, parent=parent, module=decl.name)
            future = asyncio.run_coroutine_threadsafe(runtime.executor.one(ctx, call, None, False), loop)
            return future.result(timeout + 60).content

        payload = json.dumps(arguments).encode("utf-8")
        with _ticker:
            outcome = await asyncio.to_thread(run_module, module, payload, memory_mb=memory_mb, fuel=fuel,
                                              timeout=timeout, preopens=_preopens(ctx, decl), host_call=host_call)
        if outcome.failure:
            raise ToolError(f"{decl.name} (WebAssembly) {outcome.failure}. Output so far: {outcome.stdout[:2000]!r}")
        if outcome.exit_code not in (0, None):
            raise ToolError(f"{decl.name} (WebAssembly) exited with code {outcome.exit_code}: {outcome.stdout[:2000]}")
        text = outcome.stdout.strip()
        try:
            result = json.loads(text)
        except ValueError:
            return text
        if isinstance(result, dict) and set(result) == {"error"}:
            raise ToolError(f"{decl.name}: {result['error']}")
        return text

    definition = ToolDef(name=decl.name, description=decl.description or f"WebAssembly tool {decl.name}",
                         parameters=decl.parameters, risk=Risk(decl.risk))
    return WasmTool(definition, run, _Args, True, True)


def tools_for(agent: Any) -> list[WasmTool]:
    """The Wasm tools of an agent: its ``wasm_tools`` declarations and the shipped example."""
    cfg = agent.plugin("sandbox") if hasattr(agent, "plugin") else None
    cfg = cfg if isinstance(cfg, SandboxConfig) else SandboxConfig()
    decls = list(cfg.wasm_tools) + ([EXAMPLE] if cfg.example_tools else [])
    base = str(getattr(agent, "workspace", ".") or ".")
    return [wasm_tool(d, cfg, base) for d in decls]
