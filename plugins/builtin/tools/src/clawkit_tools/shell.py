"""shell_exec: a command in its own process group, inside the workspace, with a
timeout, an output cap and an environment without secrets."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import signal
from typing import Any

from clawkit.process import ProcessLaunch, ProcessSpec, confine
from clawkit.tools import ToolError, tool

from .paths import resolve
from .settings import settings

#: Environment variable names that usually hold credentials (matched case-insensitively).
SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|PRIVATE|SIGNATURE|"
    r"DSN|DATABASE_URL|CONN(ECTION)?_STR)",
    re.IGNORECASE,
)
_KEEP_ALWAYS = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER", "SHELL", "TMPDIR", "PWD"})


def is_secret_name(name: str) -> bool:
    """Does an environment variable's name suggest it holds a secret?"""
    return name not in _KEEP_ALWAYS and SECRET_NAME.search(name) is not None


def scrubbed_env(environ: dict[str, str] | None = None, deny: list[str] = (), allow: list[str] = ()) -> dict[str, str]:
    """A copy of the environment without variables named like secrets (``deny`` adds globs, ``allow`` keeps names)."""
    env = dict(os.environ if environ is None else environ)
    out = {}
    for name, value in env.items():
        if any(fnmatch.fnmatchcase(name, p) for p in allow):
            out[name] = value
        elif is_secret_name(name) or any(fnmatch.fnmatchcase(name, p) for p in deny):
            continue
        else:
            out[name] = value
    return out


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


@tool(risk="unsafe")
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
    env = scrubbed_env(deny=cfg.env_deny, allow=cfg.env_allow)
    env["PWD"] = str(workdir)
    argv = list(command) if isinstance(command, list) else [cfg.shell, "-c", command]
    # a sandbox plugin (confine_process) may jail it; it refuses rather than run it unconfined
    launch = await confine(ctx, ProcessSpec("shell_exec", argv, str(workdir), env, limit, cfg.shell_output_bytes))
    try:
        return await _run(launch, cfg, limit)
    finally:
        await launch.close()


async def _run(launch: ProcessLaunch, cfg: Any, limit: float) -> str:
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv, cwd=launch.cwd, env=launch.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
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
