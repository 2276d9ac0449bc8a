"""A provider that reports no usage: the model-call and run spans carry the locally counted tokens,
marked ``clawkit.usage.estimated`` (every builtin plugin loaded, the real http provider)."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import clawkit_otel
from clawkit.testing.server import ModelServer, Reply


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    clawkit_otel.install(tp, MeterProvider(metric_readers=[InMemoryMetricReader()]))
    yield exporter
    clawkit_otel.uninstall()


def test_spans_mark_estimated_usage_when_the_provider_reports_none(spans, tmp_path):
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager
    from clawkit.runtime import load_config

    ws = tmp_path / "ws"
    ws.mkdir()
    path = tmp_path / "agent.yaml"
    with ModelServer(report_usage=False) as server:
        path.write_text(json.dumps({"name": "quiet", "model": {"name": "openai/test-model", "api_base": server.url,
                                                                "api_key": "sk-test", "max_retries": 0},
                                    "instructions": "Help.", "workspace": str(ws), "tools": ["list_dir"]}))
        server.script(Reply.tool_calls([("list_dir", {"path": "."})]), "all done")
        cfg, _ = load_config(path)
        with Agent(cfg, pm=get_plugin_manager()) as agent:
            result = agent.run("look around")
        assert server.requests[0].body["stream_options"] == {"include_usage": True}  # asked, never answered
    assert result.reply == "all done" and result.usage.estimated and result.usage.prompt_tokens > 0
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 2
    for c in chats:
        assert c.attributes["clawkit.usage.estimated"] is True
        assert c.attributes["gen_ai.usage.input_tokens"] > 0 and c.attributes["gen_ai.usage.output_tokens"] > 0
    run = next(s for s in spans.get_finished_spans() if s.name == "invoke_agent quiet")
    assert run.attributes["clawkit.usage.estimated"] is True
    assert run.attributes["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens
