"""Remote embedding providers by name: ``openai`` (``POST {api_base}/embeddings``) and ``gemini``
(Google's ``models/{model}:embedContent`` / ``:batchEmbedContents``), and the fallback wrapper
``auto`` uses (a configured remote provider first, the local model when it fails).

Keys come from the environment only (``api_key_env`` names the variable; defaults
``OPENAI_API_KEY`` and ``GEMINI_API_KEY``/``GOOGLE_API_KEY``) and are registered with
:mod:`clawkit.secrets`. ``api_base`` points at another server (a proxy, a compatible endpoint, a
test server). The stdlib's ``urllib`` makes the calls (no new dependency; no proxy from the
environment).

Each provider's ``model`` names the space its vectors live in (``openai/text-embedding-3-small``,
``gemini/gemini-embedding-001@768`` when ``dimensions`` is set): the index keys its cache by it and
rebuilds its KNN table when it changes, so two providers' vectors are never mixed (docs/plugins/memory.md,
"Embedding providers").
"""

from __future__ import annotations

import json
import logging
import os
import threading
import urllib.error
import urllib.request
from typing import Any

from .config import EmbeddingConfig
from .errors import EmbeddingError

log = logging.getLogger("clawkit.memory")

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _key(config: EmbeddingConfig, provider: str, names: tuple[str, ...]) -> str:
    if config.api_key:
        raise EmbeddingError(f"plugins.memory.embedding.api_key: the {provider} provider reads its key from the "
                             f"environment only; set {names[0]} (or name the variable in api_key_env)")
    configured = config.settings().get("api_key_env")
    for name in ([configured] if configured else list(names)):
        value = os.environ.get(str(name), "")
        if value:
            from clawkit.secrets import register_secret

            register_secret(value)
            return value
    raise EmbeddingError(f"the {provider} embedding provider needs an API key in the environment variable "
                         f"{configured or ' or '.join(names)}; it is not set")


def _post(url: str, body: dict[str, Any], headers: dict[str, str], timeout: float, who: str) -> Any:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "application/json", **headers})
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise EmbeddingError(f"{who} embeddings at {url}: HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise EmbeddingError(f"{who} embeddings at {url}: {type(exc).__name__}: {getattr(exc, 'reason', exc)}") from None


class _Remote:
    """What both remote providers share: model name, dimensions (configured or learnt from the first
    answer), batching, and the recorded space name."""

    provider = ""
    default_model = ""
    known_dims: dict[str, int] = {}

    def __init__(self, config: EmbeddingConfig | None = None):
        self.config = config or EmbeddingConfig()
        self.name = self.config.model or self.default_model
        self.name = self.name.split("/", 1)[1] if self.name.startswith(self.provider + "/") else self.name
        self.batch_size = self.config.batch_size
        self._dims = self.config.dimensions or self.known_dims.get(self.name)
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        """The vector space: provider, model and, when chosen in config, the dimension."""
        suffix = f"@{self.config.dimensions}" if self.config.dimensions else ""
        return f"{self.provider}/{self.name}{suffix}"

    @property
    def dimensions(self) -> int:
        if self._dims is None:
            self._dims = len(self.embed(["dimension probe"])[0])
        return int(self._dims)

    loaded = True  # nothing to load

    def load(self) -> None:
        pass

    def embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for s in range(0, len(texts), self.batch_size):
            out.extend(self._embed(list(texts[s : s + self.batch_size])))
        if out and self._dims is None:
            self._dims = len(out[0])
        if out and any(len(v) != len(out[0]) for v in out) or (out and self._dims and len(out[0]) != self._dims):
            raise EmbeddingError(f"{self.model}: the server answered vectors of {len(out[0])} dimensions, expected {self._dims}")
        return out

    def _embed(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError


class OpenAIEmbeddings(_Remote):
    """OpenAI's embeddings API (or any server speaking it): ``POST {api_base}/embeddings`` with
    ``{"model", "input": [...], "encoding_format": "float"}`` (plus ``dimensions`` when set), bearer key."""

    provider = "openai"
    default_model = "text-embedding-3-small"
    known_dims = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}

    def _embed(self, texts: list[str]) -> list[list[float]]:
        base = (self.config.api_base or "https://api.openai.com/v1").rstrip("/")
        url = base if base.endswith("/embeddings") else base + "/embeddings"
        body: dict[str, Any] = {"model": self.name, "input": texts, "encoding_format": "float"}
        if self.config.dimensions:
            body["dimensions"] = self.config.dimensions
        key = _key(self.config, "openai", ("OPENAI_API_KEY",))
        data = _post(url, body, {"Authorization": f"Bearer {key}"}, self.config.timeout, "openai")
        try:
            rows = sorted(data["data"], key=lambda d: d.get("index", 0))
            vecs = [[float(x) for x in d["embedding"]] for d in rows]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"openai embeddings at {url}: unexpected answer ({exc})") from None
        if len(vecs) != len(texts):
            raise EmbeddingError(f"openai embeddings at {url}: {len(vecs)} vectors for {len(texts)} texts")
        return vecs


class GeminiEmbeddings(_Remote):
    """Google's Gemini API: one text → ``POST {api_base}/models/{model}:embedContent``, several →
    ``:batchEmbedContents``; key in ``x-goog-api-key``; ``dimensions`` sent as ``outputDimensionality``,
    ``task_type`` (extra setting) as ``taskType``."""

    provider = "gemini"
    default_model = "gemini-embedding-001"
    known_dims = {"gemini-embedding-001": 3072, "text-embedding-004": 768}

    def _request(self, text: str) -> dict[str, Any]:
        req: dict[str, Any] = {"model": f"models/{self.name}", "content": {"parts": [{"text": text}]}}
        if self.config.dimensions:
            req["outputDimensionality"] = self.config.dimensions
        task = self.config.settings().get("task_type")
        if task:
            req["taskType"] = task
        return req

    def _embed(self, texts: list[str]) -> list[list[float]]:
        base = (self.config.api_base or "https://generativelanguage.googleapis.com/v1beta").rstrip("/")
        key = _key(self.config, "gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY"))
        headers = {"x-goog-api-key": key}
        try:
            if len(texts) == 1:
                url = f"{base}/models/{self.name}:embedContent"
                data = _post(url, self._request(texts[0]), headers, self.config.timeout, "gemini")
                return [[float(x) for x in data["embedding"]["values"]]]
            url = f"{base}/models/{self.name}:batchEmbedContents"
            data = _post(url, {"requests": [self._request(t) for t in texts]}, headers, self.config.timeout, "gemini")
            vecs = [[float(x) for x in e["values"]] for e in data["embeddings"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"gemini embeddings at {base}: unexpected answer ({exc})") from None
        if len(vecs) != len(texts):
            raise EmbeddingError(f"gemini embeddings at {base}: {len(vecs)} vectors for {len(texts)} texts")
        return vecs


class FallbackEmbeddings:
    """``auto`` with a remote provider configured: the remote one first, the local model when it fails.

    The choice is made once per process, on first use (``load``, which recall runs while the turn is
    prepared): a probe embedding by the remote provider; if it fails, the local model from then on,
    logged once and shown by ``clawkit memory stats``. A remote failure after that switches to the local
    model too, and that one call fails (nothing is stored under the wrong space); the next one rebuilds
    the index under the local model. ``model`` is always the space actually in use."""

    def __init__(self, remote: Any, local_factory: Any, remote_name: str):
        self.remote, self._local_factory, self.remote_name = remote, local_factory, remote_name
        self.local: Any = None
        self.fell_back: str | None = None  # why, once the local model took over
        self._chosen = False
        self._lock = threading.RLock()
        self.batch_size = getattr(remote, "batch_size", 32)

    def _fall_back(self, why: str) -> None:
        with self._lock:  # once, whichever thread (recall, indexing) sees the failure first
            if self.local is not None:
                return
            local = self._local_factory()
            self.batch_size = getattr(local, "batch_size", self.batch_size)
            self.fell_back = why
            self.local = local
            log.warning("memory embeddings: the %s provider failed (%s); using the local model %s from now on",
                        self.remote_name, why, self.local.model)

    def _choose(self) -> None:
        if self._chosen:
            return
        with self._lock:
            if self._chosen:
                return
            try:
                self.remote.embed(["embedding probe"])
            except Exception as exc:
                self._fall_back(str(exc)[:300])
            self._chosen = True

    @property
    def active(self) -> Any:
        self._choose()
        return self.local if self.local is not None else self.remote

    @property
    def model(self) -> str:
        return str(self.active.model)

    @property
    def dimensions(self) -> int:
        return int(self.active.dimensions)

    @property
    def min_similarity(self) -> float:
        return float(getattr(self.active, "min_similarity", 0.35))

    @property
    def loaded(self) -> bool:
        return self._chosen and bool(getattr(self.active, "loaded", True))

    def load(self) -> None:
        load = getattr(self.active, "load", None)
        if load is not None:
            load()

    def embed(self, texts: list[str]) -> Any:
        active = self.active
        if active is self.local:
            return active.embed(texts)
        try:
            return active.embed(texts)
        except Exception as exc:
            self._fall_back(str(exc)[:300])
            raise EmbeddingError(f"the {self.remote_name} embedding provider failed ({exc}); memory switched to the "
                                 f"local model, which the next search or indexing uses") from None

    def describe(self) -> str:
        """One line for ``clawkit memory stats``."""
        self._choose()
        if self.local is not None:
            return (f"auto: {self.remote_name} ({self.remote.model}) failed — {self.fell_back}; "
                    f"using the local model {self.local.model}")
        return f"auto: {self.remote_name} ({self.remote.model}), local model as fallback"
