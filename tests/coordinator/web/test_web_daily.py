"""The web view as a daily driver (issue 35), in Chromium through a real service on the
scripted model: a command that exits non-zero shows failed, with its exit code."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.coordinator.test_chat_daily import FAILING, _scenario
from tests.support import Specrun
from tests.web_support import browser, need_chromium, web_view


@pytest.fixture
def page(specrun: Specrun, tmp_path: Path) -> Iterator[Any]:
    need_chromium()
    specrun.run("start", "--approval-mode", "auto-edit", "--scenario", str(_scenario(tmp_path)),
                check=True)
    try:
        with web_view(specrun) as view, browser() as context:
            page = context.new_page()
            page.goto(view.url)
            page.wait_for_selector("#connection.ok")
            yield page
    finally:
        specrun.run("stop")


def test_a_failed_command_shows_failed_with_its_exit_code(page: Any) -> None:
    page.fill("#prompt", FAILING)
    page.click("#ask button")
    page.wait_for_selector(".turn .end >> text=turn completed")
    shown = page.locator(".turn .tool").all_inner_texts()
    assert any(s.startswith("✗ run_shell_command(") and "[failed, exit 2]" in s
               for s in shown), shown
    assert page.locator(".turn .tool.tool-error").count() == 1
