"""issue 26 item 8: ``clawkit chat`` on a real terminal shows one dim line per tool call (name, short
arguments, outcome, size) and, after ``/verbose``, the whole call and result — every builtin loaded."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

DIM, RESET = b"\x1b[2m", b"\x1b[0m"


class Terminal:
    def __init__(self, cwd: Path, env: dict[str, str]):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, "-m", "clawkit", "chat", "agent.yaml"], env)
        self.buffer = b""

    def expect(self, pattern: bytes, timeout: float = 90) -> bytes:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.buffer):
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {pattern!r}; got {self.buffer[-2000:]!r}"
            ready, _, _ = select.select([self.fd], [], [], min(left, 1))
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                assert chunk, f"the terminal closed waiting for {pattern!r}; got {self.buffer[-2000:]!r}"
                self.buffer += chunk
        m = re.search(pattern, self.buffer)
        seen, self.buffer = self.buffer[: m.end()], self.buffer[m.end():]
        return seen

    def send(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def dim_lines(screen: bytes) -> list[str]:
    return [m.decode() for m in re.findall(rb"\x1b\[2m(.*?)\x1b\[0m", screen, re.S)]


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_chat_shows_each_tool_call_and_verbose_shows_it_all(tmp_path, wire):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("apples\npears\n")
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install: every builtin plugin
    env["CLAWKIT_AUDIT_HOME"] = str(tmp_path / "audit")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    with ModelServer() as server:
        base = server.url if wire == "openai" else server.base_url
        (ws / "agent.yaml").write_text(
            f'name: t\nmodel: {{name: {wire}/test, api_base: "{base}", api_key: sk-test, max_retries: 0}}\n'
            "tools: [list_dir, read_file, write_file]\n")
        server.script(
            Reply.tool_calls([("list_dir", {"path": "."}), ("read_file", {"path": "notes.txt"})]), "Two fruits.",
            Reply.tool_calls([("read_file", {"path": "notes.txt"})]), "Apples and pears.",
            Reply.tool_calls([("write_file", {"path": "/etc/x\x1b[2J", "content": "hi"})]), "Could not.",
        )
        term = Terminal(ws, env)
        try:
            term.expect(rb"you> ")
            term.send("what is here")
            screen = term.expect(rb"you> ")
            # by default: one dim line per call, the result itself not shown
            # the two calls run at once: each line is printed as its call ends, in either order
            first, second = sorted(dim_lines(screen))
            assert re.fullmatch(r'· list_dir\(path="\."\) → ok, \d+ lines?, \d+ B', first), first
            assert re.fullmatch(r'· read_file\(path="notes\.txt"\) → ok, \d+ lines?, \d+ B', second), second
            assert b"Two fruits." in screen and b"apples" not in screen
            assert screen.index(b"read_file") < screen.index(b"Two fruits.")  # in order, as it happens

            term.send("/verbose")
            assert b"[verbose: each tool call with its arguments and result" in term.expect(rb"you> ")
            term.send("read it")
            screen = term.expect(rb"you> ")
            detail = "\n".join(dim_lines(screen)).replace("\r\n", "\n")
            assert '→ read_file {\n  "path": "notes.txt"\n}' in detail
            assert "← read_file (ok, " in detail and "apples\npears" in detail
            assert b"Apples and pears." in screen

            term.send("/verbose")
            assert b"[one line a tool call" in term.expect(rb"you> ")
            term.send("write it")
            term.expect(rb"allow\? \[y/N\] ")
            term.send("n")
            screen = term.expect(rb"you> ")
            [line] = dim_lines(screen)
            assert line.startswith('· write_file(path="/etc/x\\u001b[2J", content="hi") → denied: ')
            assert b"\x1b[2J" not in screen  # what the model wrote never reaches the terminal raw
            assert b"Could not." in screen
        finally:
            term.close()


def test_piped_chat_keeps_stdout_for_replies(tmp_path):
    import subprocess

    ws = tmp_path / "ws"
    ws.mkdir()
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)
    env["CLAWKIT_AUDIT_HOME"] = str(tmp_path / "audit")
    with ModelServer() as server:
        (ws / "agent.yaml").write_text(
            f'name: t\nmodel: {{name: openai/test, api_base: "{server.url}", api_key: sk-test, max_retries: 0}}\n'
            "tools: [list_dir]\n")
        server.script(Reply.tool_calls([("list_dir", {"path": "."})]), "One file.")
        out = subprocess.run([sys.executable, "-m", "clawkit", "chat", "agent.yaml"], input="what is here\n", cwd=ws,
                             env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "One file."
    assert re.search(r'^· list_dir\(path="\."\) → ok, \d+ lines?, \d+ B$', out.stderr, re.M), out.stderr
    assert "\x1b" not in out.stderr
