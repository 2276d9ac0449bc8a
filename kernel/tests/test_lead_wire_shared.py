"""The pieces both provider plugins share (issue 28 item 2): the OpenAI request's common keys, the
network cause of a failed call read from the exception chain, and the streaming callback's delivery."""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl

import pytest

from clawkit.errors import is_overflow_message, transport_cause
from clawkit.openai_wire import request_keys
from clawkit.providers import DeliveryError, deliver_text
from clawkit.types import LlmRequest, Message, ToolDef


def _wrapped(cause: BaseException, name: str = "APIConnectionError") -> BaseException:
    outer = type(name, (Exception,), {})("the client's own words")
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize("cause, kind, retryable", [
    (ssl.SSLCertVerificationError("certificate verify failed"), "tls", False),
    (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "dns", False),
    (socket.gaierror(socket.EAI_AGAIN, "Temporary failure"), "dns", True),
    (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), "connection", True),
    (TimeoutError("read timed out"), "timeout", True),
    (type("ReadTimeout", (Exception,), {})("slow"), "timeout", True),
    (ConnectionResetError("reset by peer"), "connection", True),
])
def test_the_network_cause_is_read_through_the_chain(cause, kind, retryable):
    found = transport_cause(_wrapped(cause))
    assert found is not None and (found[0], found[2]) == (kind, retryable), found


def test_a_plain_error_has_no_network_cause_and_overflow_is_read_from_text():
    assert transport_cause(ValueError("bad json")) is None
    assert is_overflow_message("This model's maximum context length is 8192 tokens")
    assert not is_overflow_message("invalid api key")


def test_request_keys_carry_tools_settings_and_typed_output():
    request = LlmRequest(model="m", messages=[Message(role="user", content="hi")],
                         tools=[ToolDef(name="t", description="d", parameters={"type": "object", "properties": {}})],
                         response_format={"type": "json_object"}, tool_choice={"name": "final_answer"})
    config = type("C", (), {"temperature": 0.2, "max_tokens": 50})()
    body = request_keys(request, "m", config)
    assert body["model"] == "m" and body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["tools"][0]["function"]["name"] == "t" and body["response_format"] == {"type": "json_object"}
    assert body["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}
    assert (body["temperature"], body["max_tokens"]) == (0.2, 50)


def test_a_display_failure_comes_back_as_the_callers_error():
    seen = []

    async def show(text):
        seen.append(text)

    def broken(text):
        raise OSError("terminal gone")

    asyncio.run(deliver_text(show, "a"))
    asyncio.run(deliver_text(None, "b"))
    with pytest.raises(DeliveryError) as caught:
        asyncio.run(deliver_text(broken, "c"))
    assert seen == ["a"] and isinstance(caught.value.error, OSError)
