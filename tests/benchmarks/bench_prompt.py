"""Benchmark: assembling a system prompt from 500 contributors (goal: under 2 ms).

Run: .venv/bin/python tests/benchmarks/bench_prompt.py

Baseline, measured in the same run: rendering the same 500 sections with no
selection or budgeting (a plain "\\n\\n".join of pre-rendered strings), and a
naive selection that re-parses every tag on every build. Ratios are against
those; the absolute figure is what the 2 ms goal is about.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from clawkit.prompt import ContributorContext, PromptContributor, PromptSection, StaticContributor, Tag, assemble
from clawkit.types import SessionClassification

N = 500
REPEAT = 2000


class Dynamic(PromptContributor):
    """A contributor with a should_contribute filter and a rendered section."""

    def __init__(self, i: int):
        self.id = f"dyn{i:03d}"
        self.priority = i % 37
        self.tags = [Tag.parse(f"topic:{'coding' if i % 2 else 'research'}")]

    def should_contribute(self, ctx):
        return bool(ctx.tools)

    def contribute(self, ctx):
        return PromptSection(f"Dynamic {self.id}", f"tools: {len(ctx.tools)}; " + "d" * 150)


def make_contributors() -> list[PromptContributor]:
    out: list[PromptContributor] = []
    for i in range(N):
        if i % 5 == 0:
            out.append(Dynamic(i))
            continue
        tags = []
        if i % 3 == 1:
            tags = [f"domain:d{i % 25}", "complexity:hard"]
        elif i % 3 == 2:
            tags = ["topic:coding", f"custom:f{i % 7}"]
        out.append(StaticContributor(f"c{i:03d}", "x" * (120 + i % 200), heading=f"Section {i}", tags=tags,
                                     priority=i % 50, max_chars=250 if i % 4 == 0 else None))
    return out


def timed(fn, repeat: int) -> float:
    """Median of ``repeat`` runs, in milliseconds."""
    for _ in range(50):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e3


def main() -> int:
    contributors = make_contributors()
    ctx = ContributorContext(
        agent_id="bench", session_id="s", tools=["read_file", "write_file"], channel="cli", workspace=Path("."), model="m",
        classification=SessionClassification(topic="coding", complexity="hard", domain=["d1", "d4", "d9"], flags=["f3"]),
    )
    rendered = [c.contribute(ctx).render() for c in contributors]
    raw_tags = [[str(t) for t in c.tags] for c in contributors]

    def baseline_join():
        return "\n\n".join(rendered)

    def naive_select():  # re-parses tags each build, no budget, no report
        parts = []
        for c, tags in zip(sorted(contributors, key=lambda c: (c.priority, c.id)), raw_tags):
            if tags and not any(_naive_match(Tag.parse(t), ctx) for t in tags):
                continue
            parts.append(c.contribute(ctx).render())
        return "\n\n".join(parts)

    def full():
        return assemble(contributors, ctx, total_chars=120_000)

    def tight():
        return assemble(contributors, ctx, total_chars=8_000)  # most sections cut by budget

    result = full()
    included = sum(r.included for r in result.report)
    cut_result = tight()
    t_join = timed(baseline_join, REPEAT)
    t_naive = timed(naive_select, REPEAT // 4)
    t_full = timed(full, REPEAT)
    t_tight = timed(tight, REPEAT)
    print(f"contributors: {N}; included (120k budget): {included}; prompt {len(result.text)} chars")
    print(f"included with an 8k budget: {sum(r.included for r in cut_result.report)}; cut: {len(cut_result.cut)}")
    print(f"baseline join of pre-rendered sections : {t_join:8.3f} ms")
    print(f"naive select (tags re-parsed per build): {t_naive:8.3f} ms")
    print(f"assemble, 120k-char budget             : {t_full:8.3f} ms  ({t_full / t_join:5.1f}x join, {t_naive / t_full:4.1f}x faster than naive)")
    print(f"assemble, 8k-char budget (many cuts)   : {t_tight:8.3f} ms  ({t_tight / t_join:5.1f}x join)")
    goal = 2.0
    ok = max(t_full, t_tight) < goal
    print(f"goal < {goal} ms: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


def _naive_match(tag: Tag, ctx: ContributorContext) -> bool:
    from clawkit.prompt import tag_matches

    return tag_matches(tag, ctx)


if __name__ == "__main__":
    sys.exit(main())
