"""Shared helpers for the clawkit-policy tests."""

from __future__ import annotations

import sqlite3

import pytest


@pytest.fixture
def build_agent(make_agent):
    """``build_agent(script_or_provider, plugins=..., sections={"policy": {...}}, **config)``:
    the kit's ``make_agent`` with this suite's name for plugin sections."""

    def factory(script=(), *, sections=None, **kw):
        return make_agent(script, plugin_config=sections, **kw)

    return factory


@pytest.fixture
def llm_agent(http_agent):
    """``llm_agent(*script, plugins=..., sections=..., **config)``: the kit's ``http_agent`` (the
    loopback model_server through the real litellm provider)."""

    def factory(*script, sections=None, **kw):
        return http_agent(*script, plugin_config=sections, **kw)

    return factory


class LedgerFiles:
    """An audit ledger writer on a file of its own, for the writer's tests."""

    @staticmethod
    def writer(path):
        """``(connection, LedgerWriter)`` on a new WAL database at ``path``."""
        from clawkit_policy.gate import prepare
        from clawkit_policy.writer import LedgerWriter

        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn, LedgerWriter(conn, str(path), prepare([]))

    @staticmethod
    def in_vanished_dir(tmp_path):
        """A writer whose database directory has been deleted (a test's temporary directory, at exit)."""
        (tmp_path / "gone").mkdir()
        conn, writer = LedgerFiles.writer(tmp_path / "gone" / "a.db")
        conn.close()
        for name in ("a.db", "a.db-wal", "a.db-shm"):
            (tmp_path / "gone" / name).unlink(missing_ok=True)
        (tmp_path / "gone").rmdir()
        return conn, writer

    @staticmethod
    def count(path):
        """Audit records committed in the database at ``path`` (read by another connection)."""
        with sqlite3.connect(path) as other:
            return other.execute("SELECT count(*) FROM policy_audit").fetchone()[0]


@pytest.fixture
def ledger_files() -> type[LedgerFiles]:
    """Helpers for a ledger writer on a file of its own (``writer``, ``in_vanished_dir``, ``count``)."""
    return LedgerFiles
