"""A real PostgreSQL server for tests: Debian's binaries, a temporary data directory, a free loopback port.

``PostgresServer().start()`` runs ``initdb`` and ``pg_ctl`` from ``/usr/lib/postgresql/<version>/bin``
(or ``CLAWKIT_PG_BIN``, or ``pg_ctl`` on ``PATH``); ``url`` is then
``postgresql://clawkit@127.0.0.1:PORT/clawkit`` (trust authentication on loopback only) and
:meth:`PostgresServer.create_database` makes a fresh, empty database for one test. ``stop()`` stops
the server and removes the directory.

PostgreSQL refuses to run as root: when the test process is root, the server runs as ``nobody``
(the data directory is handed to that user). The unix socket lives in the temporary directory, so
nothing is written to ``/var/run/postgresql``. The settings trade durability for speed (``fsync=off``):
this is a test server, never a place for data.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

USER = "clawkit"
DATABASE = "clawkit"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL's server binaries are not installed (Debian: ``apt-get install postgresql``)."""


def find_bin() -> Path:
    """The folder holding ``initdb``/``pg_ctl``/``postgres`` (the newest installed version)."""
    env = os.environ.get("CLAWKIT_PG_BIN")
    if env:
        if not (Path(env) / "initdb").is_file():
            raise PostgresUnavailable(f"CLAWKIT_PG_BIN={env} has no initdb")
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    raise PostgresUnavailable("PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/pg_ctl, "
                              "no pg_ctl on PATH, CLAWKIT_PG_BIN unset): apt-get install postgresql")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user() -> dict:
    """subprocess arguments that drop root to ``nobody`` (PostgreSQL will not run as root)."""
    if os.geteuid() != 0:
        return {}
    import grp
    import pwd

    user = pwd.getpwnam("nobody")
    try:
        group = grp.getgrnam("nogroup").gr_gid
    except KeyError:
        group = user.pw_gid
    return {"user": user.pw_uid, "group": group, "extra_groups": []}


class PostgresURL(str):
    """A database URL that remembers its server (``.server``), as the ``postgres_server`` fixture yields it."""

    server: "PostgresServer"

    def __new__(cls, url: str, server: "PostgresServer") -> "PostgresURL":
        self = super().__new__(cls, url)
        self.server = server
        return self


class PostgresServer:
    """One throwaway PostgreSQL cluster; see the module's docstring."""

    def __init__(self, *, bin_dir: Path | None = None, max_connections: int = 300):
        self.bin = bin_dir or find_bin()
        self.max_connections = max_connections
        self.root: Path | None = None
        self.port = 0
        self.started = False

    @property
    def url(self) -> str:
        return self.url_for(DATABASE)

    def url_for(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, drop: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {**os.environ, "LC_ALL": "C", "PGTZ": "UTC", "HOME": str(self.root)}
        env.pop("PGDATA", None)
        proc = subprocess.run(list(args), cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout,
                              **(_as_server_user() if drop else {}))
        if proc.returncode != 0:
            log = ""
            if self.root and (self.root / "server.log").exists():
                log = (self.root / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{Path(args[0]).name} failed (exit {proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}\n{log}")
        return proc

    def start(self) -> "PostgresServer":
        # mkdtemp is 0700 and root's: the server user must own it to create its data and socket there
        drop = _as_server_user()
        # under root the server user must reach the folder: /tmp, not a TMPDIR inside root's home
        self.root = Path(tempfile.mkdtemp(prefix="clawkit-pg-", dir="/tmp" if drop and os.path.isdir("/tmp") else None))
        if drop:
            os.chown(self.root, drop["user"], drop["group"])
        data = self.root / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8",
                  "--locale=C", "--no-sync")
        last: Exception | None = None
        for _ in range(5):  # the free port can be taken between the probe and the bind: try another
            self.port = free_port()
            opts = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
                    f" -c synchronous_commit=off -c full_page_writes=off -c max_connections={self.max_connections}")
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.root / "server.log"),
                          "-o", opts, "-w", "-t", "60", "start")
            except RuntimeError as exc:
                last = exc
                continue
            self.started = True
            break
        else:
            self.stop()
            raise RuntimeError(f"PostgreSQL did not start: {last}")
        self.create_database(DATABASE)
        return self

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (a fresh name unless given) and return its URL."""
        name = name or "t_" + uuid.uuid4().hex[:12]
        self._run(str(self.bin / "createdb"), "-h", str(self.root), "-p", str(self.port), "-U", USER, name)
        return self.url_for(name)

    def stop(self) -> None:
        if self.root is None:
            return
        try:
            if self.started:
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop",
                          timeout=60)
        finally:
            self.started = False
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
