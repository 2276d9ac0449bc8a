"""web_search backends from other plugins (``register_search_backend``), config errors, and the
limits every backend gets (the tool makes the HTTP call, not the backend)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from clawkit import hookimpl
from clawkit.testing.server import Reply
from clawkit_tools import SearchRequest, SearchResult, WebSearchConfig


class Echo:
    """A backend of another plugin: GET /q?term=… answering {"hits": [{"name", "link", "text"}]}."""

    default_base = None
    needs_key = False

    def __init__(self, cfg):
        self.cfg = cfg

    def request(self, query, count, key):
        return SearchRequest("GET", "/q", params={"term": query, "n": count})

    def parse(self, data):
        return [SearchResult(h["name"], h["link"], h["text"]) for h in data["hits"]]


class EchoPlugin:
    @hookimpl
    def register_search_backend(self, register):
        register("echo", Echo)


def test_a_plugin_registers_a_backend(llm_agent, model_server, web):
    web.routes["/q"] = (200, {"Content-Type": "application/json"},
                        json.dumps({"hits": [{"name": "Hit", "link": "https://example.org/hit", "text": "from echo"}]}))
    agent = llm_agent(Reply.tool_calls([("web_search", {"query": "anything", "count": 2})]), "Done.",
                      plugins=(EchoPlugin(),), tools=["web_search"],
                      sections={"tools": {"search": {"backend": "echo", "base_url": web.url}}})
    assert agent.run("search").reply == "Done."
    shown = [m["content"] for m in model_server.requests[1].messages if m["role"] == "tool"][0]
    assert "1. Hit" in shown and "https://example.org/hit" in shown and "from echo" in shown
    assert web.seen[0]["path"] == "/q?term=anything&n=2"


def test_unknown_backend_names_the_known_ones(llm_agent, model_server):
    agent = llm_agent(Reply.tool_calls([("web_search", {"query": "x"})]), "Done.", tools=["web_search"],
                      sections={"tools": {"search": {"backend": "nope", "base_url": "http://127.0.0.1:9"}}})
    agent.run("search")
    shown = [m["content"] for m in model_server.requests[1].messages if m["role"] == "tool"][0]
    assert "unknown backend 'nope'" in shown and "brave, searxng, tavily" in shown


def test_no_key_in_yaml_and_no_redirects(web, workspace, ctx_for):
    with pytest.raises(ValidationError, match="api_key_env"):
        WebSearchConfig(backend="brave", api_key="sk-nope")
    import asyncio

    from clawkit.tools import ToolError
    from clawkit_tools import web_search

    web.routes["/search"] = (302, {"Location": "http://169.254.169.254/"}, "")
    ctx = ctx_for(workspace, search={"backend": "searxng", "base_url": web.url})
    with pytest.raises(ToolError, match="HTTP 302"):
        asyncio.run(web_search(ctx, "x"))
    web.routes["/search"] = (200, {"Content-Type": "application/json"}, json.dumps({"results": [{"x": 1}] * 10_000}))
    small = ctx_for(workspace, search={"backend": "searxng", "base_url": web.url, "max_bytes": 1000})
    with pytest.raises(ToolError, match="larger than 1000 bytes"):
        asyncio.run(web_search(small, "x"))
    nobase = ctx_for(workspace, search={"backend": "searxng"})
    with pytest.raises(ToolError, match="base_url"):
        asyncio.run(web_search(nobase, "x"))
