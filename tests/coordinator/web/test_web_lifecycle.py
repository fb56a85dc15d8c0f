"""The web view over a session's life, in a real browser: what a first page shows, and the
page when the service stops (it says so and what to do; the view ends cleanly)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import Specrun, wait_until
from tests.web_support import browser, need_chromium, web_view


@pytest.fixture
def started(specrun: Specrun) -> Iterator[Specrun]:
    need_chromium()
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        yield specrun
    finally:
        specrun.run("stop")


def test_a_first_page_says_what_to_do_and_a_stopped_service_ends_it_cleanly(
    started: Specrun,
) -> None:
    with web_view(started, ends_itself=True) as web, browser() as context:
        page = context.new_page()
        page.goto(web.url)
        page.wait_for_selector("#connection.ok")
        empty = page.locator("#conversation").text_content() or ""
        assert "Nothing yet: send a prompt below" in empty
        assert page.locator("#suggestion").text_content() == "no suggestion"

        started.run("stop", check=True)
        page.wait_for_selector("#connection.bad >> text=service stopped", timeout=20_000)
        assert "prints a new URL" in (page.locator("#connection").text_content() or "")
        assert wait_until(lambda: web.proc.poll() is not None, timeout=20)
        assert web.proc.returncode == 0
        assert "Traceback" not in web.said() and "Error" not in web.said(), web.said()
