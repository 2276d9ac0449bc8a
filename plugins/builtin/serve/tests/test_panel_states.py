"""The panel's states in a real browser, in both storage modes: SQLite (turns run in the server)
and PostgreSQL (turns run on a ``clawkit worker``). Each state gets a screenshot in
``$CLAWKIT_SCREENSHOTS`` (default ``screenshots/`` beside this file, git-ignored), named
``<mode>-<state>.png``: a person looks at them.

The states: the session list (title, agent, status, last activity, tokens, cost), a session
waiting for approval (status, the approval card inline, the transcript so far, the timeline's
open approval bar), a finished session's timeline (model calls, a tool call, a sub-agent,
details on click) with the tool's own output and an "untrusted" badge, a read-only key (no
Send box, no approve buttons), and every page at 400 px wide without sideways scrolling.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest

from clawkit_serve.testing import make_key, serve, write_agent

pytestmark = pytest.mark.e2e
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic"]
SHOTS = Path(os.environ.get("CLAWKIT_SCREENSHOTS") or Path(__file__).parent / "screenshots")
NOTES = "hello from the notes file"


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (bash scripts/setup-system.sh)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class Site:
    def __init__(self, mode: str, url: str, keys: dict[str, str]):
        self.mode, self.url, self.keys = mode, url, keys
        self.auth = {"Authorization": f"Bearer {keys['full']}"}
        self.threads: list[threading.Thread] = []
        self.sessions: dict[str, str] = {}

    def session(self) -> str:
        return httpx.post(self.url + "/api/sessions", json={"agent": "helper"}, headers=self.auth, timeout=30).json()["session_id"]

    def turn(self, sid: str, message: str) -> dict:
        r = httpx.post(f"{self.url}/api/sessions/{sid}/messages", json={"message": message}, headers=self.auth, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()

    def waiting(self, message: str) -> str:
        """A session whose turn waits for approval of a shell_exec (the turn's request runs in a thread)."""
        sid = self.session()
        t = threading.Thread(target=lambda: httpx.post(f"{self.url}/api/sessions/{sid}/messages", json={"message": message},
                                                       headers=self.auth, timeout=300), daemon=True)
        t.start()
        self.threads.append(t)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if httpx.get(f"{self.url}/api/approvals?session={sid}", headers=self.auth, timeout=10).json()["approvals"]:
                return sid
            time.sleep(0.1)
        raise AssertionError(f"no approval arrived for session {sid}")

    def settle(self) -> None:
        for ap in httpx.get(self.url + "/api/approvals", headers=self.auth, timeout=10).json()["approvals"]:
            httpx.post(f"{self.url}/api/approvals/{ap['id']}", json={"decision": "deny"}, headers=self.auth, timeout=10)
        for t in self.threads:
            t.join(60)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def site(request, model, tmp_path_factory, browser):
    mode = request.param
    tmp = tmp_path_factory.mktemp(f"panel-{mode}")
    sub_ws = tmp / "ws-helper" / "research"
    sub_ws.mkdir(parents=True)
    (tmp / "ws-helper" / "notes.txt").write_text(NOTES + "\n", encoding="utf-8")
    researcher = write_agent(tmp, model, "researcher", tools=["list_dir"])
    data = json.loads(researcher.read_text())
    researcher.write_text(json.dumps({**data, "workspace": str(sub_ws)}), encoding="utf-8")
    agent = write_agent(tmp, model, "helper", tools=["shell_exec", "read_file", "list_dir"],
                        subagents={"researcher": {"agent": str(researcher), "description": "Looks things up."}})
    workers = None
    if mode == "postgres":
        server = request.getfixturevalue("postgres_server")
        db = server.server.create_database()
        from clawkit_workers.testing import Workers

        workers = Workers(str(db), [agent])
        workers.start(1)
    else:
        db = tmp / "server.db"
    keys = {"full": make_key(db, "operator"), "read": make_key(db, "auditor", role="read")}
    served = serve([agent], db)
    s = Site(mode, served.url, keys)
    try:
        sid = s.session()
        s.turn(sid, 'call: agent_researcher {"task": "say: the notes are fine"}')  # before untrusted content: no approval
        s.turn(sid, 'call: read_file {"path": "notes.txt"}')
        s.sessions["done"] = sid
        s.sessions["waiting"] = s.waiting("run: echo waiting-for-you")
        yield s
    finally:
        try:
            s.settle()
        finally:
            served.stop()
            if workers is not None:
                workers.stop_all()


def shot(page, site, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{site.mode}-{name}.png"), full_page=True)


def open_page(browser, site, key="full", width=1280):
    context = browser.new_context(base_url=site.url, viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto("/panel/")
    page.fill("#key", site.keys[key])
    page.click("#signin-button")
    page.wait_for_selector("#sessions")
    return page


def no_sideways_scroll(page):
    width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide in a {width[1]} px window"


def test_the_session_list_is_scannable(browser, site):
    page = open_page(browser, site)
    done = page.locator(f".session-row[data-id='{site.sessions['done']}']")
    waiting = page.locator(f".session-row[data-id='{site.sessions['waiting']}']")
    assert done.locator(".session-link").inner_text().startswith("call: agent_researcher")  # the first message, not an id
    meta = done.locator(".session-meta").inner_text()
    assert "idle" in meta and "helper" in meta and "ago" in meta and "cost" in meta
    assert int(done.locator(".tokens").inner_text().split()[0].replace(",", "")) > 0
    assert waiting.locator(".status").inner_text() == "waiting for approval"
    shot(page, site, "10-sessions")
    page.context.close()


def test_a_waiting_session_shows_its_state_the_card_inline_and_the_transcript(browser, site):
    page = open_page(browser, site)
    page.goto(f"/panel/#/session/{site.sessions['waiting']}")
    page.wait_for_selector("#turn-status:has-text('waiting for approval')")
    card = page.locator(".approval-card[data-tool='shell_exec']")
    assert "echo waiting-for-you" in card.inner_text() and card.locator("button.approve").count() == 1
    assert "run: echo waiting-for-you" in page.inner_text("#transcript")  # the turn so far, in both modes
    page.wait_for_selector("#timeline .tl-row.approval.st-pending")
    shot(page, site, "11-session-waiting")
    page.context.close()


def test_the_timeline_shows_each_turn_and_the_tool_output_as_the_tool_produced_it(browser, site):
    page = open_page(browser, site)
    page.goto(f"/panel/#/session/{site.sessions['done']}")
    page.wait_for_selector("#timeline details[open] .tl-row")
    kinds = page.eval_on_selector_all("#timeline .tl-row", "rows => rows.map(r => r.dataset.kind + ':' + r.dataset.name)")
    assert "tool:read_file" in kinds and "tool:agent_researcher" in kinds and "agent:researcher" in kinds
    assert sum(k.startswith("model:") for k in kinds) >= 4
    assert page.locator("#timeline details.turn").count() == 2
    page.locator("#timeline details.turn").first.locator("summary").click()  # open the first turn too
    page.locator("#timeline .tl-row.agent").click()
    page.locator("#timeline .tl-row[data-name='read_file']").click()
    details = page.locator("#timeline .tl-row[data-name='read_file'] + .bar-details")
    details.wait_for(state="visible")
    text = details.inner_text()
    assert NOTES in text and "UNTRUSTED DATA" not in text and "untrusted" in text and '"path": "notes.txt"' in text
    tool_msg = page.locator("#transcript .msg.tool", has=page.locator(".role", has_text="read_file"))
    assert tool_msg.locator(".badge.untrusted").count() == 1
    assert tool_msg.locator("pre").inner_text().strip() == NOTES  # the tool's output, not the model-facing wrapper
    shot(page, site, "12-session-timeline")
    page.context.close()


def test_a_read_only_key_gets_no_controls(browser, site):
    page = open_page(browser, site, key="read")
    assert page.locator("#new-turn").count() == 0
    page.goto(f"/panel/#/session/{site.sessions['waiting']}")
    page.wait_for_selector(".approval-card[data-tool='shell_exec']")
    assert page.locator("#send").count() == 0 and page.locator("#message").count() == 0
    assert page.locator(".approval-card button").count() == 0
    assert "waiting for someone with an approver key" in page.inner_text(".approval-card")
    shot(page, site, "13-read-only")
    page.context.close()


def test_every_page_works_at_400_px(browser, site):
    page = open_page(browser, site, width=400)
    no_sideways_scroll(page)
    shot(page, site, "14-narrow-sessions")
    page.goto(f"/panel/#/session/{site.sessions['done']}")
    page.wait_for_selector("#timeline details[open] .tl-row")
    page.locator("#timeline .tl-row.tool").last.click()
    no_sideways_scroll(page)
    shot(page, site, "15-narrow-timeline")
    page.goto(f"/panel/#/session/{site.sessions['waiting']}")
    page.wait_for_selector(".approval-card button.approve")
    no_sideways_scroll(page)
    shot(page, site, "16-narrow-waiting")
    page.goto("/panel/#/audit")
    page.wait_for_selector("#verification")
    no_sideways_scroll(page)
    assert page.locator("#audit td[data-label='tool']").count() > 0  # each record a labelled card
    shot(page, site, "17-narrow-audit")
    page.context.close()


def test_approving_inline_finishes_the_turn_and_the_status_follows(browser, site):
    sid = site.waiting("run: echo approved-inline")
    page = open_page(browser, site)
    page.goto(f"/panel/#/session/{sid}")
    page.wait_for_selector("#turn-status:has-text('waiting for approval')")
    page.locator(".approval-card button.approve").click()
    page.wait_for_selector("#transcript .msg.assistant:has-text('done:')")  # arrives without a reload
    page.wait_for_selector("#turn-status[data-status='idle'], #turn-status[data-status='done']")
    tool = page.locator("#transcript .msg.tool")
    assert "approved-inline" in tool.inner_text() and tool.locator(".badge.untrusted").count() == 1
    assert page.locator(".approval-card").count() == 0
    page.wait_for_selector("#timeline .tl-row.approval.st-approved")
    shot(page, site, "18-approved-inline")
    page.context.close()
