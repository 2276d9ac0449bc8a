"""web_fetch: http(s) only, size and time caps, and no way into private networks.

Every hop (the first URL and each redirect) is checked the same way: the scheme
is http or https, the URL carries no credentials, the host name is resolved, and
*every* address it resolves to must be public — not loopback, private,
link-local, shared (CGNAT), multicast, reserved or unspecified, IPv4-mapped forms
included. The connection then goes to the very address that was checked (the
``Host`` header and TLS SNI keep the original name), so a DNS answer that changes
between check and connect (rebinding) cannot slip through. A host granted to
``web_fetch`` for this turn (``ctx.state["granted"]["web_fetch"]["hosts"]``,
written by a policy plugin) is exempt: a pattern matches the host name, or
``host:port``, or — written as a CIDR like ``10.0.0.0/8`` — the resolved address.
A redirect is a new hop: a granted host redirecting to a private one is refused.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import socket
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from clawkit.tools import ToolError

from .paths import granted
from .settings import settings

_BLOCK_TAGS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre", "table", "ul", "ol", "header", "footer"}
_SKIP_TAGS = {"script", "style", "noscript", "template", "svg"}
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class FetchRefused(ToolError):
    """A URL web_fetch will not fetch (scheme, credentials, or a non-public address)."""


def is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A globally routable unicast address (IPv4-mapped/compat IPv6 judged by the IPv4 inside)."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or (ip.sixtofour if ip.sixtofour else None)
        if inner is None and ip in _NAT64:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:
            return is_public(inner)
        if ip.teredo:
            return False
    if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_multicast or ip.is_reserved or ip.is_unspecified:
        return False
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return False
    return ip.is_global


def normalise_host(host: str) -> str:
    """Lower-case, IDNA-encoded (so look-alike Unicode folds), without a trailing dot."""
    host = host.strip().rstrip(".").lower()
    try:
        return host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        raise FetchRefused(f"host name {host!r} is not a valid internationalised name") from None


def host_granted(host: str, port: int, ips: list[str], patterns: list[str]) -> bool:
    for pat in patterns:
        pat = pat.strip().lower()
        if "/" in pat:
            try:
                net = ipaddress.ip_network(pat, strict=False)
            except ValueError:
                continue
            if ips and all(ipaddress.ip_address(a) in net for a in ips):
                return True
            continue
        if fnmatch.fnmatchcase(host, pat) or fnmatch.fnmatchcase(f"{host}:{port}", pat):
            return True
    return False


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (literal IPs in any inet_aton spelling included)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ToolError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    out: list[str] = []
    for info in infos:
        addr = info[4][0].split("%", 1)[0]  # drop an IPv6 zone id
        if addr not in out:
            out.append(addr)
    if not out:
        raise ToolError(f"host {host!r} has no addresses")
    return out


async def check_url(url: str, patterns: list[str]) -> tuple[Any, str, int, str]:
    """Validate one hop; returns (split url, host, port, the address to connect to)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchRefused(f"invalid URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchRefused(f"only http and https URLs can be fetched, not {scheme or 'a relative URL'!r}")
    if parts.username is not None or parts.password is not None:
        raise FetchRefused("URLs with credentials (user:password@host) are not fetched")
    if not parts.hostname:
        raise FetchRefused(f"URL {url!r} has no host")
    host = normalise_host(parts.hostname)
    port = port or (443 if scheme == "https" else 80)
    ips = await resolve_host(host, port)
    if host_granted(host, port, ips, patterns):
        return parts, host, port, ips[0]
    bad = [a for a in ips if not is_public(ipaddress.ip_address(a))]
    if bad:
        raise FetchRefused(
            f"{host} resolves to a non-public address ({', '.join(bad)}); loopback, private and link-local "
            "addresses need a capability grant for web_fetch"
        )
    return parts, host, port, ips[0]


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in _SKIP_TAGS:
            self.skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in _BLOCK_TAGS:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS and self.skip:
            self.skip -= 1
        elif tag == "title":
            self._in_title = False
        elif tag in _BLOCK_TAGS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self.skip:
            self.out.append(data)


def html_to_text(html: str) -> str:
    """Readable text of an HTML page: scripts and styles dropped, blocks on their own lines."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.out).splitlines()]
    body = "\n".join(line for line in lines if line)
    return (f"# {parser.title.strip()}\n\n" if parser.title.strip() else "") + body


def _pinned(parts: Any, host: str, port: int, ip: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    netloc_ip = f"[{ip}]" if ":" in ip else ip
    url = urlunsplit((parts.scheme.lower(), f"{netloc_ip}:{port}", parts.path or "/", parts.query, ""))
    default = 443 if parts.scheme.lower() == "https" else 80
    headers = {"Host": host if port == default else f"{host}:{port}"}
    extensions = {"sni_hostname": host} if parts.scheme.lower() == "https" else {}
    return url, headers, extensions


async def fetch_body(ctx: Any, url: str, cap: int) -> tuple[str, int, str, bytes, str | None]:
    """GET ``url`` hop by hop (each hop checked and pinned, see the module's docstring), reading at
    most ``cap + 1`` bytes: (final URL, status, content type, body, charset). Shared by ``web_fetch``
    and URL attachments (``fetch_attachment``)."""
    import httpx  # imported on use: keeps agent start-up light

    cfg = settings(ctx)
    patterns = granted(ctx, "web_fetch", "hosts")
    current = url
    async with httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=cfg.fetch_timeout) as client:
        for _hop in range(cfg.fetch_max_redirects + 1):
            parts, host, port, ip = await check_url(current, patterns)
            target, headers, extensions = _pinned(parts, host, port, ip)
            headers["User-Agent"] = cfg.fetch_user_agent
            request = client.build_request("GET", target, headers=headers, extensions=extensions)
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise ToolError(f"fetching {current} failed: {type(exc).__name__}: {exc}") from None
            try:
                if response.is_redirect and "location" in response.headers:
                    current = urljoin(current, response.headers["location"])
                    continue
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > cap:
                        break
                return current, response.status_code, response.headers.get("content-type", ""), bytes(body), response.encoding
            finally:
                await response.aclose()
    raise ToolError(f"too many redirects (more than {cfg.fetch_max_redirects}) starting at {url}")


async def _fetch(ctx: Any, url: str, cap: int) -> str:
    current, status, ctype, body, encoding = await fetch_body(ctx, url, cap)
    cut = len(body) > cap
    text = body[:cap].decode(encoding or "utf-8", errors="replace")
    if "html" in ctype.lower():
        text = html_to_text(text)
    head = f"URL: {current}\nStatus: {status}\nContent-Type: {ctype or 'unknown'}\n\n"
    tail = f"\n[truncated at {cap} bytes]" if cut else ""
    if status >= 400:
        raise ToolError(f"HTTP {status} from {current}\n\n{text[:2000]}")
    return head + text + tail


async def fetch_attachment_bytes(ctx: Any, url: str, max_bytes: int) -> tuple[bytes, str]:
    """An attachment's bytes (at most ``max_bytes + 1``), with web_fetch's checks and timeout."""
    cfg = settings(ctx)
    try:
        current, status, ctype, body, _ = await asyncio.wait_for(fetch_body(ctx, url, max_bytes), cfg.fetch_timeout)
    except asyncio.TimeoutError:
        raise ToolError(f"fetching {url} took longer than {cfg.fetch_timeout:g} s; gave up") from None
    if status >= 400:
        raise ToolError(f"HTTP {status} from {current}")
    return body, ctype


async def web_fetch(ctx: Any, url: str, max_bytes: int | None = None) -> str:
    """Fetch an http(s) URL and return its text (HTML is converted to plain text).

    Args:
        url: the http or https URL to fetch
        max_bytes: read at most this many bytes of the body (capped by the agent's limit)
    """
    cfg = settings(ctx)
    cap = min(max_bytes or cfg.fetch_max_bytes, cfg.fetch_max_bytes)
    try:
        return await asyncio.wait_for(_fetch(ctx, url, cap), cfg.fetch_timeout)
    except asyncio.TimeoutError:
        raise ToolError(f"fetching {url} took longer than {cfg.fetch_timeout:g} s; gave up") from None
