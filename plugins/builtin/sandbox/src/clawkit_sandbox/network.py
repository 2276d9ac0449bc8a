"""Per-host network for a jailed process: only the granted hosts, through a proxy on the host.

The jail keeps its own network namespace (nothing but its loopback). The host side runs a
small HTTP proxy for the one execution — ``CONNECT host:port`` tunnels and absolute-URI
``GET http://host:port/…`` requests — listening on a unix socket in a private directory that
is bind-mounted into the jail. Inside, a forwarder (:data:`FORWARDER`, the jail's first
process) listens on ``127.0.0.1:PROXY_PORT``, relays each connection to that socket, and
runs the command with ``HTTP(S)_PROXY``/``ALL_PROXY`` pointing at it. Every host:port the
command asks for is checked against the hosts of the policy's capability grant for the tool
(``ctx.state["granted"][tool]["hosts"]``: host globs, ``host:port``, CIDR networks, as the
policy writes them) and recorded as a ``tool.network`` event (the policy's audit ledger keeps
it); only allowed ones are connected. A program that ignores the proxy variables (``nc``, raw
sockets) reaches nothing: there is no route out of the namespace.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import os
import shutil
import socket
import tempfile
from typing import Any

PROXY_PORT = 3128
JAIL_DIR = "/run/clawkit-net"
HEAD_LIMIT = 64 << 10
CONNECT_TIMEOUT = 10.0

# The jail's first process: bind the listener *before* the command starts (no race), fork the
# command, relay connections to the host's unix socket until it exits, exit as it did. Standard
# library only, run by the system python3 with -I -S; threads with small stacks (RLIMIT_AS).
FORWARDER = r"""
import os, signal, socket, sys, threading
port, path, argv = int(sys.argv[1]), sys.argv[2], sys.argv[4:]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(64)
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"{argv[0]}: {exc.strerror}\n")
        os._exit(127)
threading.stack_size(256 << 10)
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(c):
    u = socket.socket(socket.AF_UNIX)
    try:
        u.connect(path)
    except OSError:
        c.close()
        return
    t = threading.Thread(target=pipe, args=(u, c), daemon=True)
    t.start()
    pipe(c, u)
    t.join()
    c.close()
    u.close()
def accept():
    while True:
        try:
            c, _ = srv.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
        except (OSError, RuntimeError):
            pass
threading.Thread(target=accept, daemon=True).start()
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        pass
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
os._exit(os.waitstatus_to_exitcode(status))
"""


def jail_python(visible: Any) -> str | None:
    """A python3 the jail can run (the forwarder's interpreter), or None."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if os.path.exists(candidate) and visible(os.path.realpath(candidate)):
            return candidate
    return None


def host_allowed(host: str, port: int, patterns: list[str]) -> bool:
    """The policy's grant grammar: host glob, ``host:port`` glob, or a CIDR network (literal IPs)."""
    host = host.rstrip(".").lower()
    for pattern in patterns:
        pattern = pattern.strip().lower()
        if "/" in pattern:
            try:
                if ipaddress.ip_address(host) in ipaddress.ip_network(pattern, strict=False):
                    return True
            except ValueError:
                pass
        elif fnmatch.fnmatchcase(host, pattern) or fnmatch.fnmatchcase(f"{host}:{port}", pattern):
            return True
    return False


def _target(method: str, target: str) -> tuple[str, int, str] | None:
    """(host, port, origin-form path) of a proxy request line's target; None if malformed."""
    if method == "CONNECT":
        authority, path, default = target, "", 443
    else:
        scheme, sep, rest = target.partition("://")
        if not sep or scheme.lower() != "http":
            return None
        authority, slash, tail = rest.partition("/")
        path, default = slash + tail or "/", 80
    authority = authority.rsplit("@", 1)[-1]
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = authority.partition(":")
    try:
        port = int(port_text) if port_text else default
    except ValueError:
        return None
    return (host, port, path) if host and 0 < port < 65536 else None


class NetworkProxy:
    """The host side for one execution: a unix-socket HTTP proxy admitting only granted hosts."""

    def __init__(self, ctx: Any, tool: str, hosts: list[str]) -> None:
        self.ctx, self.tool, self.hosts = ctx, tool, list(hosts)
        self.dir = tempfile.mkdtemp(prefix="clawkit-net-")
        self.path = os.path.join(self.dir, "proxy.sock")
        self.refused: list[str] = []
        self.allowed: list[str] = []
        self._tasks: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(self.path)  # listening before the jail starts: its first connection waits in the backlog
        sock.listen(64)
        self._sock = sock
        loop = asyncio.get_running_loop()
        self._server = loop.create_task(asyncio.start_unix_server(self._client, sock=sock, limit=HEAD_LIMIT))

    def env(self) -> dict[str, str]:
        url = f"http://127.0.0.1:{PROXY_PORT}"
        return {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                                       "all_proxy")}

    def describe(self) -> str:
        return f"only {', '.join(self.hosts)} through the sandbox's policy-checked proxy (HTTP_PROXY)"

    async def close(self) -> None:
        if not self._server.done():
            try:
                await asyncio.wait_for(self._server, 1.0)
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - the socket is closed below anyway
                pass
        if self._server.done() and not self._server.cancelled() and self._server.exception() is None:
            self._server.result().close()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=1.0)
        self._sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _decide(self, host: str, port: int) -> tuple[bool, str]:
        where = f"{host}:{port}"
        if host_allowed(host, port, self.hosts):
            return True, f"{where} is granted to {self.tool}"
        return False, f"{where} is not granted to {self.tool} (granted hosts: {', '.join(self.hosts)})"

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ValueError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30.0)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        target = _target(parts[0].upper(), parts[1]) if len(parts) == 3 else None
        if target is None:
            await _reply(writer, 400, "Bad Request", "clawkit sandbox proxy: expected CONNECT host:port or an "
                         "absolute http:// URL")
            return
        host, port, path = target
        ok, reason = self._decide(host, port)
        address = None
        if ok:
            try:
                address, why = await asyncio.wait_for(self._resolve(host, port), CONNECT_TIMEOUT)
            except (OSError, asyncio.TimeoutError) as exc:
                address, why = None, f"{host} could not be resolved: {getattr(exc, 'strerror', None) or 'timed out'}"
            if address is None:  # a granted name that does not resolve, or resolves where the grant does not reach
                ok, reason = False, why
        self._audit(host, port, ok, reason)
        if not ok:
            self.refused.append(f"{host}:{port}")
            await _reply(writer, 403, "Forbidden", f"clawkit sandbox: refused: {reason}")
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(address, port), CONNECT_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as exc:
            await _reply(writer, 502, "Bad Gateway", f"clawkit sandbox: {host}:{port} is granted but could not be "
                         f"reached: {exc.strerror if isinstance(exc, OSError) else 'timed out'}")
            return
        self._writers.add(up_writer)
        try:
            if parts[0].upper() == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:  # origin-form request line, hop-by-hop proxy headers dropped, one request per connection
                kept = [ln for ln in lines[1:] if ln and not ln.lower().startswith(("proxy-", "connection:"))]
                up_writer.write(("\r\n".join([f"{parts[0]} {path} {parts[2]}", *kept, "Connection: close"])
                                 + "\r\n\r\n").encode("latin-1"))
            await asyncio.gather(_relay(reader, up_writer), _relay(up_reader, writer))
        finally:
            self._writers.discard(up_writer)
            up_writer.close()

    async def _resolve(self, host: str, port: int) -> tuple[str | None, str]:
        """The address to connect to — resolved once, here, so the check and the connection agree. A
        name granted by pattern that resolves to a non-public address (DNS pointing a public-looking
        name at the host's loopback or the LAN) is refused unless that address is granted too or
        the name is a loopback name (``localhost``)."""
        try:
            return str(ipaddress.ip_address(host)), ""
        except ValueError:
            pass
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        local_name = host.rstrip(".").lower() == "localhost" or host.rstrip(".").lower().endswith(".localhost")
        for *_, sockaddr in infos:
            ip = ipaddress.ip_address(sockaddr[0])
            if ip.is_global or (local_name and ip.is_loopback) or host_allowed(str(ip), port, self.hosts):
                return str(ip), ""
        found = ", ".join(dict.fromkeys(str(i[4][0]) for i in infos))
        return None, f"{host} resolves to {found}, a non-public address the grant does not name"

    def _audit(self, host: str, port: int, ok: bool, reason: str) -> None:
        (self.allowed if ok else []).append(f"{host}:{port}")
        emit = getattr(self.ctx, "emit", None)
        if emit is not None:  # a ``tool.*`` event: the policy writes it to the audit ledger
            emit("tool.network", call_id=getattr(self.ctx, "step_id", None), tool=self.tool, host=host, port=port,
                 decision="allowed" if ok else "refused", reason=reason)


async def _reply(writer: asyncio.StreamWriter, status: int, phrase: str, body: str) -> None:
    data = (body + "\n").encode("utf-8")
    writer.write(f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
                 f"{len(data)}\r\nConnection: close\r\n\r\n".encode("latin-1") + data)
    await writer.drain()


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        pass
