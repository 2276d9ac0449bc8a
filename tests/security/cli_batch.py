"""Run many ``clawkit`` command lines in one interpreter: ``python cli_batch.py JOBS.json OUT.json``.

Each job is ``{"cwd", "argv", "env"}``; it runs through ``clawkit.cli.main`` exactly as the
``clawkit`` script does (argument parsing, agent loading, the full plugin set, the real
provider), with its stdout and stderr captured. One interpreter pays the cold imports once."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time


def main() -> None:
    jobs = json.loads(open(sys.argv[1]).read())
    out = []
    base_env = dict(os.environ)
    from clawkit.cli import main as clawkit_main

    for job in jobs:
        os.environ.clear()
        os.environ.update(base_env)
        os.environ.update(job.get("env") or {})
        os.chdir(job["cwd"])
        stdout, stderr = io.StringIO(), io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                rc = clawkit_main(job["argv"])
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
            except BaseException as exc:  # a crash is a finding: report it, keep going
                rc = -1
                import traceback

                stderr.write("CRASH: " + "".join(traceback.format_exception(exc)))
        out.append({"name": job.get("name"), "rc": rc, "stdout": stdout.getvalue(), "stderr": stderr.getvalue(),
                    "seconds": round(time.monotonic() - started, 3)})
    with open(sys.argv[2], "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
