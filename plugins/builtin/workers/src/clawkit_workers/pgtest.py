"""A throwaway PostgreSQL server for tests and benchmarks: Debian's binaries, a temporary data
directory, a free loopback port. PostgreSQL refuses to run as root, so as root the server runs
as the ``postgres`` user (or ``nobody``)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def postgres(base: str | None = None) -> Iterator[str]:
    """Yield ``postgresql://postgres@127.0.0.1:PORT/clawkit`` and stop the server afterwards."""
    bindir = pg_bin()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="clawkit-pg-", dir=base))
    data = root / "data"
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = next((u for u in ("postgres", "nobody") if _has_user(u)), None)
        pw = pwd.getpwnam(user)  # type: ignore[arg-type]
        os.chmod(root, 0o755)
        data.mkdir()
        os.chown(data, pw.pw_uid, pw.pw_gid)
        prefix = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"]
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    subprocess.run([*prefix, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"],
                   check=True, capture_output=True, env=env, cwd="/")
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
    subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(data / "log"), "-w", "start"],
                   check=True, capture_output=True, env=env, cwd="/")
    try:
        subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "clawkit"],
                       check=True, capture_output=True, env=env)
        yield f"postgresql://postgres@127.0.0.1:{port}/clawkit"
    finally:
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, env=env, cwd="/")
        shutil.rmtree(root, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
