"""The bubblewrap jail for processes tools start.

Inside: the system directories read-only (secrets under them masked), the workspace
read-write at its own path (its ``.clawkit`` state directory hidden), granted paths
read-only or read-write as granted, a private size-limited ``/tmp``, a minimal
``/dev``, a ``/proc`` of its own; nothing else exists. New user, pid, ipc, uts,
cgroup and network namespaces (a grant naming hosts reaches them through the checked proxy
of :mod:`clawkit_sandbox.network`; ``network_grants: all`` shares the host's network instead); the jail's user is
``nobody`` without capabilities, ``no_new_privs`` is set (bwrap always does), and
``--die-with-parent`` ties the jail to the clawkit process. A shell in front of bwrap
sets hard rlimits the whole jail inherits — CPU time, address space, file size, open
files; the process count is a cgroup
``pids.max`` where one can be created (a root caller is exempt from RLIMIT_NPROC),
``RLIMIT_NPROC`` otherwise. Killing bwrap (the tool kills its process group at the
timeout) kills the jail's init and so every process in its pid namespace.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from clawkit.process import ProcessLaunch, ProcessRefused, ProcessSpec

from .config import SandboxConfig
from .network import FORWARDER, JAIL_DIR, PROXY_PORT, NetworkProxy, jail_python

SETTING = "plugins.sandbox.mode: off"
JAIL_UID = "65534"
_probed: dict[str, str | None] = {}


def _fix(cause: str) -> str:
    return (f"{cause}. shell_exec will not run commands unsandboxed on its own: install bubblewrap "
            f"(apt-get install bubblewrap) and allow user namespaces, or set `{SETTING}` in the agent YAML "
            "to run them unsandboxed")


def problem(cfg: SandboxConfig) -> str | None:
    """Why bubblewrap cannot run here (None when it can). Probed once per executable."""
    key = cfg.bwrap
    if key in _probed:
        return _probed[key]
    exe = shutil.which(cfg.bwrap)
    found: str | None
    if exe is None:
        found = f"bubblewrap ({cfg.bwrap!r}) is not installed or not on PATH"
    else:
        try:
            out = subprocess.run(
                [exe, "--unshare-user", "--unshare-pid", "--unshare-net", "--die-with-parent", "--ro-bind", "/", "/",
                 "--proc", "/proc", "--dev", "/dev", "true"],
                capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL,
            )
            found = None if out.returncode == 0 else (
                f"bubblewrap cannot create its namespaces here (exit {out.returncode}: "
                f"{out.stderr.strip() or 'no message'}; are unprivileged user namespaces disabled?)")
        except (OSError, subprocess.TimeoutExpired) as exc:
            found = f"bubblewrap failed to start ({type(exc).__name__}: {exc})"
    _probed[key] = found
    return found


# --- process-count limit: a pids cgroup ----------------------------------------------------


def _pids_root() -> str | None:
    for root in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
        if root.endswith("pids") and os.path.isdir(root) and os.access(root, os.W_OK):
            return root
        if os.path.isfile(os.path.join(root, "cgroup.controllers")):
            try:
                with open(os.path.join(root, "cgroup.subtree_control")) as fh:
                    if "pids" in fh.read().split() and os.access(root, os.W_OK):
                        return root
            except OSError:
                pass
    return None


@dataclass
class PidsCgroup:
    path: str

    @classmethod
    def create(cls, limit: int) -> "PidsCgroup | None":
        root = _pids_root()
        if root is None:
            return None
        parent = os.path.join(root, "clawkit-sandbox")
        _sweep(parent)
        path = os.path.join(parent, uuid.uuid4().hex[:12])
        try:
            os.makedirs(path)
            with open(os.path.join(path, "pids.max"), "w") as fh:
                fh.write(str(limit))
        except OSError:
            try:
                os.rmdir(path)
            except OSError:
                pass
            return None
        return cls(path)

    def refused(self) -> int:
        """How many forks ``pids.max`` refused."""
        try:
            with open(os.path.join(self.path, "pids.events")) as fh:
                return int(fh.read().split()[-1])
        except (OSError, ValueError, IndexError):
            return 0

    def close(self) -> None:
        """Remove the cgroup; if processes of the killed jail are still exiting, finish in a thread."""
        if not self._remove():
            threading.Thread(target=self._reap, name="clawkit-sandbox-cgroup", daemon=True).start()

    def _remove(self) -> bool:
        try:
            os.rmdir(self.path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False

    def _reap(self) -> None:
        for _ in range(200):
            try:
                with open(os.path.join(self.path, "cgroup.procs")) as fh:
                    pids = [int(p) for p in fh.read().split()]
            except OSError:
                return
            for pid in pids:  # stragglers of a killed jail: its pid namespace is going down anyway
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if self._remove():
                return
            time.sleep(0.02)


def _sweep(parent: str) -> None:
    """Remove cgroups a process that exited early left behind (empty, and not just created)."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    old = time.time() - 60
    for entry in entries:
        try:
            if entry.is_dir() and entry.stat().st_mtime < old:
                os.rmdir(entry.path)  # refused while processes are in it
        except OSError:
            pass


def pids_cgroup_available() -> bool:
    cg = PidsCgroup.create(8)
    if cg is None:
        return False
    cg.close()
    return True


# --- the jail ------------------------------------------------------------------------------


def _mount_source(path: str) -> list[str]:
    """Bind a system path, keeping a symlink (merged /usr: /bin -> usr/bin) a symlink."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    if os.path.isdir(path):
        return ["--ro-bind", path, path]
    return []


def _expand(pattern: str) -> list[str]:
    if not any(c in pattern for c in "*?["):
        return [pattern] if os.path.exists(pattern) else []
    return sorted(glob.glob(pattern))[:256]


def _visible(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def build(ctx: Any, spec: ProcessSpec, cfg: SandboxConfig, granted: dict[str, list[str]]) -> ProcessLaunch:
    """The bwrap command line (and what it confines) that runs ``spec`` in the jail."""
    cause = problem(cfg)
    if cause is not None:
        raise ProcessRefused(_fix(cause))
    bwrap = shutil.which(cfg.bwrap) or cfg.bwrap
    workspace = os.path.realpath(str(getattr(ctx, "workspace", spec.cwd)))
    hosts = list(granted.get("hosts") or [])
    network = bool(hosts) and cfg.network_grants == "all"
    proxied = bool(hosts) and cfg.network_grants == "proxy"
    args = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--uid", JAIL_UID, "--gid", JAIL_UID, "--hostname", "sandbox"]
    if not network:
        args.append("--unshare-net")
    mounts: list[dict[str, str]] = []
    system = [p for p in cfg.system_paths + cfg.extra_ro_paths if os.path.lexists(p)]
    for p in system:
        args += _mount_source(p)
        mounts.append({"path": p, "access": "ro"})
    for p in cfg.hidden_paths:
        if os.path.isdir(p) and not os.path.islink(p):
            args += ["--tmpfs", p]
        elif os.path.exists(p):
            args += ["--ro-bind", "/dev/null", p]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(cfg.tmp_size_mb << 20), "--tmpfs", "/tmp"]
    args += ["--bind", workspace, workspace]
    mounts.append({"path": workspace, "access": "rw", "why": "workspace"})
    for state in {os.path.join(workspace, ".clawkit"), _state_dir(ctx)}:
        if state and _visible(state, [workspace]) and os.path.isdir(state):
            args += ["--tmpfs", state]  # the session database and audit ledger stay out of reach
            mounts.append({"path": state, "access": "hidden", "why": "clawkit state"})
    readonly = set(granted.get("readonly") or [])
    for pattern in granted.get("paths") or []:
        for real in _expand(pattern):
            real = os.path.realpath(real)
            if _visible(real, ["/dev", "/proc", "/sys"]):
                continue
            access = "ro" if pattern in readonly else "rw"
            args += ["--ro-bind" if access == "ro" else "--bind", real, real]
            mounts.append({"path": real, "access": access, "why": "grant"})
    governing = _governing(ctx, args, mounts, workspace)
    command = list(spec.argv)
    proxy = None
    if proxied:
        python = jail_python(lambda p: _visible(p, system))
        if python is None:
            raise ProcessRefused("the grant names hosts, and per-host network needs python3 inside the jail (for its "
                                 "proxy forwarder) but none is under the system paths; add it to "
                                 "plugins.sandbox.extra_ro_paths, or set plugins.sandbox.network_grants")
        proxy = NetworkProxy(ctx, spec.tool, hosts)
        args += ["--ro-bind", proxy.dir, JAIL_DIR]
        command = [python, "-I", "-S", "-c", FORWARDER, str(PROXY_PORT), f"{JAIL_DIR}/proxy.sock", "--", *command]
    args += ["--remount-ro", "/", "--chdir", spec.cwd, "--"]
    limits = {"cpu_seconds": cfg.cpu_seconds, "memory_mb": cfg.memory_mb, "processes": cfg.processes,
              "file_size_mb": cfg.file_size_mb, "open_files": cfg.open_files, "tmp_mb": cfg.tmp_size_mb}
    cgroup = PidsCgroup.create(cfg.processes)
    ulimits = [("t", cfg.cpu_seconds), ("v", cfg.memory_mb << 10), ("f", (cfg.file_size_mb << 20) // 512),
               ("n", cfg.open_files), ("c", 0)]
    if cgroup is None:
        ulimits.append(("p", cfg.processes))
        limits["processes_by"] = "rlimit" if os.geteuid() != 0 else "none (root is exempt from RLIMIT_NPROC and no pids cgroup)"
    else:
        limits["processes_by"] = "cgroup"
    # one shell in front of bwrap joins the cgroup and sets hard+soft rlimits that every process in
    # the jail inherits and none can raise (cheaper than a prlimit exec inside the jail)
    script = ('[ -z "$1" ] || echo $$ > "$1" || exit 125; shift; '
              + " && ".join(f"ulimit -{flag} {value}" for flag, value in ulimits) + ' && exec "$@"')
    argv = ["/bin/sh", "-c", script, "sh", os.path.join(cgroup.path, "cgroup.procs") if cgroup else "",
            *args, *command]
    roots = system + [m["path"] for m in mounts if m["access"] in ("ro", "rw")] + ["/tmp"]
    env = _env(spec, roots)
    if proxy is not None:
        for name in ("NO_PROXY", "no_proxy"):
            env.pop(name, None)  # the granted hosts are reachable only through the proxy, loopback ones included
        env.update(proxy.env())
    sandbox = {"mode": "bwrap", "mounts": mounts, "limits": limits, "governing": governing,
               "network": proxy.describe() if proxy else f"host network (grant names {', '.join(hosts)})" if network
               else "none", "user": f"uid {JAIL_UID}, no capabilities, no_new_privs"}

    async def cleanup() -> None:
        if cgroup is not None:
            cgroup.close()
        if proxy is not None:
            await proxy.close()

    return ProcessLaunch(argv=argv, cwd=workspace if os.path.isdir(workspace) else "/", env=env, sandbox=sandbox,
                         note=_explainer(cfg, sandbox, network, cgroup, proxy), cleanup=cleanup)


def _governing(ctx: Any, args: list[str], mounts: list[dict[str, str]], workspace: str) -> dict[str, list[str]]:
    """Mount what governs the agent's next run read-only over the writable mounts (docs/security.md):
    its YAML, the YAML files it names, ``.agents/``, skill folders… ``protected``: paths mounted
    read-only, hidden, or not reachable from inside; ``checked_after``: paths that do not exist yet
    (a mount needs a source) — the tool compares those after the command and removes what appeared."""
    from clawkit.governing import for_context

    writable = [m["path"] for m in mounts if m["access"] == "rw"]
    hidden = [m["path"] for m in mounts if m["access"] == "hidden"]
    protected, later = [], []
    for g in sorted(for_context(ctx), key=lambda g: g.path):
        if _visible(g.path, hidden) or not _visible(g.path, writable):
            protected.append(g.path)  # hidden, or not writable inside (read-only or absent)
        elif os.path.lexists(g.path) and not os.path.islink(g.path):
            args += ["--ro-bind", g.path, g.path]
            mounts.append({"path": g.path, "access": "ro", "why": "governs the next run"})
            protected.append(g.path)
        else:
            later.append(g.path)
    return {"protected": protected, "checked_after": later}


def _state_dir(ctx: Any) -> str | None:
    db = getattr(getattr(ctx, "agent", None), "state_db", None)
    return os.path.dirname(os.path.realpath(str(db))) if db else None


def _env(spec: ProcessSpec, roots: list[str]) -> dict[str, str]:
    env = dict(spec.env)
    path = [p for p in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":") if p and _visible(p, roots)]
    env.update(PATH=":".join(path) or "/usr/bin:/bin", HOME="/tmp", TMPDIR="/tmp", PWD=spec.cwd, USER="nobody",
               LOGNAME="nobody")
    for name in ("SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)  # sockets to the outside the jail could not reach anyway
    return env


def _explainer(cfg: SandboxConfig, sandbox: dict[str, Any], network: bool, cgroup: PidsCgroup | None,
               proxy: NetworkProxy | None = None):
    granted = [m["path"] for m in sandbox["mounts"] if m.get("why") == "grant"]
    seen = "the workspace (read-write), system directories (read-only)" + (
        f", granted {', '.join(granted)}" if granted else "")
    net = ("host network (granted)" if network else f"network: {proxy.describe()}; no other route out" if proxy
           else "no network (loopback included)")

    def note(returncode: int | None, timed_out: bool) -> str | None:
        refused = _refused(proxy)
        if timed_out:
            return "sandbox: the timeout killed the jail, and with it every process inside it" + refused
        if refused and not returncode:
            return "sandbox:" + refused[1:]
        forks_refused = cgroup.refused() if cgroup is not None else 0
        if not returncode and not forks_refused:
            return None
        if forks_refused:
            return (f"sandboxed (bubblewrap): the process limit ({cfg.processes}) refused {forks_refused} fork(s); "
                    f"only {seen} exist inside; {net}")
        hit = {-24: "its CPU time limit", 152: "its CPU time limit", -25: "its file size limit",
               153: "its file size limit", -9: "a kill (a limit)", 137: "a kill (a limit)"}.get(returncode)
        why = f"the process hit {hit}; " if hit else ""
        return (f"sandboxed (bubblewrap): {why}only {seen} exist inside; {net}; no new privileges; limits: "
                f"{cfg.cpu_seconds} s CPU, {cfg.memory_mb} MiB memory, {cfg.processes} processes, "
                f"{cfg.file_size_mb} MiB per file — a failure above may be the sandbox refusing it{refused}")

    return note


def _refused(proxy: NetworkProxy | None) -> str:
    if proxy is None or not proxy.refused:
        return ""
    return (f"; the network proxy refused {', '.join(dict.fromkeys(proxy.refused))}: not granted to {proxy.tool} "
            f"(granted hosts: {', '.join(proxy.hosts)})")
