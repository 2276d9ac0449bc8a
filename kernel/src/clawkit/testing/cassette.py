"""Cassettes: record a session's model traffic over HTTP once, replay it offline.

Recording is a loopback proxy in front of the real endpoint, so it works for any provider
and any client library (litellm, a native httpx provider, the OpenAI SDK): point the
model's ``api_base`` at :attr:`CassetteServer.url`. Replaying is a loopback server that
answers from the file and never forwards anything.

Requests are matched by a canonical hash of what decides the answer — the model, the
messages (or Anthropic's ``system``), the tools — with volatile parts normalised away:
tool-call ids become ``call_1``, ``call_2``… in order of appearance; ISO timestamps,
dates, UUIDs and hex runs of 8+ characters (nonces, ids) become placeholders. A request
with no match is answered 400 and recorded in :attr:`CassetteServer.mismatches` with a
unified diff against the nearest recorded request; the pytest fixture fails the test
with it. Only request bodies and response bodies are written, never headers, and any
credential seen in a request header is scrubbed from both before saving.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

VERSION = 1
MATCH_FIELDS = ("model", "system", "messages", "tools")
SECRET_HEADERS = ("authorization", "x-api-key", "api-key", "proxy-authorization", "x-goog-api-key", "cookie")
_VOLATILE = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<date>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}\b"), "<time>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{8,}\b"), "<hex>"),
]
_ID_KEYS = ("id", "tool_call_id", "tool_use_id")
_KEY_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_-]{6,}|sk-ant-[A-Za-z0-9_-]{6,}|Bearer\s+[A-Za-z0-9._~+/=-]{6,})")


class CassetteError(AssertionError):
    """A replay request that matches nothing recorded, a missing cassette, or a forbidden connection."""


def _scrub_text(text: str) -> str:
    for pattern, placeholder in _VOLATILE:
        text = pattern.sub(placeholder, text)
    return text


def pin(text: str, pins: dict[str, str] | None) -> str:
    """``text`` with each pinned value (the workspace's path, the host's OS line…) replaced by its
    placeholder, longest first: what varies with where a run happens, not with what it asks."""
    for value in sorted(pins or {}, key=len, reverse=True):
        if value:
            text = text.replace(value, pins[value])  # type: ignore[index]
    return text


def unpin(text: str, pins: dict[str, str] | None) -> str:
    """The inverse of :func:`pin` for this run's values (a recorded tool result replayed elsewhere)."""
    for value, placeholder in (pins or {}).items():
        if value:
            text = text.replace(placeholder, value)
    return text


def canonical(body: Any, pins: dict[str, str] | None = None) -> dict[str, Any]:
    """The parts of a request body that decide the answer, with volatile values normalised
    (and ``pins``: this run's place-dependent values, see :func:`pin`)."""
    if not isinstance(body, dict):
        return {"body": body}
    ids: dict[str, str] = {}

    def walk(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str):
            if key in _ID_KEYS:
                return ids.setdefault(value, f"call_{len(ids) + 1}")
            return _scrub_text(pin(value, pins))
        return value

    return {k: walk(body[k], k if k != "messages" else None) for k in MATCH_FIELDS if k in body}


def request_key(body: Any, pins: dict[str, str] | None = None) -> str:
    text = json.dumps(canonical(body, pins), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _pretty(body: Any, pins: dict[str, str] | None = None) -> list[str]:
    return json.dumps(canonical(body, pins), sort_keys=True, ensure_ascii=False, indent=1).splitlines()


def diff_against_nearest(body: Any, entries: list[dict[str, Any]], limit: int = 60, pins: dict[str, str] | None = None) -> str:
    """A unified diff between ``body`` and the most similar recorded request (canonical forms)."""
    if not entries:
        return "the cassette holds no requests"
    mine = _pretty(body, pins)
    best = max(range(len(entries)), key=lambda i: difflib.SequenceMatcher(None, _pretty(entries[i]["request"]), mine).ratio())
    lines = list(difflib.unified_diff(_pretty(entries[best]["request"]), mine, f"recorded request #{best + 1}", "this request", lineterm="", n=2))
    if len(lines) > limit:
        lines = lines[:limit] + [f"… ({len(lines) - limit} more diff lines)"]
    return "\n".join(lines)


class Cassette:
    """The file: a list of request/response pairs, JSON (default) or YAML by extension."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.entries: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] | None = []  # tool results a CLI recording kept (clawkit.testing.replay)
        self.base_path = "/v1"  # the upstream URL's path, which the provider's requests start with

    @property
    def yaml(self) -> bool:
        return self.path.suffix in (".yaml", ".yml")

    def load(self) -> "Cassette":
        if not self.path.is_file():
            raise CassetteError(f"no cassette at {self.path}: record it first (pytest --record-cassettes, or CLAWKIT_RECORD=1)")
        text = self.path.read_text(encoding="utf-8")
        if self.yaml:
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
            raise CassetteError(f"{self.path}: not a clawkit cassette (expected a mapping with 'interactions')")
        self.entries = data["interactions"]
        # None: a cassette from before tool results were kept (or the fixture's): its tools run for real
        self.tools = list(data["tool_results"] or []) if "tool_results" in data else None
        self.base_path = str(data.get("base_path", "/v1"))
        return self

    def save(self, secrets: set[str] = frozenset()) -> None:
        data = {"clawkit_cassette": VERSION, "base_path": self.base_path, "interactions": self.entries}
        if self.tools:
            data["tool_results"] = self.tools
        if self.yaml:
            import yaml

            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)
        else:
            text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        for secret in sorted(secrets, key=len, reverse=True):
            if len(secret) >= 6:
                text = text.replace(secret, "<redacted>")
        text = _KEY_LIKE.sub("<redacted>", text)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(text, encoding="utf-8")


class CassetteServer:
    """A loopback server that records (forwarding to ``upstream``) or replays a cassette.

    ``url`` stands in for the upstream base URL: with upstream ``https://host/v1`` the agent
    uses ``http://127.0.0.1:PORT/v1``. Use as a context manager; recording saves on exit.
    """

    def __init__(self, path: str | Path, *, record: bool = False, upstream: str | None = None,
                 pins: dict[str, str] | None = None):
        self.cassette = Cassette(path)
        self.pins = dict(pins or {})  # place-dependent values normalised in both directions (see pin)
        self.record = record
        if record and not upstream:
            raise CassetteError("recording needs the real endpoint (upstream=…, or the model's api_base)")
        self.upstream = (upstream or "").rstrip("/")
        if record:
            from urllib.parse import urlsplit

            self.cassette.base_path = urlsplit(self.upstream).path.rstrip("/")
        self.mismatches: list[str] = []
        self.secrets: set[str] = set()
        self._used: set[int] = set()
        self._lock = threading.Lock()
        if not record:
            self.cassette.load()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.cassette_server = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def url(self) -> str:
        """The base URL to give the provider: the upstream's path on this server."""
        return self.base_url + self.cassette.base_path

    def start(self) -> "CassetteServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                                        name="clawkit-cassette")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self.record:
            self.cassette.save(self.secrets)

    def __enter__(self) -> "CassetteServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check(self) -> None:
        """Raise :class:`CassetteError` if any replayed request matched nothing."""
        if self.mismatches:
            raise CassetteError(self.mismatches[0])

    # --- called by the handler ----------------------------------------------------------

    def replay(self, body: Any) -> dict[str, Any] | None:
        key = request_key(body, self.pins)
        with self._lock:
            candidates = [i for i, e in enumerate(self.cassette.entries) if e.get("key") == key]
            fresh = [i for i in candidates if i not in self._used]
            if not candidates:
                message = (f"cassette {self.cassette.path}: no recorded request matches this one (key {key}); "
                           f"diff against the nearest:\n{diff_against_nearest(body, self.cassette.entries, pins=self.pins)}")
                self.mismatches.append(message)
                return None
            index = fresh[0] if fresh else candidates[-1]
            self._used.add(index)
            response = self.cassette.entries[index]["response"]
            return json.loads(unpin(json.dumps(response), self.pins)) if self.pins else response

    def add(self, body: Any, response: dict[str, Any]) -> None:
        with self._lock:
            if self.pins:  # a path the model wrote back (a tool call's argument) is this place's: pinned too
                response = json.loads(pin(json.dumps(response), self.pins))
            self.cassette.entries.append({"key": request_key(body, self.pins), "request": canonical(body, self.pins),
                                          "response": response})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        owner: CassetteServer = self.server.cassette_server
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        if owner.record:
            for name in SECRET_HEADERS:
                value = self.headers.get(name)
                if value:
                    owner.secrets.add(value)
                    owner.secrets.add(value.split(" ", 1)[-1])
            self._forward(owner, raw, body)
            return
        response = owner.replay(body)
        if response is None:
            self._send(400, "application/json", json.dumps({"error": {"message": owner.mismatches[-1], "type": "cassette_mismatch"}}))
            return
        self._send(response["status"], response.get("content_type", "application/json"), _body_text(response))

    def _forward(self, owner: CassetteServer, raw: bytes, body: Any) -> None:
        from urllib.parse import urlsplit

        target = owner.upstream[: len(owner.upstream) - len(urlsplit(owner.upstream).path)] + self.path
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "accept-encoding", "connection")}
        req = urllib.request.Request(target, data=raw, headers=headers, method="POST")
        try:
            resp = urllib.request.urlopen(req, timeout=600)
        except urllib.error.HTTPError as err:
            resp = err
        except OSError as exc:
            self._send(502, "application/json", json.dumps({"error": {"message": f"cassette proxy: {exc}", "type": "proxy_error"}}))
            return
        status = resp.status if hasattr(resp, "status") else resp.code
        ctype = resp.headers.get("Content-Type", "application/json")
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunks = []
        while True:
            piece = resp.read1(65536) if hasattr(resp, "read1") else resp.read()
            if not piece:
                break
            chunks.append(piece)
            self.wfile.write(b"%X\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        text = b"".join(chunks).decode("utf-8", "replace")
        response: dict[str, Any] = {"status": status, "content_type": ctype.split(";")[0]}
        if "event-stream" in ctype:
            response["events"] = [e for e in text.split("\n\n") if e.strip()]
        else:
            try:
                response["json"] = json.loads(text)
            except ValueError:
                response["text"] = text
        owner.add(body, response)

    def _send(self, status: int, ctype: str, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _body_text(response: dict[str, Any]) -> str:
    if "events" in response:
        return "".join(e + "\n\n" for e in response["events"])
    if "json" in response:
        return json.dumps(response["json"])
    return response.get("text", "")


DEFAULT_UPSTREAMS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com",
                     "gpt-": "https://api.openai.com/v1", "claude": "https://api.anthropic.com"}


def default_upstream(model: str) -> str | None:
    """The public endpoint of a model string without ``api_base`` (``openai/…``, ``anthropic/…``), or None."""
    for prefix, url in DEFAULT_UPSTREAMS.items():
        if model.startswith(prefix):
            return url
    return None


_LOOPBACK = ("127.", "::1", "localhost")


class loopback_only:
    """While active, a socket connection to anything but loopback (or a Unix socket) raises
    :class:`CassetteError`: a replay must never reach the network."""

    def __enter__(self) -> "loopback_only":
        self._original = socket.socket.connect
        original = self._original

        def connect(sock: socket.socket, address: Any) -> Any:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                host = str(address[0])
                if not host.startswith(_LOOPBACK):
                    raise CassetteError(f"replaying a cassette: a connection to {host}:{address[1]} was refused (loopback only)")
            return original(sock, address)

        socket.socket.connect = connect  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        socket.socket.connect = self._original  # type: ignore[method-assign]
