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


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, server, audit_home):
    root = tmp_path_factory.mktemp("seeds-translation")
    cases = Cases()
    server.reset()
    server.script(*([cases] * 100))
    jobs: list[dict[str, Any]] = []

    def job(name: str, message: str, reply: Any, files: dict[str, str] | None = None) -> Path:
        ws = root / name
        write_agent(ws, server, ["read_file", "skills"])
        (ws / "skills").mkdir(exist_ok=True)
        for f in FIXTURES.joinpath("skills").glob("*.claws"):
            shutil.copy(f, ws / "skills" / f.name)
        for rel, text in (files or {}).items():
            (ws / rel).write_text(text)
        tag = cases.add(name, reply)
        jobs.append({"name": name, "cwd": str(ws), "argv": ["run", "agent.yaml", f"{message} {tag}", "--json"]})
        return ws

    for skill, message in TRIGGERED.items():
        job(f"route-{skill}", message, "ok")
    job("weather", "Will it rain this afternoon?", "ok", files={"skills/local-weather.claws": LOCAL_WEATHER})
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
