"""What a 5 MB attachment adds to a turn's CPU (issue 26: "≤ 50 ms").

Run:
    .venv/bin/python tests/benchmarks/bench_attachment.py [--rounds 15] [--mb 5] [--wire openai|anthropic]

One agent with every builtin plugin (``open_agent`` on a YAML file, as ``clawkit run`` builds it),
the real clawkit-http provider, and the loopback ``ModelServer`` in a *child process* (so the server's
parsing of the 7 MB body is not counted). Turns alternate: the same message without an attachment
(the baseline) and with a 5 MB PNG file, each in a new session. CPU is ``time.process_time()`` of this
process (every thread: the turn, the store's writer, the plugins' workers) around ``agent.run``; it
covers reading the file, typing it, hashing, base64, storing the blob (once: later rounds find it),
the request body's JSON and sending it. Reported: the medians, their difference (the added CPU) and
the ratio; the first round of each is a warm-up and not counted. The load average is printed: the
absolute numbers move with it, the difference much less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "kernel" / "src"))

SERVER = """
import sys, time
from clawkit.testing.server import ModelServer, Reply
with ModelServer() as srv:
    srv.script(lambda request: Reply.text("a large picture"))
    print(srv.url, flush=True)
    sys.stdin.read()  # until the parent closes it
"""


def big_png(size: int) -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    tail = chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    pad = size - len(head) - len(tail) - 12
    return head + chunk(b"zPAD", os.urandom(pad)) + tail  # an ancillary chunk: incompressible, as a photo is


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--mb", type=float, default=5.0)
    ap.add_argument("--wire", choices=("openai", "anthropic"), default="openai")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ.pop("CLAWKIT_LOAD_PLUGINS", None)
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp)
            photo = ws / "photo.png"
            photo.write_bytes(big_png(int(args.mb * 1024 * 1024)))
            model = "openai/test" if args.wire == "openai" else "anthropic/claude-test"
            (ws / "agent.yaml").write_text(f'name: bench\nmodel: {{name: {model}, api_base: "{url}", api_key: sk-test, '
                                           f'max_retries: 0, timeout: 60}}\ntools: []\nworkspace: "{ws}"\n')
            from clawkit.runtime import open_agent

            agent = open_agent(ws / "agent.yaml")
            plain: list[float] = []
            attached: list[float] = []
            try:
                for i in range(args.rounds + 1):
                    for attachments, into in (((), plain), ((photo,), attached)):
                        started = time.process_time()
                        result = agent.run("describe the picture", attachments=list(attachments) or None)
                        took = time.process_time() - started
                        assert result.reply == "a large picture", result
                        if i:
                            into.append(took)
            finally:
                agent.close()
            blobs = [p for p in (ws / ".clawkit" / "attachments").rglob("*") if p.is_file()]
    finally:
        server.stdin.close()
        server.wait(30)
    base, with_att = statistics.median(plain), statistics.median(attached)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds; {args.wire} wire; attachment {args.mb:g} MB; "
          f"blobs stored: {len(blobs)}")
    print(f"turn CPU without attachment: median {base * 1000:.1f} ms")
    print(f"turn CPU with attachment:    median {with_att * 1000:.1f} ms")
    print(f"added by the attachment:     {(with_att - base) * 1000:.1f} ms  (ratio {with_att / base:.2f}x)")


if __name__ == "__main__":
    main()
