"""A loopback server speaking OpenAI's embeddings API and Google's Gemini embedContent /
batchEmbedContents (tests of clawkit-memory's ``openai``, ``gemini`` and ``auto`` providers).

Vectors are hashed bags of words (64 dimensions, unit length), so texts sharing words are near:
recall works as with a real model. A path under ``/fail`` answers 500 (a provider that is down)."""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMS = 64


def vector(text: str, dims: int = DIMS) -> list[float]:
    v = [0.0] * DIMS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        v[int(hashlib.sha1(word.encode()).hexdigest(), 16) % DIMS] += 1.0
    v = v[:dims]
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        srv = self.server
        srv.seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if self.path.startswith("/fail"):
            return self._send(500, {"error": {"message": "the embedding service is down"}})
        if self.path.endswith("/embeddings"):  # OpenAI
            if self.headers.get("Authorization") != f"Bearer {srv.keys['openai']}":
                return self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
            dims = int(body.get("dimensions") or DIMS)
            data = [{"object": "embedding", "index": i, "embedding": vector(t, dims)} for i, t in enumerate(body["input"])]
            return self._send(200, {"object": "list", "data": data, "model": body["model"],
                                    "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        if ":embedContent" in self.path or ":batchEmbedContents" in self.path:  # Gemini
            if self.headers.get("x-goog-api-key") != srv.keys["gemini"]:
                return self._send(400, {"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}})

            def one(req):
                return {"values": vector(req["content"]["parts"][0]["text"], int(req.get("outputDimensionality") or DIMS))}

            if ":embedContent" in self.path:
                return self._send(200, {"embedding": one(body)})
            return self._send(200, {"embeddings": [one(r) for r in body["requests"]]})
        self._send(404, {"error": "no route"})


class EmbeddingServer:
    """``with EmbeddingServer(keys={"openai": …, "gemini": …}) as srv``: ``srv.url``, ``srv.seen``."""

    def __init__(self, keys: dict[str, str]):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.seen = []
        self.httpd.keys = keys
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def seen(self) -> list[dict]:
        return self.httpd.seen

    def __enter__(self) -> "EmbeddingServer":
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
