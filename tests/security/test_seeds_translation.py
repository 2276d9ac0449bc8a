"""Issue 27 items 4 and 5 through the real CLI with every builtin loaded, against the public
ClosedClaw skills and ClawDense notation (tests/fixtures/closedclaw, MIT, licence kept there).

* item 5 — a message matching each of the seven ClosedClaw skills' Vibe triggers routes that
  skill and the model is sent its compiled section (old main: 3 of 7); a workspace weather skill
  beats the bundled ``weather`` on a weather question (old main: the bundled one won).
* item 4 — the outbound scrubber strips the notation's real lines (``@fs:r("/db/ledger.db")``,
  ``!auth:chk($UID, "DB_MIG")``, ``::save(chk_start)``, ``>>$sub(research)``, ``<= @fs:r p=a.py`` …)
  from what the user gets, while prose that merely contains ``@`` or ``?`` survives (old main:
  they all passed through).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import Cases, run_batch, write_agent

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parents[1] / "fixtures" / "closedclaw"

# one message per ClosedClaw skill, phrased from its Trigger line (not from its name)
TRIGGERED = {
    "automation": "Remind me every morning at 8am to water the plants",
    "browser": "Take a screenshot of the pricing page and fill in the signup form",
    "code": "Write a function that parses ISO dates and debug the failing test",
    "conversation": "Let's brainstorm some names for my new cat",
    "memory": "Remember that my sister's birthday is on May 3rd",
    "research": "Look up the population of Lisbon and give me the sources",
    "system": "List the files in my downloads directory and run a shell command to count them",
}

LOCAL_WEATHER = """# MANIFEST
id: local-weather
permissions:
  - capability: net.http
    allow: ["https://weather.example.org/*"]
---
# VIBE
**Purpose:** Weather from the household's own rooftop station.
**Trigger:** The user asks about the weather, the temperature, rain or wind at home or anywhere.
---
# CLAW-IDL
interface LocalWeatherArgs {
  place?: string;
}
"""

NOTATION = [  # lines of the public notation, each alone on a line of a reply
    '@fs:r("/db/ledger.db")',
    '!auth:chk($UID, "DB_MIG")',
    '!auth:chk($UID, "PRIV_DB_MIGRATE") -> GRANTED',
    '?fs:diff("/etc", $BASELINE_H)',
    "::save(chk_start)",
    "::hyd(chk_1m)  # Resume from 1M checkpoint",
    "?web:s(q=x)",
    ">>$sub(research)",
    ">>$sub(analyzer) [diff_results]",
    "<= @fs:r p=a.py",
    "<<$return(patched_engine.claws)",
    '@vault:w("audit_log_2026", $analyzer_report)',
    '!trigger:refactor(id: "stripe-manager", reason: "low_vibe_match")',
    '!chk($ROOT, "AUDIT_ALL")',
    "!grant(user, perm)",
]
PROSE = [  # prose that merely contains the sigils
    "Ping @alice: the report is ready?",
    "Is it done? Yes: @home, at 5pm.",
    "What about ::this, then?",
    "!important: read the notes first",
    "Mail me at bob@example.org (any time)?",
    "?",
    "@",
    "Use `@fs:r(path)` to read a file, as the docs say.",
]


CHILD = """\
subagents:
  researcher:
    agent: {name: researcher, model: {name: openai/child, api_base: "URL", api_key: sk-test, max_retries: 0, timeout: 20}, tools: [read_file, load_skill, "skill_*"]}
    description: Researches questions on the web
"""
ROUTE = "translation:\n  profiles:\n    research: {subagent: researcher}\n"


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, server, audit_home):
    root = tmp_path_factory.mktemp("seeds-translation")
    cases = Cases()
    server.reset()
    server.script(*([cases] * 100))
    jobs: list[dict[str, Any]] = []

    def job(name: str, message: str, reply: Any, files: dict[str, str] | None = None, extra: str = "",
            plugins: str = "", replies: tuple = ()) -> Path:
        ws = root / name
        write_agent(ws, server, ["read_file", "skills"], plugins, extra=extra)
        (ws / "skills").mkdir(exist_ok=True)
        for f in FIXTURES.joinpath("skills").glob("*.claws"):
            shutil.copy(f, ws / "skills" / f.name)
        for rel, text in (files or {}).items():
            (ws / rel).write_text(text)
        tag = cases.add(name, *(replies or (reply,)))
        jobs.append({"name": name, "cwd": str(ws), "argv": ["run", "agent.yaml", f"{message} {tag}", "--json"]})
        return ws

    for skill, message in TRIGGERED.items():
        job(f"route-{skill}", message, "ok")
    job("weather", "Will it rain this afternoon?", "ok", files={"skills/local-weather.claws": LOCAL_WEATHER})
    # the lead's first model call comes after the routed dispatch: the child answers first (step 0)
    job("child", TRIGGERED["research"], None, extra=CHILD.replace("URL", server.url), plugins=ROUTE,
        replies=("Lisbon has about 545,000 people (source: INE).", "The researcher says about 545,000."))
    job("notation", "Migrate the ledger", "Starting.\n" + "\n".join(NOTATION) + "\nMigration done.\n" + "\n".join(PROSE))
    return {"root": root, "cases": cases, "results": run_batch(jobs, audit_home, root)}


def _route(outcome: dict[str, Any], name: str) -> dict[str, Any]:
    from clawkit.sessions import SessionStore

    res = outcome["results"][name]
    assert res["rc"] == 0, res["stderr"][-3000:]
    store = SessionStore(outcome["root"] / name / ".clawkit" / "state.db")
    try:
        (event,) = store.events(res["json"]["session_id"], "translation.route")
    finally:
        store.close()
    return event["data"]


@pytest.mark.parametrize("skill", sorted(TRIGGERED))
def test_each_closedclaw_skill_trigger_routes_its_skill(outcome, skill):
    route = _route(outcome, f"route-{skill}")
    assert route["skills"][:1] == [skill], route
    purpose = next(line for line in (FIXTURES / "skills" / f"{skill}.claws").read_text().splitlines()
                   if line.startswith("**Purpose:**"))[len("**Purpose:** "):]
    seen = outcome["cases"].seen(f"route-{skill}")
    assert json.dumps(purpose)[1:-1][:60] in seen  # the model was sent the routed skill's compiled section


def test_a_workspace_skill_beats_the_bundled_one(outcome):
    route = _route(outcome, "weather")
    assert route["skills"][0] == "local-weather"
    assert "weather" not in route["skills"]  # shadowed: the workspace's skill does this job
    seen = outcome["cases"].seen("weather")
    assert "rooftop station" in seen  # its compiled section; the bundled one's is not sent (only its index line)
    assert "snow or a forecast for a place or time" not in seen


def test_the_scrubber_knows_the_real_notation(outcome):
    res = outcome["results"]["notation"]
    assert res["rc"] == 0, res["stderr"][-3000:]
    reply = res["json"]["reply"]
    for line in NOTATION:
        assert line not in reply
    assert reply.startswith("Starting.\nMigration done.\n")
    for line in PROSE:
        assert line in reply


def test_a_dispatched_child_works_with_the_routed_skill_and_decodes_the_record(outcome):
    from clawkit.sessions import SessionStore

    res = outcome["results"]["child"]
    assert res["rc"] == 0, res["stderr"][-3000:]
    reqs = outcome["cases"].requests["child"]
    child = [r for r in reqs if str(r.body.get("model")).endswith("child")]
    assert child, [r.body.get("model") for r in reqs]
    system = json.dumps(child[0].messages[0])
    assert "Web search, URL fetching, summarization" in system  # the routed skill's compiled section
    tools = [t["function"]["name"] for t in child[0].body.get("tools") or []]
    assert any(t.startswith("skill_research") or "research" in t for t in tools), tools  # and its tool
    call = next(c for c in res["json"]["tool_calls"] if c["name"] == "agent_researcher")
    assert call["blocked"] is False
    store = SessionStore(outcome["root"] / "child" / ".clawkit" / "state.db")
    try:
        child_session = next(s for s in store.list() if (store.load_metadata(s["id"]) or {}).get("subagent"))
        meta = store.load_metadata(child_session["id"])
        (decoded,) = store.events(child_session["id"], "translation.decoded")
    finally:
        store.close()
    assert meta["subagent"]["transport"] == "clawdense" and meta["subagent"]["skills"] == ["research"]
    assert decoded["data"]["verb"] == "TASK" and decoded["data"]["params"]["skills"] == "research"
    assert TRIGGERED["research"] in decoded["data"]["params"]["goal"]
