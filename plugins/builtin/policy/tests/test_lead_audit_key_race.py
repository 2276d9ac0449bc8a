"""The audit key appears whole or not at all: processes and threads that start together on a fresh
machine all get the same key. It used to be created empty and then written, so one started in
between read 0 bytes and failed with "the audit key … is damaged (0 bytes)" (seen as a flaky
writer test when the timer thread and a test's thread created it at once)."""

from __future__ import annotations

import secrets
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

from clawkit_policy import anchor

SCRIPT = "from clawkit_policy import anchor; import sys; sys.stdout.write(anchor.load_key().hex())"


def test_threads_and_processes_starting_together_share_one_whole_key(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWKIT_AUDIT_HOME", str(tmp_path / "audit"))
    anchor.forget_keys()

    def slow_token_bytes(n):  # a wide window between choosing the key and having it on disk
        time.sleep(0.2)
        return secrets.token_bytes(n)

    monkeypatch.setattr(anchor, "secrets", SimpleNamespace(token_bytes=slow_token_bytes))  # anchor's alone
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    got: list[bytes] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def load():
        start.wait()
        try:
            got.append(anchor.load_key())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outs = [p.communicate(timeout=60) for p in procs]
    anchor.forget_keys()
    assert not errors and all(p.returncode == 0 for p in procs), (errors, [e for _, e in outs])
    key = anchor.key_path().read_bytes()
    assert len(key) == anchor.KEY_BYTES
    assert set(got) == {key} and {o for o, _ in outs} == {key.hex()}
    assert sorted(p.name for p in anchor.key_path().parent.iterdir()) == ["key"]  # no temporary file left
