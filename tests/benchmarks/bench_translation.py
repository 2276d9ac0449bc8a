"""Translation device benchmarks: intent classification time and ClawDense token savings.

Run: ``.venv/bin/python tests/benchmarks/bench_translation.py``

* classification: per message, over a mix of short and long requests; goal < 1 ms.
  Baseline in the same run: one ``str.lower()`` + ``split()`` of the same messages
  (the least any keyword router must do), and the full routing with skill matching.
* token savings (tiktoken, offline encodings bundled with litellm): the built-in
  corpus of realistic inter-agent messages as compact JSON (the baseline), CT/1
  text and ClawDense; goal ≥ 40% fewer tokens than compact JSON.
* codec speed: encode+decode per message, against ``json.dumps``+``json.loads``.
* outbound scrubbing: chars/s on ordinary prose, streamed in 8-char chunks, against
  a plain ``str.join`` of the same chunks.
"""

from __future__ import annotations

import json
import statistics
import time

from clawkit_translation import route_message
from clawkit_translation.clawdense import ClawDense
from clawkit_translation.router import IntentRouter, SkillInfo
from clawkit_translation.savings import CORPUS_LEXICON, corpus, report
from clawkit_translation.scrubber import scrub_chunks

MESSAGES = [
    "what's the weather in Paris?",
    "search the web for nodejs vulnerabilities published this year",
    "fix the bug in app.py: the retry loop never stops when the server returns 503",
    "remember that I prefer aisle seats and KLM",
    "open https://status.example.com and tell me if the EU region is degraded",
    "remind me every morning at 8am to check the deploy dashboard",
    "restart the nginx service and show me the last 50 lines of its log",
    "hi! how are you today?",
    "Here is a long pasted traceback:\n" + "  File \"app.py\", line 12, in run\n    do()\n" * 40 + "ValueError: bad state",
    "Can you compare SQLite WAL and rollback journal durability, summarize the trade-offs, and cite sources? " * 5,
]
SKILLS = [SkillInfo(n, d) for n, d in [
    ("weather", "Current weather and short forecasts for any place"), ("web-research", "Research a topic on the web and cite sources"),
    ("git-commit", "Write a conventional commit message from the staged diff"), ("code-review", "Review a change for bugs and style"),
    ("github-issues", "List, search and triage GitHub issues"), ("summarize", "Summarize a document or web page"),
]]


def per_call_us(fn, items, rounds=300) -> float:
    for it in items:
        fn(it)
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for it in items:
            fn(it)
        samples.append((time.perf_counter() - t0) / len(items))
    return statistics.median(samples) * 1e6


def main() -> None:
    router = IntentRouter()
    base = per_call_us(lambda m: m.lower().split(), MESSAGES)
    cls = per_call_us(router.classify, MESSAGES)
    full = per_call_us(lambda m: route_message(m, skills=SKILLS, tools=["read_file", "web_search"]), MESSAGES)
    worst = max(per_call_us(router.classify, [m], rounds=100) for m in MESSAGES)
    print("intent classification (median per message)")
    print(f"  baseline lower()+split()      {base:8.1f} µs")
    print(f"  classify                      {cls:8.1f} µs   ({cls / base:.1f}x baseline)   goal < 1000 µs: {'OK' if cls < 1000 else 'MISSED'}")
    print(f"  worst single message          {worst:8.1f} µs")
    print(f"  full route (+ skills, tools)  {full:8.1f} µs")

    print("\ntoken savings on the inter-agent corpus (tiktoken)")
    for enc in ("cl100k_base", "o200k_base"):
        for label, lex in (("defaults + link lexicon", CORPUS_LEXICON), ("default lexicon only", None)):
            r = report(lexicon=lex, encoding_name=enc)
            t = r["tokens"]
            print(f"  {enc:<12} {label:<24} json {t['json']:5d}  ct1 {t['ct1']:5d}  clawdense {t['clawdense']:5d}   "
                  f"vs json -{r['savings_vs_json']}%  vs ct1 -{r['savings_vs_ct1']}%  (ct1 vs json -{r['ct1_savings_vs_json']}%)")
    r = report()
    print(f"  {r['messages']} messages; chars: json {r['chars']['json']}, ct1 {r['chars']['ct1']}, clawdense {r['chars']['clawdense']} "
          f"(ratio vs json {r['chars']['clawdense'] / r['chars']['json']:.2f}); goal ≥ 40% tokens vs json: "
          f"{'OK' if r['savings_vs_json'] >= 40 else 'MISSED'}")

    from clawkit_translation.ct1 import NO_PAYLOAD

    ctrl = [m for m in corpus() if m.payload is NO_PAYLOAD and not any(isinstance(v, str) and " " in v for _, v in m.params)]
    rc = report(ctrl)
    print(f"  control messages only ({rc['messages']}: no free text, no payload): json {rc['tokens']['json']}, "
          f"clawdense {rc['tokens']['clawdense']}  vs json -{rc['savings_vs_json']}%")

    msgs = corpus()
    codec = ClawDense(CORPUS_LEXICON)
    dense = [codec.encode(m) for m in msgs]
    js = [m.to_json() for m in msgs]
    c = per_call_us(lambda i: codec.decode(codec.encode(msgs[i])), range(len(msgs)), rounds=30)
    j = per_call_us(lambda i: json.loads(json.dumps(json.loads(js[i]), separators=(",", ":"))), range(len(msgs)), rounds=30)
    print("\ncodec (encode + decode per message)")
    print(f"  json dumps+loads baseline     {j:8.1f} µs")
    print(f"  clawdense encode+decode       {c:8.1f} µs   ({c / j:.1f}x baseline)")
    assert all(codec.decode(d) == m for d, m in zip(dense, msgs))

    prose = ("Here is the plan: first we read the config, then we patch it.\n- item one\n- item two with a:b(c)\n"
             "Write to support@example.com if anything breaks.\n```python\nx = f(a)\n```\n") * 200
    chunks = [prose[i:i + 8] for i in range(0, len(prose), 8)]
    t0 = time.perf_counter()
    "".join(chunks)
    t_join = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = scrub_chunks(chunks)
    t_scrub = time.perf_counter() - t0
    assert out == prose
    print("\noutbound scrubbing, streamed in 8-char chunks")
    print(f"  {len(prose) / t_scrub / 1e6:.2f} MB/s ({t_scrub / len(chunks) * 1e6:.1f} µs per chunk; plain join {t_join * 1e6:.0f} µs total)")


if __name__ == "__main__":
    main()
