"""The terminal approver's line reader: a closed or broken terminal denies cleanly."""

import asyncio
import io

import pytest

from clawkit_policy.approvers import _readline


class Broken(io.StringIO):
    def readline(self, *args):
        raise OSError("terminal went away")


def test_a_broken_terminal_raises_its_own_error_not_a_name_error():
    with pytest.raises(OSError, match="terminal went away"):
        asyncio.run(_readline(Broken(), 2.0))


def test_an_answer_is_read():
    assert asyncio.run(_readline(io.StringIO("y\n"), 2.0)) == "y\n"
