"""``clawkit doctor``: does the sandbox work on this machine? Each check runs the real thing."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from clawkit import hookimpl

if TYPE_CHECKING:  # the CLI registers this command without loading pydantic
    from .config import SandboxConfig


def _check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"check": name, "ok": ok, "detail": detail}


# inside a jail granted one host: ask the proxy for another one; its 403 proves the whole path
# (forwarder listening, unix socket mounted, host-side check) works
NET_PROBE = ("python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', 3128), 5); "
             "s.sendall(b'CONNECT 192.0.2.1:80 HTTP/1.1\\r\\n\\r\\n'); print(s.recv(200).split(b'\\r\\n')[0].decode())\"")


async def _jailed(cfg: SandboxConfig, workspace: str, command: str, hosts: tuple[str, ...] = ()) -> tuple[int | None, str]:
    from clawkit.process import ProcessSpec

    from .jail import build

    ctx = SimpleNamespace(workspace=workspace, state={}, agent=None)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    launch = build(ctx, ProcessSpec("doctor", ["/bin/sh", "-c", command], workspace, env, 10.0), cfg,
                   {"hosts": list(hosts)})
    try:
        proc = await asyncio.create_subprocess_exec(*launch.argv, cwd=launch.cwd, env=launch.env,
                                                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        out, _ = await asyncio.wait_for(proc.communicate(), 20)
        return proc.returncode, out.decode("utf-8", "replace").strip()
    finally:
        await launch.close()


def doctor_report(cfg: SandboxConfig | None = None) -> list[dict[str, Any]]:
    """Checks (name, ok, detail) of the process jail and the WebAssembly runtime."""
    from .config import SandboxConfig
    from .jail import JAIL_UID, pids_cgroup_available, problem

    cfg = cfg or SandboxConfig()
    checks: list[dict[str, Any]] = []
    cause = problem(cfg)
    checks.append(_check("bubblewrap", cause is None, cause or "bwrap creates user, pid, ipc, uts and net namespaces"))
    if cause is None:
        with tempfile.TemporaryDirectory(prefix="clawkit-doctor-") as ws:
            probe = ("id -u; test -e /root/. && echo HOME-VISIBLE; "
                     "(echo x > /etc/clawkit-doctor) 2>/dev/null && echo ETC-WRITABLE; "
                     "echo ok > inside.txt && cat inside.txt")
            code, out = asyncio.run(_jailed(cfg, ws, probe))
            lines = out.splitlines()
            checks.append(_check("jail runs", code == 0 and "ok" in lines, f"exit {code}: {out[:300]}"))
            checks.append(_check("jail user", bool(lines) and lines[0] == JAIL_UID, f"uid inside: {lines[0] if lines else '?'}"))
            checks.append(_check("home hidden", "HOME-VISIBLE" not in lines, "/root is not visible inside"))
            checks.append(_check("system read-only", "ETC-WRITABLE" not in lines, "/etc cannot be written inside"))
            checks.append(_check("workspace writable", os.path.exists(os.path.join(ws, "inside.txt")),
                                 "a file written inside appears in the workspace"))
            if cfg.network_grants == "proxy":
                try:
                    code, out = asyncio.run(_jailed(cfg, ws, NET_PROBE, hosts=("127.0.0.1:1",)))
                except Exception as exc:  # e.g. no python3 inside the jail: per-host grants are refused
                    code, out = None, f"{type(exc).__name__}: {exc}"
                checks.append(_check("per-host network", code == 0 and " 403 " in out,
                                     "a grant's hosts are reachable only through the checked proxy (an ungranted host "
                                     f"was refused: {out[:200]})" if code == 0 and " 403 " in out else f"exit {code}: {out[:300]}"))
    pids = pids_cgroup_available()
    root = os.geteuid() == 0
    checks.append(_environ_check(cause is None, root))
    checks.append(_check("process limit", pids or not root,
                         "cgroup pids.max" if pids else ("RLIMIT_NPROC (not root)" if not root else
                                                          "root is exempt from RLIMIT_NPROC and no writable pids "
                                                          "cgroup exists: a fork bomb is only stopped by the timeout")))
    try:
        from .wasm import engine

        engine()
        checks.append(_check("wasmtime", True, "WebAssembly tools can run (fuel, epoch deadlines, memory limits)"))
    except Exception as exc:  # the jail still works without it
        checks.append(_check("wasmtime", False, f"{type(exc).__name__}: {exc}"))
    return checks


def governing_check(cfg: SandboxConfig, jail_ok: bool, agent_file: str | None = None) -> dict[str, Any]:
    """Which protection keeps what governs the agent's next run (its YAML, the YAML files it names,
    ``.agents/``, ``.clawkit/``, skill folders, the user's clawkit config) out of its commands' reach."""
    names = "the agent's YAML and the YAML files it names, .agents/, .clawkit/, skill folders, the user's clawkit config"
    listed = ""
    if agent_file:
        from clawkit.governing import collect
        from clawkit.hooks import HookRunner
        from clawkit.runtime import load_config

        config, pm = load_config(agent_file)
        own = config.plugin("sandbox")
        cfg = own if own is not None and hasattr(own, "mode") else cfg
        shown = [g.path + (" (writes need an approval naming the file)" if g.consent else "")
                 for g in collect(HookRunner(pm), config)]
        listed = " Governing paths: " + "; ".join(shown)
    if cfg.mode == "off":
        how = ("plugins.sandbox.mode is off: commands run unjailed, so after every shell_exec these files are compared "
               "with a snapshot taken before it, and any change is undone and reported as an error (what the "
               "command did elsewhere meanwhile is not undone)")
    elif jail_ok:
        how = ("read-only inside the jail (bubblewrap --ro-bind; .clawkit/ hidden); one that does not exist yet is "
               "checked after each command and removed if a command created it")
    else:
        how = "no jail here, so shell_exec refuses to run commands (set plugins.sandbox.mode: off to run them checked)"
    return _check("governing files", cfg.mode == "off" or jail_ok,
                  f"{names}: {how}. The file tools refuse to write them (skill folders: only after an approval naming "
                  f"the file).{listed}")


def _environ_check(jail: bool, root: bool) -> dict[str, Any]:
    """Can a command read the agent's own environment (its model key) through /proc/<pid>/environ?"""
    off = ("with plugins.sandbox.mode: off, commands run beside the agent: shell_exec makes the agent "
           "non-dumpable and refuses commands naming /proc/<pid>/environ")
    if root:
        off += ("; but as root (CAP_SYS_PTRACE) a command can still read /proc/<agent pid>/environ (the model key "
                "and every secret in the agent's environment): keep the sandbox on, or run as an ordinary user")
    else:
        off += ", so /proc/<agent pid>/environ is unreadable to them"
    what = "the jail hides the agent's /proc entries from commands" if jail else "no jail here"
    return _check("agent environment", jail or not root, f"{what}; {off}")


def run(args: Any) -> int:
    from .config import SandboxConfig

    cfg = SandboxConfig(mode="bwrap", bwrap=args.bwrap) if args.bwrap else SandboxConfig()
    checks = doctor_report(cfg)
    jail_ok = all(c["ok"] for c in checks if c["check"] in ("bubblewrap", "jail runs"))
    try:
        checks.append(governing_check(cfg, jail_ok, getattr(args, "agent", None)))
    except Exception as exc:  # a broken agent file: say so, the sandbox checks stand
        checks.append(_check("governing files", False, f"cannot load {args.agent}: {exc}"))
    if args.json:
        print(json.dumps(checks, indent=2))
    else:
        for c in checks:
            print(f"{'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['detail']}")
        bad = [c for c in checks if not c["ok"]]
        print("sandbox: works here" if not bad else
              f"sandbox: {len(bad)} problem(s); until they are fixed shell_exec refuses to run commands "
              "(set plugins.sandbox.mode: off to run them unsandboxed)", file=sys.stderr if bad else sys.stdout)
    return 0 if all(c["ok"] for c in checks if c["check"] in ("bubblewrap", "jail runs")) else 1


@hookimpl(specname="register_commands")
def register(cli: Any) -> None:
    p = cli.command("doctor", help="check that the sandbox (bubblewrap jail, wasmtime) works on this machine")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--bwrap", help="the bubblewrap executable to check (default: bwrap on PATH)")
    p.add_argument("--agent", metavar="AGENT_YAML", help="also say how this agent's governing files are protected, and list them")
    p.set_defaults(handler=run)
