"""Helpers for tests and benchmarks of queued turns: a model that makes every turn append to a
file through ``shell_exec``, agent files for it, and ``clawkit worker`` subprocesses."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from clawkit.testing.server import ModelServer, Reply


class AppendModel:
    """Answers every session alike: first a ``shell_exec`` that appends the session's token to
    ``effects.log`` (once per idempotency key) and logs each execution in ``attempts.log``; after
    the tool's result, a reply naming the token. ``hold`` delays the replies to tool results; a token
starting with ``z`` makes the command sleep 3 s between its attempt and its effect; one starting with
``p`` asks for two calls at once (tokens ``<token>a`` and ``<token>b``)."""

    def __init__(self) -> None:
        self.server = ModelServer().start()
        self.hold = 0.0
        self.hold_first = threading.Event()  # set: the first reply to a tool result has been asked for

    def __call__(self, request: Any) -> Any:
        msgs = request.messages
        last = msgs[-1]
        token = next(re.search(r"token (\w+)", m["content"]).group(1) for m in reversed(msgs)
                     if m["role"] == "user" and isinstance(m.get("content"), str) and "token " in m["content"])
        if last["role"] == "tool":
            self.hold_first.set()
            if self.hold:
                time.sleep(self.hold)
            return Reply.text(f"appended {token}")
        if token.startswith("p"):  # p…: two calls in one response, run concurrently
            return Reply.tool_calls([("shell_exec", {"command": self.command(token + "a")}),
                                     ("shell_exec", {"command": self.command(token + "b")})])
        return Reply.tool_calls([("shell_exec", {"command": self.command(token)})])

    @staticmethod
    def command(token: str) -> str:
        slow = "sleep 3; " if token.startswith("z") else ""  # z…: the tool is still running when a worker dies
        return (f'echo "$CLAWKIT_IDEMPOTENCY_KEY {token}" >> attempts.log; {slow}'
                f'grep -q "^$CLAWKIT_IDEMPOTENCY_KEY " effects.log 2>/dev/null || echo "$CLAWKIT_IDEMPOTENCY_KEY {token}" >> effects.log; '
                f'echo ok {token}')


def agent_yaml(folder: Path, model_url: str, *, name: str = "appender", approve_shell: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ws").mkdir(exist_ok=True)
    policy = "" if approve_shell else "\n  policy: {risk: {shell_exec: safe}}"
    # narrow: every other builtin is loaded (the full install); memory is turned off because each worker
    # subprocess would load the embedding model for an agent that never recalls anything (issue 30 item 13)
    path = folder / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        f"model: {{name: openai/test-model, api_base: \"{model_url}\", api_key: sk-test, timeout: 30, max_retries: 0}}\n"
        f"workspace: {folder / 'ws'}\n"
        f"state_db: {folder / 'state.db'}\n"
        f"instructions: Append the token.\n"
        f"tools: [shell_exec]\n"
        f"plugins:\n  memory: {{enabled: false}}{policy}\n",
        encoding="utf-8")
    return path


class Workers:
    """``clawkit worker`` subprocesses; each is started and waited for until it says it is ready."""

    def __init__(self, url: str, agents: list[Path]):
        self.url, self.agents = url, agents
        self.procs: list[subprocess.Popen] = []

    def start(self, n: int = 1, *extra: str) -> list[subprocess.Popen]:
        started = []
        for _ in range(n):
            p = subprocess.Popen([sys.executable, "-m", "clawkit", "worker", *map(str, self.agents), "--db", self.url,
                                  "--dead-after", "2", "--concurrency", "16", *extra],
                                 stderr=subprocess.PIPE, text=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
            self.procs.append(p)
            started.append(p)
        for p in started:
            lines = []
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                line = p.stderr.readline()
                if not line:
                    break
                lines.append(line)
                if ": ready" in line:
                    break
            else:
                raise AssertionError("worker did not start:\n" + "".join(lines))
            if not lines or ": ready" not in lines[-1]:
                raise AssertionError(f"worker exited {p.poll()}:\n" + "".join(lines) + (p.stderr.read() or ""))
            threading.Thread(target=lambda s=p.stderr: [None for _ in s], daemon=True).start()  # keep the pipe drained
        return started

    def stop(self, p: subprocess.Popen, timeout: float = 30) -> int:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        return p.wait(timeout)

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
