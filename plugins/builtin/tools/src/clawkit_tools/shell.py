"""shell_exec: a command in its own process group, inside the workspace, with a
timeout, an output cap and an environment without secrets."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import shutil
import signal
from typing import Any

from clawkit.governing import consented
from clawkit.process import ProcessLaunch, ProcessSpec, confine
from clawkit.tools import ToolError, tool

from .paths import STATE_DIR, PathRefused, is_within, protected, refuse_protected, resolve
from .settings import settings

#: Environment variable names that usually hold credentials (matched case-insensitively).
SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|PRIVATE|SIGNATURE|"
    r"DSN|DATABASE_URL|CONN(ECTION)?_?STR|WEBHOOK|_PASS$|_PWD$|_PW$|^PASS$)",
    re.IGNORECASE,
)
#: values that are secrets whatever the variable's name: URLs with a password (an empty user too:
#: ``redis://:pw@host``), webhook URLs
SECRET_VALUE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:[^\s@/]+@|hooks\.slack\.com/|discord(?:app)?\.com/api/webhooks/"
    r"|\.webhook\.office\.com/|outlook\.office\.com/webhook/|/webhooks?/[A-Za-z0-9_\-/]{16,}"
)
_KEEP_ALWAYS = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER", "SHELL", "TMPDIR", "PWD"})


def is_secret_name(name: str) -> bool:
    """Does an environment variable's name suggest it holds a secret?"""
    from clawkit.secrets import is_secret_name as by_name

    return name not in _KEEP_ALWAYS and (SECRET_NAME.search(name) is not None or by_name(name))


def scrubbed_env(environ: dict[str, str] | None = None, deny: list[str] = (), allow: list[str] = ()) -> dict[str, str]:
    """A copy of the environment without secrets (``deny`` adds globs, ``allow`` keeps names): a
    variable named like one (``*KEY*``, ``*PAT``, ``*CREDS``, ``*PWD*``…), a value of a known
    credential format or a high-entropy token whatever its name, and the agent's own model key
    (:mod:`clawkit.secrets`)."""
    from clawkit.secrets import is_secret, registered

    env = dict(os.environ if environ is None else environ)
    own = registered()
    out = {}
    for name, value in env.items():
        if any(fnmatch.fnmatchcase(name, p) for p in allow):
            out[name] = value
        elif (is_secret_name(name) or SECRET_VALUE.search(value) or is_secret(name, value)
              or any(fnmatch.fnmatchcase(name, p) for p in deny) or any(k in value for k in own)):
            continue
        else:
            out[name] = value
    return out


def refuse_protected_command(command: str | list[str], workdir: str, ctx: Any) -> None:
    """Refuse a command that names the agent's state directory, session database, own config or
    the user's clawkit config — literally or with a wildcard (``.c*``) that matches the state
    directory. Best effort: a command can build a name at run time; the audit ledger's key and
    anchor, kept outside the workspace, make what such a command does detectable."""
    import shlex

    text = command if isinstance(command, str) else shlex.join(command)
    workspace = os.path.realpath(str(ctx.workspace))
    for root, what in protected(ctx):
        names = {root}
        for base in (workspace, workdir):
            if is_within(root, base) and root != base:
                names.add(os.path.relpath(root, base))
        home = os.path.expanduser("~")
        if is_within(root, home) and root != home:
            names.add("~/" + os.path.relpath(root, home))
        if os.path.basename(root) == STATE_DIR or os.path.dirname(root) in (workspace, workdir):
            names.add(os.path.basename(root))
        if any(n and n in text for n in names):
            raise PathRefused(f"the command names {what} ({root}); shell_exec never touches it")
    try:
        words = shlex.split(text, comments=False, posix=True)
    except ValueError:
        words = text.split()
    for word in words:
        for part in word.replace("=", "/").split("/"):
            if part.startswith(".") and any(c in part for c in "*?[") and fnmatch.fnmatchcase(STATE_DIR, part):
                raise PathRefused(f"the pattern {part!r} in the command matches the agent's state directory ({STATE_DIR}); "
                                  "shell_exec never touches it")


#: a process's environment (or memory) read through /proc: ``/proc/<pid>/environ``, ``/proc/$PPID/…``
_PROC_READ = re.compile(r"/proc/[^\s]*?(environ|mem\b|cmdline)|/proc/+\$|/proc/+[*?\[]|/proc/+\d+|/proc/\S*\$\(")


def _ancestors() -> list[int]:
    """This process and its ancestors (their /proc entries hold the agent's environment)."""
    out, pid = [], os.getpid()
    while pid > 1 and len(out) < 64:
        out.append(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def refuse_proc_environ(command: str | list[str]) -> None:
    """Refuse a command that names another process's environment or memory under /proc (the agent's
    own — its model key — or an ancestor's). Best effort beside :func:`hide_own_environ`, which makes
    the agent's own entry unreadable whatever the command spells; the sandbox hides them all."""
    import shlex

    text = command if isinstance(command, str) else shlex.join(command)
    if "/proc" not in text:
        return
    m = _PROC_READ.search(text)
    if m is not None and not re.match(r"/proc/+(self|thread-self)/", m.group(0)):
        pids = {str(p) for p in _ancestors()}
        number = re.match(r"/proc/+(\d+)", m.group(0))
        if number is None or number.group(1) in pids or m.group(1):
            raise PathRefused("the command reads a process's environment or memory under /proc (the agent's "
                              "holds its model key); shell_exec refuses it")


_hidden: list[bool] = []


def hide_own_environ() -> None:
    """Make this process non-dumpable (Linux): its /proc/<pid>/environ and memory are then unreadable
    by the commands it runs (same user, no CAP_SYS_PTRACE), so they cannot read the model key the
    agent holds. Children are unaffected (exec resets it). Debuggers need root to attach afterwards."""
    if _hidden or not os.path.exists("/proc/self"):
        return
    _hidden.append(True)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:  # pragma: no cover - not Linux or no libc: the command check still applies
        pass


#: the command runs under a small supervising shell that owns its process group: when the agent dies
#: in any way (SIGTERM, SIGKILL, a crash) the kernel sends that shell SIGTERM (parent-death signal)
#: and it kills the whole group — background children included
_SUPERVISE = 'trap "kill -KILL 0" TERM HUP; "$@" & wait $!'


def _supervised(argv: list[str]) -> tuple[list[str], Any]:
    """``argv`` wrapped so it dies with the agent; ``(argv, preexec_fn or None)``."""
    import shutil
    import sys

    wrapped = ["/bin/sh", "-c", _SUPERVISE, "clawkit-shell", *argv]
    if not sys.platform.startswith("linux"):
        return argv, None  # pragma: no cover - the process group is still killed on every normal exit path
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--pdeathsig", "TERM", *wrapped], None
    return wrapped, _pdeathsig  # pragma: no cover - util-linux is on every Linux we support


def _pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _kill_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _collect(stream: asyncio.StreamReader, cap: int, sink: dict[str, Any]) -> None:
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return
        room = cap - len(sink["data"])
        if room > 0:
            sink["data"] += chunk[:room]
        sink["dropped"] += max(0, len(chunk) - max(room, 0))


@tool(risk="unsafe", confined=True)
async def shell_exec(ctx: Any, command: str | list[str], cwd: str = ".", timeout: float | None = None) -> str:
    """Run a command in the workspace and return its exit code and output (stdout and stderr together).

    Args:
        command: a shell command line (run with /bin/sh -c), or a list of arguments run without a shell
        cwd: working directory, relative to the workspace
        timeout: seconds before the command's whole process group is killed
    """
    cfg = settings(ctx)
    if isinstance(command, list):
        if not command or not all(isinstance(a, str) for a in command):
            raise ToolError("command must be a non-empty list of strings or a string")
    elif not command.strip():
        raise ToolError("command is empty")
    limit = min(float(timeout or cfg.shell_timeout), cfg.shell_max_timeout)
    workdir = resolve(cwd, ctx, "shell_exec", want="dir")
    if not workdir.is_dir():
        raise ToolError(f"working directory {cwd!r} does not exist")
    refuse_protected(workdir, cwd, ctx)
    refuse_protected_command(command, str(workdir), ctx)
    refuse_proc_environ(command)
    hide_own_environ()
    env = scrubbed_env(deny=cfg.env_deny, allow=cfg.env_allow)
    env["PWD"] = str(workdir)
    key = getattr(ctx, "idempotency_key", None)
    if key:  # a durable turn (clawkit worker): the same key if this step runs again after a crash
        env["CLAWKIT_IDEMPOTENCY_KEY"] = key
    argv = list(command) if isinstance(command, list) else [cfg.shell, "-c", command]
    if isinstance(command, list) and not shutil.which(argv[0], path=env.get("PATH")) and not os.path.exists(os.path.join(str(workdir), argv[0])):
        raise ToolError(f"command not found: {argv[0]!r}")
    # a sandbox plugin (confine_process) may jail it; it refuses rather than run it unconfined
    launch = await confine(ctx, ProcessSpec("shell_exec", argv, str(workdir), env, limit, cfg.shell_output_bytes))
    # what governs the next run and the jail does not keep read-only: checked after the command, restored
    try:
        guard = _guard(ctx, launch)
    except Exception as exc:  # fail closed: a command whose effects cannot be checked does not run
        await launch.close()
        raise ToolError(f"not run: what governs the agent's next run could not be snapshotted ({exc})") from None
    failure: ToolError | None = None
    output = ""
    try:
        output = await _run(launch, cfg, limit)
    except ToolError as exc:
        failure = exc
    finally:
        await launch.close()
        restored = guard.restore(keep=consented(ctx)) if guard is not None else []  # approved skill writes stay
    if restored:
        shown = "\n".join(f"  {line}" for line in restored)
        raise ToolError("the command changed what governs the agent's next run, which no command of the agent may "
                        f"change; clawkit undid it:\n{shown}\nThe command's own result was:\n"
                        f"{str(failure) if failure else output}")
    if failure is not None:
        raise failure
    return output


def _guard(ctx: Any, launch: ProcessLaunch) -> Any:
    from clawkit.snapshot import Snapshot, unguarded

    from .paths import governing

    paths = unguarded(governing(ctx), launch)
    return Snapshot.take(paths) if paths else None


async def _run(launch: ProcessLaunch, cfg: Any, limit: float) -> str:
    run, preexec = _supervised(list(launch.argv))  # dies with the agent, whatever launched it
    try:
        proc = await asyncio.create_subprocess_exec(
            *run, cwd=launch.cwd, env=launch.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            preexec_fn=preexec,
        )
    except FileNotFoundError:
        raise ToolError(f"command not found: {launch.argv[0]!r}") from None
    except PermissionError:
        raise ToolError(f"permission denied running {launch.argv[0]!r}") from None
    sink: dict[str, Any] = {"data": b"", "dropped": 0}
    reader = asyncio.ensure_future(_collect(proc.stdout, cfg.shell_output_bytes, sink))
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), limit)
    except asyncio.TimeoutError:
        timed_out = True
        _kill_group(proc, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), cfg.kill_grace)
        except asyncio.TimeoutError:
            pass
    except BaseException:  # cancelled: leave nothing running
        _kill_group(proc, signal.SIGKILL)
        raise
    finally:
        # the whole group, not just the shell: background children (sleep 100 &) die too,
        # and nothing keeps the output pipe open
        _kill_group(proc, signal.SIGKILL)
    await proc.wait()
    try:
        await asyncio.wait_for(reader, 2.0)
    except asyncio.TimeoutError:
        reader.cancel()
    output = sink["data"].decode("utf-8", errors="replace")
    if sink["dropped"]:
        output += f"\n[output truncated: {sink['dropped']} more bytes not shown]"
    note = launch.explain(proc.returncode, timed_out)
    if note:
        output += f"\n[{note}]"
    if timed_out:
        raise ToolError(f"timed out after {limit:g} s; the process group was killed. Output so far:\n{output}")
    return f"exit code {proc.returncode}\n{output}"
