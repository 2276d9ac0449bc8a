"""The /panel in a real browser: Playwright driving Debian's Chromium against the real server.

Screenshots of every page go to ``$CLAWKIT_SCREENSHOTS`` (default: ``screenshots/`` beside this
file, git-ignored) so a person can look at what the panel shows.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from clawkit_serve.testing import make_key, serve, write_agent

pytestmark = pytest.mark.e2e
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic"]
SHOTS = Path(os.environ.get("CLAWKIT_SCREENSHOTS") or Path(__file__).parent / "screenshots")


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


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("panel")
    agent = write_agent(tmp, model, "helper", tools=["shell_exec", "list_dir"])
    db = tmp / "server.db"
    keys = {"full": make_key(db, "operator"), "read": make_key(db, "auditor", role="read")}
    served = serve([agent], db)
    try:
        yield served, keys
    finally:
        served.stop()


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def page(browser, site):
    served, keys = site
    context = browser.new_context(base_url=served.url, viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.set_default_timeout(30_000)
    yield p
    context.close()


def sign_in(page, key):
    page.goto("/panel/")
    page.fill("#key", key)
    page.click("#signin-button")
    page.wait_for_selector("#sessions")


def test_sign_in_rejects_a_wrong_key_and_accepts_a_real_one(page, site):
    served, keys = site
    page.goto("/panel/")
    shot(page, "01-sign-in")
    page.fill("#key", "ck_wrong_key")
    page.click("#signin-button")
    page.wait_for_selector("#signin-error:has-text('Sign-in failed')")
    sign_in(page, keys["full"])
    assert "operator (full)" in page.inner_text("#who")


def test_watch_a_turn_stream_then_approve_a_shell_exec_and_see_it_finish(page, site):
    served, keys = site
    sign_in(page, keys["full"])
    page.fill("#message", "say: streaming words arrive one by one")
    page.click("#new-turn button")
    page.wait_for_selector("#live:has-text('streaming words arrive one by one')")
    page.wait_for_selector("#turn-status:has-text('done')")
    page.wait_for_selector("#transcript .msg.assistant:has-text('streaming words')")
    shot(page, "02-session-streamed")

    page.fill("#message", "run: echo approved-in-browser")
    page.click("form.row button")
    card = page.wait_for_selector(".approval-card[data-tool='shell_exec']")
    text = card.inner_text()
    assert "risk: unsafe" in text and '"command": "echo approved-in-browser"' in text
    shot(page, "03-session-pending-approval")
    card.query_selector("button.approve").click()
    page.wait_for_selector("#transcript .msg.assistant:has-text('done:')")  # the transcript refreshes live
    assert "exit code 0" in page.inner_text("#transcript")
    shot(page, "04-session-approved-finished")


def test_deny_from_the_approvals_page(page, site, browser):
    import httpx
    import threading

    served, keys = site
    sign_in(page, keys["full"])
    page.click("#nav-approvals")
    page.wait_for_selector("#no-approvals, .approval-card")
    auth = {"Authorization": f"Bearer {keys['full']}"}
    sid = httpx.post(served.url + "/api/sessions", json={"agent": "helper"}, headers=auth).json()["session_id"]
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", httpx.post(
        f"{served.url}/api/sessions/{sid}/messages", json={"message": "run: echo denied-in-browser"}, headers=auth, timeout=60)))
    t.start()
    card = page.wait_for_selector(".approval-card:has-text('denied-in-browser')")  # arrives live
    shot(page, "05-approvals-pending")
    card.query_selector("button.deny").click()
    page.wait_for_selector(".approval-card .badge.bad:has-text('denied')")
    t.join(60)
    assert out["r"].json()["reply"].startswith("done: Error: not approved")
    shot(page, "06-approvals-denied")


def test_the_ledger_opens_verified_and_filters(page, site):
    served, keys = site
    sign_in(page, keys["read"])
    page.click("#nav-audit")
    badge = page.wait_for_selector("#verification")
    assert re.match(r"verified: \d+ records, chain intact", badge.inner_text())
    assert "ok" in badge.get_attribute("class")
    shot(page, "07-audit-verified")
    page.fill("#audit-filter input[name=decision]", "denied")
    page.click("#audit-filter button")
    page.wait_for_function("""() => { const rows = [...document.querySelectorAll('#audit tr')].slice(1);
        return rows.length > 0 && rows.every(r => r.innerText.includes('denied')); }""")
    shot(page, "08-audit-filtered")
