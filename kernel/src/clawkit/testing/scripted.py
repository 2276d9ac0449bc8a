"""An in-process scripted model provider: fast, deterministic, for unit tests.

Each script item is a string (a text reply), a :class:`ScriptedReply`, an
exception to raise, or a function of the request returning one of those.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..providers import ProviderError
from ..types import LlmRequest, LlmResponse, ToolCall, Usage


@dataclass
class ScriptedReply:
    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    usage: Usage | None = None

    @classmethod
    def calls(cls, *calls: tuple[str, dict[str, Any]], text: str = "") -> "ScriptedReply":
        return cls(text=text, tool_calls=list(calls))


def call(name: str, /, **arguments: Any) -> tuple[str, dict[str, Any]]:
    """``call("get_weather", city="Paris")`` for :meth:`ScriptedReply.calls`."""
    return (name, arguments)


class ScriptedProvider:
    """Replays a script; records every request in ``requests``.

    When the script runs out it raises :class:`ProviderError` — a test that makes
    more model calls than it scripted should fail loudly, not hang.
    """

    def __init__(self, script: Iterable[Any] = (), *, chunk_size: int = 0, repeat_last: bool = False):
        self.script = list(script)
        self.requests: list[LlmRequest] = []
        self.chunk_size = chunk_size
        self.repeat_last = repeat_last
        self._n = 0

    def add(self, *items: Any) -> None:
        self.script.extend(items)

    async def complete(self, request: LlmRequest, on_text: Callable[[str], Any] | None = None) -> LlmResponse:
        self.requests.append(request)
        if self._n >= len(self.script):
            if not (self.repeat_last and self.script):
                raise ProviderError(f"scripted provider: no reply scripted for call #{self._n + 1}")
            item = self.script[-1]
        else:
            item = self.script[self._n]
        self._n += 1
        if callable(item) and not isinstance(item, (type, ScriptedReply)):
            item = item(request)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, str):
            item = ScriptedReply(text=item)
        calls = [ToolCall(id=f"call_{self._n}_{i}", name=n, arguments=a) for i, (n, a) in enumerate(item.tool_calls)]
        if on_text is not None and item.text:
            size = self.chunk_size or len(item.text)
            for i in range(0, len(item.text), size):
                r = on_text(item.text[i : i + size])
                if inspect.isawaitable(r):
                    await r
        usage = item.usage or Usage(prompt_tokens=10, completion_tokens=max(1, len(item.text) // 4), total_tokens=10 + max(1, len(item.text) // 4))
        return LlmResponse(content=item.text, tool_calls=calls, usage=usage, finish_reason="tool_calls" if calls else "stop", model="scripted")
