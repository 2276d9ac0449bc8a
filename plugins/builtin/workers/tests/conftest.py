"""Fixtures of the workers' tests: a real PostgreSQL and a scripted model."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory):
    from clawkit_workers.pgtest import pg_bin, postgres

    if pg_bin() is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("PostgreSQL binaries are missing (apt-get install postgresql) and CI must not skip these tests")
        pytest.skip("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
    with postgres() as url:
        yield url


@pytest.fixture(scope="module")
def append_model():
    from clawkit_workers.testing import AppendModel

    m = AppendModel()
    m.server.responder = m
    yield m
    m.server.stop()


