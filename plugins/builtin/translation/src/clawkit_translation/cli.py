"""``clawkit translation stats | savings | route TEXT``."""

from __future__ import annotations

from clawkit import hookimpl

import json
import sys
from typing import Any


@hookimpl(specname="register_commands")
def add_commands(cli: Any) -> None:
    p = cli.command("translation", help="translation device: routing and transport metrics, token savings, route a message")
    sub = p.add_subparsers(dest="translation_cmd")
    st = sub.add_parser("stats", help="messages routed/encoded, artifacts stripped, transport compression ratio")
    st.add_argument("--json", action="store_true")
    sv = sub.add_parser("savings", help="tokens of ClawDense vs compact JSON vs CT/1 text on the built-in corpus")
    sv.add_argument("--encoding", default="cl100k_base", choices=["cl100k_base", "o200k_base", "p50k_base"])
    sv.add_argument("--json", action="store_true")
    rt = sub.add_parser("route", help="show how a message would be routed (intent, profile, confidence)")
    rt.add_argument("text")
    from clawkit.cli import add_workspace_options

    add_workspace_options(p)  # `translation stats --db PATH` / `--agent AGENT.yaml`
    p.set_defaults(handler=handle)


def handle(args: Any) -> int:
    cmd = getattr(args, "translation_cmd", None)
    if cmd == "stats":
        from clawkit.cli import workspace_db

        from . import metrics  # sqlite3: not on the ``clawkit --help`` path

        data = metrics.summary(metrics.read(str(workspace_db(args))))
        if args.json:
            print(json.dumps(data, indent=2))
        else:
            for k, v in data.items():
                print(f"{k:<26} {v if v is not None else '-'}")
        return 0
    if cmd == "savings":
        from .savings import report

        try:
            data = report(encoding_name=args.encoding)
        except Exception as exc:  # tiktoken files missing, typically
            print(f"clawkit translation savings: {exc}", file=sys.stderr)
            return 1
        if args.json:
            print(json.dumps(data, indent=2))
        else:
            t = data["tokens"]
            print(f"{data['messages']} messages, {data['encoding']}: json {t['json']}, ct1 {t['ct1']}, clawdense {t['clawdense']} tokens")
            print(f"ClawDense saves {data['savings_vs_json']}% vs compact JSON, {data['savings_vs_ct1']}% vs CT/1 text")
        return 0
    if cmd == "route":
        from . import route_message

        print(json.dumps(route_message(args.text).as_dict()))
        return 0
    print("usage: clawkit translation {stats,savings,route}", file=sys.stderr)
    return 2
