"""Serve tests share one loopback model server per module (replies depend on the request)."""

from __future__ import annotations

from typing import Iterator

import pytest

from clawkit.testing.server import ModelServer
from clawkit_serve.testing import respond


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        server.script(respond)
        yield server
