"""Fixtures of the workers' tests: a fresh PostgreSQL database (``postgres_db``, from
clawkit.testing) per test, and a scripted model."""

from __future__ import annotations

import pytest


@pytest.fixture
def pg_url(postgres_db):
    return str(postgres_db)


@pytest.fixture(scope="module")
def append_model():
    from clawkit_workers.testing import AppendModel

    m = AppendModel()
    m.server.responder = m
    yield m
    m.server.stop()
