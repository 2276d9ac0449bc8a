"""Issue 26 item 6: the ``web_search`` tool, through the real CLI with every builtin loaded, against a
loopback server that speaks each backend's documented API (SearXNG ``GET /search?format=json``, Brave
``GET /res/v1/web/search`` with ``X-Subscription-Token``, Tavily ``POST /search`` with a bearer key),
for both wire formats (OpenAI-compatible and Anthropic). Results reach the model as title/URL/snippet;
they are untrusted content (provenance kind ``web``), so the next egress call needs approval; the key
comes from the environment and shows up nowhere else; a key written in the YAML is refused."""

from __future__ import annotations

import json
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from clawkit.testing.server import Reply

from .conftest import Cases, run_batch, write_agent

BRAVE_KEY = "brv-0123456789abcdef-SECRET"
TAVILY_KEY = "tvly-0123456789abcdef-SECRET"
PAGE = {"title": "Clawkit 1.0 released", "url": "https://example.org/clawkit-1.0",
        "snippet": "The plugin-first agent framework ships web search."}


class _Search(BaseHTTPRequestHandler):
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

    def do_GET(self):
        parts = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        self.server.seen.append({"method": "GET", "path": parts.path, "query": q, "headers": dict(self.headers)})
        if parts.path == "/search":  # SearXNG: JSON only when asked for (format=json)
            if q.get("format") != "json":
                return self._send(403, {"error": "format not allowed"})
            return self._send(200, {"query": q.get("q"), "number_of_results": 2, "results": [
                {"title": PAGE["title"], "url": PAGE["url"], "content": PAGE["snippet"], "engine": "ddg"},
                {"title": "Other", "url": "https://example.org/other", "content": "<b>bold</b> snippet", "engine": "ddg"}]})
        if parts.path == "/res/v1/web/search":  # Brave
            if self.headers.get("X-Subscription-Token") != BRAVE_KEY:
                return self._send(401, {"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}})
            return self._send(200, {"type": "search", "query": {"original": q.get("q")}, "web": {"type": "search", "results": [
                {"title": PAGE["title"], "url": PAGE["url"], "description": PAGE["snippet"], "type": "search_result"}]}})
        self._send(404, {"error": "no route"})

    def do_POST(self):
        parts = urlsplit(self.path)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.server.seen.append({"method": "POST", "path": parts.path, "body": body, "headers": dict(self.headers)})
        if parts.path == "/search" and self.headers.get("Authorization") == f"Bearer {TAVILY_KEY}":  # Tavily
            return self._send(200, {"query": body.get("query"), "response_time": 0.1, "results": [
                {"title": PAGE["title"], "url": PAGE["url"], "content": PAGE["snippet"], "score": 0.9}]})
        self._send(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})


@pytest.fixture(scope="module")
def search_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Search)
    httpd.daemon_threads = True
    httpd.seen = []
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _search_section(backend: str, url: str, key_env: str | None = None) -> str:
    out = f"tools:\n  search: {{backend: {backend}, base_url: \"{url}\", max_results: 3"
    return out + (f", api_key_env: {key_env}}}\n" if key_env else "}\n")


def _anthropic(ws, server, tools, plugins, filename):
    write_agent(ws, server, tools, plugins, filename=filename)
    path = ws / filename
    path.write_text(path.read_text().replace("openai/test", "anthropic/claude-test").replace(server.url, server.base_url))


SEARCH = Reply.tool_calls([("web_search", {"query": "clawkit release"})])


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, server, search_server):
    root = tmp_path_factory.mktemp("websearch")
    audit_home = root / "audit"
    cases = Cases()
    jobs = []

    def job(name, section, *replies, anthropic=False, env=None, tools=("web_search", "web_fetch")):
        ws = root / name
        ws.mkdir()
        (_anthropic if anthropic else write_agent)(ws, server, list(tools), section, filename="agent.yaml")
        tag = cases.add(name, *replies)
        jobs.append({"name": name, "cwd": str(ws), "argv": ["run", "agent.yaml", f"{tag} search it", "--json"],
                     "env": env or {}})

    url = search_server.url
    # SearXNG, OpenAI wire: a search, then a second search in the same turn (egress after untrusted content)
    job("searxng", _search_section("searxng", url), SEARCH,
        Reply.tool_calls([("web_search", {"query": "exfiltrate the notes"})]), "done")
    job("searxng_anthropic", _search_section("searxng", url), SEARCH, "done", anthropic=True)
    job("brave", _search_section("brave", url, "MY_BRAVE_KEY"), SEARCH, "done", anthropic=True,
        env={"MY_BRAVE_KEY": BRAVE_KEY})
    job("tavily", _search_section("tavily", url), SEARCH, "done", env={"TAVILY_API_KEY": TAVILY_KEY})
    job("brave_no_key", _search_section("brave", url, "UNSET_BRAVE_KEY"), SEARCH, "done")
    job("key_in_yaml", f"tools:\n  search: {{backend: brave, base_url: \"{url}\", api_key: {BRAVE_KEY}}}\n", "done")
    server.script(cases)
    results = run_batch(jobs, audit_home, root)
    return results, cases, root, search_server


def _tool_text(cases, name):
    """What the model was shown (tool messages in the OpenAI form; everything sent, for Anthropic's blocks)."""
    return "\n".join(cases.tool_list(name)) or cases.seen(name)


def _untrusted(ws):
    conn = sqlite3.connect(ws / ".clawkit" / "state.db")
    try:
        rows = conn.execute("SELECT metadata FROM sessions").fetchall()
    finally:
        conn.close()
    return [json.loads(r[0] or "{}").get("untrusted") for r in rows]


@pytest.mark.parametrize("name", ["searxng", "searxng_anthropic", "brave", "tavily"])
def test_results_reach_the_model_as_title_url_snippet(outcome, name):
    results, cases, root, search = outcome
    assert results[name]["rc"] == 0, results[name]["stderr"][-2000:]
    text = _tool_text(cases, name)
    assert PAGE["title"] in text and PAGE["url"] in text and PAGE["snippet"] in text, text
    # untrusted web content: recorded in the session's provenance
    [record] = _untrusted(root / name)
    assert record and {"source": "web_search", "detail": "clawkit release", "kind": "web"} in record["sources"]


def test_each_backend_got_its_documented_request(outcome):
    results, cases, root, search = outcome
    seen = search.seen
    sx = [s for s in seen if s["method"] == "GET" and s["path"] == "/search"]
    assert sx and all(s["query"]["format"] == "json" and s["query"]["q"] == "clawkit release" for s in sx)
    brave = [s for s in seen if s["path"] == "/res/v1/web/search"]
    assert brave[0]["headers"]["X-Subscription-Token"] == BRAVE_KEY and brave[0]["query"]["count"] == "3"
    tav = [s for s in seen if s["method"] == "POST"]
    assert tav[0]["body"] == {"query": "clawkit release", "max_results": 3}
    assert "<b>" not in _tool_text(cases, "searxng") and "bold snippet" in _tool_text(cases, "searxng")


def test_second_search_after_untrusted_results_needs_approval(outcome):
    """Like web_fetch: the query leaves the machine, so once results are in the context the next
    search is asked for (denied in a non-interactive run) and never reaches the backend."""
    results, cases, root, search = outcome
    calls = results["searxng"]["json"]["tool_calls"]
    assert [c["name"] for c in calls] == ["web_search", "web_search"]
    assert calls[0]["is_error"] is False and calls[1]["blocked"] is True
    second = cases.tool_list("searxng")[1]
    assert "not approved" in second and "untrusted web via web_search" in second, second
    assert not any(s.get("query", {}).get("q") == "exfiltrate the notes" for s in search.seen)


def test_the_key_shows_up_nowhere(outcome):
    results, cases, root, search = outcome
    for name in ("brave", "tavily"):
        blob = results[name]["stdout"] + results[name]["stderr"] + cases.seen(name)
        blob += (root / name / ".clawkit" / "state.db").read_bytes().decode("latin-1")
        assert BRAVE_KEY not in blob and TAVILY_KEY not in blob
        assert "SECRET" not in (root / name / "agent.yaml").read_text()


def test_missing_key_and_key_in_yaml_are_clear_errors(outcome):
    results, cases, root, search = outcome
    assert "UNSET_BRAVE_KEY" in _tool_text(cases, "brave_no_key") and "not set" in _tool_text(cases, "brave_no_key")
    bad = results["key_in_yaml"]
    assert bad["rc"] != 0
    err = bad["stderr"] + bad["stdout"]
    assert "api_key_env" in err and "agent.yaml" in err and BRAVE_KEY not in err
