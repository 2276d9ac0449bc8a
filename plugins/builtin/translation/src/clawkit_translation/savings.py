"""Token savings of ClawDense against compact JSON and CT/1 text, measured with tiktoken.

:data:`CORPUS` is a set of realistic inter-agent messages (an orchestrator and its
research, coder, browser and memory sub-agents: requests, results with payloads,
status, errors, acks, hand-offs). Encodings come from the files litellm bundles
(found by :mod:`clawkit.tokens`), so this works offline.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from . import ct1
from .clawdense import ClawDense, Lexicon
from .ct1 import CT1Message

CORPUS_TEXT = r'''
CT/1 REQ web_search query="nodejs vulnerabilities 2025" limit=5
CT/1 REQ web_search query="CVE-2024-27983 http2 fix version" limit=3 source=nvd
CT/1 RES web_search status=ok results=3 elapsed_ms=812
CT/1 REQ web_fetch url=https://nodejs.org/en/blog/vulnerability/april-2024-security-releases timeout=30
CT/1 RES web_fetch status=ok content="Node.js 18.20.1, 20.12.1 and 21.7.2 fix CVE-2024-27983 (HTTP/2 race)." elapsed_ms=1204
CT/1 STATUS task=t42 progress=0.4 phase=research
CT/1 STATUS task=t42 progress=0.7 phase=research message="3 of 5 sources read"
CT/1 STATUS task=t42 progress=1.0 phase=done
CT/1 ERR code=timeout tool=web_search elapsed=30s retry=true
CT/1 ERR code=not_found tool=read_file path=/home/ana/ws/src/config.yaml
CT/1 ERR code=rate_limited tool=web_fetch retry=true timeout=12
CT/1 ACK task=t42
CT/1 ACK task=t43 status=accepted
CT/1 TASK subagent agent=researcher task=t42 query="compare SQLite WAL and rollback journal durability" deadline=300 priority=high
CT/1 TASK subagent agent=coder task=t44 goal="add retry with backoff to the HTTP client" path=/home/ana/ws/src/http.py language=python
CT/1 TASK subagent agent=browser task=t45 url=https://status.example.com goal="read the incident banner"
CT/1 TASK subagent agent=memory task=t46 query="user preferences for travel" limit=10
CT/1 REQ read_file path=/home/ana/ws/src/http.py
CT/1 REQ read_file path=/home/ana/ws/tests/test_http.py
CT/1 RES read_file status=ok path=/home/ana/ws/src/http.py elapsed_ms=3
CT/1 REQ write_file path=/home/ana/ws/src/http.py content="import time\n\ndef retry(fn, tries=3):\n    for i in range(tries):\n        try:\n            return fn()\n        except OSError:\n            time.sleep(2 ** i)\n    return fn()\n"
CT/1 RES write_file status=ok path=/home/ana/ws/src/http.py
CT/1 REQ run_tests path=/home/ana/ws/tests timeout=120
CT/1 RES run_tests status=error results=[passed,failed] elapsed_ms=5340
CT/1 REQ exec command="pytest -q tests/test_http.py" timeout=60
CT/1 RES exec status=ok elapsed_ms=2210 content="5 passed in 1.92s"
CT/1 REQ git_diff path=/home/ana/ws/src
CT/1 REQ git_commit message="http: retry with exponential backoff" path=/home/ana/ws
CT/1 RES git_commit status=ok result=3f2a9c1
CT/1 REQ memory_search query="preferred airline" limit=3
CT/1 RES memory_search status=ok results=2
CT/1 REQ memory_store key=preferred_airline value="KLM, aisle seat" tags=[travel,preferences]
CT/1 RES memory_store status=ok key=preferred_airline
CT/1 REQ browser_open url=https://status.example.com
CT/1 REQ browser_click selector="#incident-banner a.details"
CT/1 REQ browser_snapshot
CT/1 RES browser_snapshot status=ok content="Degraded performance: EU region (investigating)"
CT/1 REQ get_weather location=Paris units=metric
CT/1 RES get_weather status=ok location=Paris temperature=18 conditions=sunny
CT/1 REQ summarize content="SQLite in WAL mode commits by appending to the WAL file; readers do not block writers, and a checkpoint copies pages back." limit=40
CT/1 RES summarize status=ok content="WAL appends commits; readers never block writers."
CT/1 REQ schedule_task command="check the status page" cron="0 9 * * 1-5" timeout=60
CT/1 RES schedule_task status=ok task=t50
CT/1 NOOP
CT/1 STATUS agent=researcher status=idle
CT/1 REQ send_message agent=orchestrator task=t42 status=done
CT/1 RES web_search status=ok results=2
---
{"results":[{"title":"Node.js April 2024 security releases","url":"https://nodejs.org/en/blog/vulnerability/april-2024-security-releases","snippet":"HTTP/2 CONTINUATION flood fixed"},{"title":"CVE-2024-27983","url":"https://nvd.nist.gov/vuln/detail/CVE-2024-27983","snippet":"race condition in http2 server"}]}
CT/1 RES memory_search status=ok results=2
---
{"results":[{"key":"preferred_airline","value":"KLM, aisle seat","score":0.92},{"key":"home_airport","value":"AMS","score":0.81}]}
CT/1 MULTI task=t42
---
[{"verb":"STATUS","progress":0.9},{"verb":"ACK","task":"t43"}]
CT/1 ERR code=validation tool=write_file path=/home/ana/ws/src/http.py message="content must end with a newline"
'''.strip()

#: The lexicon both ends of the benchmark link share (what a deployment's skill would declare).
CORPUS_LEXICON = Lexicon(
    mappings={"sts": "status", "kw": "keyword", "tk": "task", "lim": "limit", "hi": "high", "lo": "low", "pl": "python",
              "dn": "done", "ac": "accepted", "nf": "not_found", "rl": "rate_limited", "val": "validation", "loc": "location"},
    path_compressions={"~ws": "/home/ana/ws"},
)


def corpus() -> list[CT1Message]:
    """The corpus, parsed (messages split at each ``CT/1`` header line)."""
    out, cur = [], []
    for line in CORPUS_TEXT.split("\n"):
        if line.startswith("CT/1 ") and cur:
            out.append(ct1.parse("\n".join(cur)))
            cur = []
        cur.append(line)
    if cur:
        out.append(ct1.parse("\n".join(cur)))
    return out


def encoding(name: str = "cl100k_base") -> Any:
    """A tiktoken encoding, loaded offline through :mod:`clawkit.tokens` (litellm's bundled files).

    Raises ``LookupError`` when only a character estimate is available: a savings
    figure must come from the real tokenizer.
    """
    from clawkit.tokens import get_counter

    if name not in ("cl100k_base", "o200k_base"):  # the two clawkit.tokens bundles; others from litellm's folder
        return _other_encoding(name)
    counter = get_counter(encoding=name)
    if not counter.exact:
        raise LookupError(f"tiktoken encoding {name} is not available offline: {counter.reason}")
    return counter.encoding


@lru_cache(maxsize=4)
def _other_encoding(name: str) -> Any:
    import importlib.util
    import os

    spec = importlib.util.find_spec("litellm")
    folder = Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers" if spec and spec.submodule_search_locations else None
    if folder is None or not folder.is_dir():
        raise LookupError(f"tiktoken encoding {name} is not available offline")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(folder))
    import tiktoken

    return tiktoken.get_encoding(name)


def report(messages: Iterable[CT1Message] | None = None, lexicon: Lexicon | None = CORPUS_LEXICON, encoding_name: str = "cl100k_base") -> dict[str, Any]:
    """Tokens (and chars) of the corpus as compact JSON, CT/1 text and ClawDense; savings in %."""
    enc = encoding(encoding_name)
    msgs = list(messages if messages is not None else corpus())
    codec = ClawDense(lexicon)
    forms = {
        "json": [m.to_json() for m in msgs],
        "ct1": [ct1.serialize(m) for m in msgs],
        "clawdense": [codec.encode(m) for m in msgs],
    }
    for m, d in zip(msgs, forms["clawdense"]):
        assert codec.decode(d) == m, f"not lossless: {d!r}"
    tokens = {k: sum(len(enc.encode(t)) for t in v) for k, v in forms.items()}
    chars = {k: sum(len(t) for t in v) for k, v in forms.items()}
    return {
        "messages": len(msgs),
        "encoding": encoding_name,
        "tokens": tokens,
        "chars": chars,
        "savings_vs_json": round(100 * (1 - tokens["clawdense"] / tokens["json"]), 1),
        "savings_vs_ct1": round(100 * (1 - tokens["clawdense"] / tokens["ct1"]), 1),
        "ct1_savings_vs_json": round(100 * (1 - tokens["ct1"] / tokens["json"]), 1),
    }
