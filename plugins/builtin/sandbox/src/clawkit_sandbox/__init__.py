"""clawkit-sandbox: processes in a bubblewrap jail, untrusted tools in WebAssembly.

* ``confine_process`` (the kernel's process-execution hook): every process a tool
  starts (``shell_exec``…) runs inside a bubblewrap jail (:mod:`clawkit_sandbox.jail`);
  a grant naming hosts lets it reach only those, through a proxy that checks and audits
  each connection (:mod:`clawkit_sandbox.network`); where bwrap cannot run the process is
  refused with the cause and the setting (``plugins.sandbox.mode: off``) that allows
  unsandboxed execution. Each jail is
  recorded as a ``tool.sandbox`` event, which the policy's audit ledger keeps.
* WebAssembly tools (:mod:`clawkit_sandbox.wasm`): WASI modules declared in
  ``plugins.sandbox.wasm_tools`` (or registered by a plugin with :func:`wasm_tool`),
  run with wasmtime: a fresh instance per call or one per task (an agent run, destroyed
  when it ends); fuel, memory and wall-clock limits per call, only granted directories
  preopened, no network, and host tools reachable only through the kernel's gates.
* ``clawkit doctor``: does the sandbox work here?
"""

from __future__ import annotations

from clawkit.lazy import lazy_exports

# The entry point names :mod:`clawkit_sandbox.hooks`: the kernel reads its hooks from the source and
# imports each hook's module on its first call (``clawkit --help`` imports only :mod:`.doctor`).
__all__ = ["SandboxConfig", "WasmToolConfig", "wasm_tool", "doctor_report"]

__getattr__ = lazy_exports(__name__, {"SandboxConfig": "config", "WasmToolConfig": "config", "wasm_tool": "wasm",
                                      "doctor_report": "doctor"})
