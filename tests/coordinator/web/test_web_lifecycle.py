"""The web view over a session's life, in a real browser: what a first page shows, a long
session (the page stays bounded and each event redraws only its turn), and the page when
the service or the view stops (it says so and what to do; the view ends cleanly)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.coordinator.e2e import Driver
from tests.support import Specrun, make_sample_project, running_service, wait_until
from tests.web_support import browser, need_chromium, open_page, web_view

# One Chromium for the module (tests/conftest.py): each test still gets a fresh context.
pytestmark = pytest.mark.usefixtures("shared_chromium")


def test_a_first_page_says_what_to_do_and_a_stopped_service_ends_it_cleanly(
    web_service: Specrun,
) -> None:
    with web_view(web_service, ends_itself=True) as web, browser() as context:
        page = open_page(context, web)
        # The first snapshot may be drawn just after the stream connected: wait for it
        # (read at once, it was sometimes still empty on a loaded machine).
        page.locator("#conversation", has_text="Nothing yet: send a prompt below").wait_for(
            timeout=20_000)
        assert page.locator("#suggestion").text_content() == "no suggestion"

        web_service.run("stop", check=True)
        page.wait_for_selector("#connection.bad >> text=service stopped", timeout=20_000)
        assert "prints a new URL" in (page.locator("#connection").text_content() or "")
        assert wait_until(lambda: web.proc.poll() is not None, timeout=20)
        assert web.proc.returncode == 0
        assert "Traceback" not in web.said() and "Error" not in web.said(), web.said()
        # Its terminal says why it ended, and what serves a new one.
        assert "The service stopped, and this web view with it" in web.said(), web.said()



def test_ctrl_c_on_the_view_tells_the_open_page_and_prints_no_traceback(
    web_service: Specrun,
) -> None:
    with web_view(web_service, ends_itself=True) as web, browser() as context:
        page = open_page(context, web)
        web.proc.send_signal(signal.SIGINT)
        page.wait_for_selector("#connection.bad >> text=this web view was stopped",
                               timeout=20_000)
        assert wait_until(lambda: web.proc.poll() is not None, timeout=20)
        assert web.proc.returncode == 0
        assert "Traceback" not in web.said() and "Error" not in web.said(), web.said()
    assert web_service.json("status")["pid"]  # the service goes on


LONG_TURNS = 260
PAGE_TURNS = 200  # MAX_BLOCKS in app.js


def test_a_long_session_keeps_the_page_bounded_and_redraws_only_the_turn_that_changed(
    tmp_path: Path,
) -> None:
    need_chromium()
    project = make_sample_project(tmp_path / "project")
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({
        "name": "long", "latency_ms": 1, "chunk_ms": 0, "models": ["scripted"],
        "rules": [
            {"when": {"purpose": "recall"}, "reply": {"json": {"selected_memories": []}}},
            {"when": {"purpose": "pipelined"}, "reply": {"json": {"suggestion": ""}}},
            {"when": {"purpose": "suggestion"}, "reply": {"json": {"suggestion": ""}}},
            {"when": {"last_user": "^turn"}, "reply": {"text": "an answer of a few words"}},
        ]}))
    with running_service(project, "--scenario", str(scenario)) as specrun, \
            web_view(specrun) as web, browser() as context:
        page = open_page(context, web)
        page.evaluate("""() => {
            window.drawn = 0;
            new MutationObserver((records) => {
                for (const r of records) window.drawn += r.addedNodes.length;
            }).observe(document.getElementById('conversation'), {childList: true});
        }""")
        driver = Driver(project)
        try:
            for n in range(LONG_TURNS):
                driver.ask(f"turn {n}")
        finally:
            driver.close()
        last = f"turn {LONG_TURNS - 1}"
        page.wait_for_function(
            f"() => document.getElementById('conversation').textContent.includes('{last}')",
            timeout=60_000)
        shown = page.evaluate("""() => ({
            blocks: document.getElementById('conversation').children.length,
            turns: state.turns.size,
            first: document.querySelector('#conversation .user').textContent,
            drawn: window.drawn,
        })""")
        assert shown["blocks"] == PAGE_TURNS and shown["turns"] == PAGE_TURNS
        assert shown["first"] == f"turn {LONG_TURNS - PAGE_TURNS}"  # the newest are kept
        # Each event replaced its own turn: a few nodes per event, never the whole list.
        assert shown["drawn"] < LONG_TURNS * 10, shown
