"""The web view as a daily driver (issue 35), in Chromium through a real service on the
scripted model: a command that exits non-zero shows failed, with its exit code."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.coordinator.test_chat_daily import FAILING, MARKDOWN, _scenario
from tests.support import Specrun
from tests.web_support import page_of_service, save_screenshot


@contextlib.contextmanager
def _connected_page(specrun: Specrun, tmp_path: Path, approval_mode: str) -> Iterator[Any]:
    """The web view of a service on the daily scenario, open and connected in a browser."""
    with page_of_service(specrun, "--approval-mode", approval_mode, "--scenario",
                         str(_scenario(tmp_path))) as page:
        yield page


@pytest.fixture
def page(specrun: Specrun, tmp_path: Path) -> Iterator[Any]:
    with _connected_page(specrun, tmp_path, "auto-edit") as connected:
        yield connected


def test_a_failed_command_shows_failed_with_its_exit_code(page: Any) -> None:
    page.fill("#prompt", FAILING)
    page.click("#ask button")
    page.wait_for_selector(".turn .end >> text=turn completed")
    shown = page.locator(".turn .tool").all_inner_texts()
    assert any(s.startswith("✗ run_shell_command(") and "[failed, exit 2]" in s
               for s in shown), shown
    assert page.locator(".turn .tool.tool-error").count() == 1


@pytest.fixture
def default_page(specrun: Specrun, tmp_path: Path) -> Iterator[Any]:
    with _connected_page(specrun, tmp_path, "default") as connected:
        yield connected


def _send(page: Any, text: str) -> None:
    page.fill("#prompt", text)
    page.click("#ask button")


def test_the_page_answers_approvals_once_for_the_session_or_no_with_a_reason(
    default_page: Any, specrun: Specrun, tmp_path: Path
) -> None:
    from coordinator.service.chat.history import HistoryStore

    page = default_page
    _send(page, "run the tests")
    question = page.wait_for_selector(".approval .approval-question", timeout=30_000)
    assert "python is not one of the commands specrun knows to be read-only" in (
        question.inner_text())
    assert page.locator(".approval .approval-call").inner_text() == (
        '{"command":"python -m pytest -q"}')  # the call exactly as the model wrote it
    save_screenshot(page, "approval.png", tmp_path)
    page.click("text=Yes, and allow this command for this session")
    page.wait_for_selector(".turn .end >> text=turn completed")
    page.wait_for_selector(".approval >> text=answered: Allowed for this session.")

    _send(page, "run the tests")  # asked no more
    page.wait_for_selector(".notice >> text=Allowed without asking")
    page.wait_for_function("() => document.querySelectorAll('.turn .end').length >= 2")
    assert page.locator(".approval").count() == 1

    _send(page, "commit this")
    page.wait_for_selector(".approval:not(:has(.muted)) .approval-reason")
    page.fill(".approval:not(:has(.muted)) .approval-reason", "not before review")
    page.click(".approval:not(:has(.muted)) button.deny")
    page.wait_for_function("() => document.querySelectorAll('.turn .end').length >= 3")
    errors = [r.error or "" for m in HistoryStore(specrun.project).load() if m.role == "tool"
              for r in m.tool_results]
    assert any("not before review" in e for e in errors), errors


def test_the_charts_say_what_they_show_and_counts_and_tokens_are_apart(
    page: Any, tmp_path: Path
) -> None:
    from tests.coordinator.e2e import FIX

    _send(page, FIX)
    page.wait_for_selector('.branch[data-rank="0"] .badge.status-completed', timeout=30_000)
    page.locator('.branch[data-rank="0"] button.accept').click()
    page.wait_for_selector(".turn .end >> text=turn accepted (from the speculation)")
    page.wait_for_selector("#stats .chart h3 >> text=Speculation tokens: kept vs lost")
    captions = page.locator("#stats .chart .caption").all_inner_texts()
    assert len(captions) == 6 and all(captions), captions
    assert any(c.startswith("Seconds each accept saved") for c in captions), captions
    time_chart = page.locator("#stats .chart").first.inner_text()
    assert "no accepts yet" not in time_chart  # one was accepted: its point is drawn
    save_screenshot(page, "charts.png", tmp_path)


def test_model_text_is_markdown_sanitized(page: Any, specrun: Specrun) -> None:
    assert specrun.run("ask", MARKDOWN).returncode == 0
    page.reload()  # the conversation as the snapshot has it
    page.wait_for_selector("#connection.ok")
    shown = page.wait_for_selector(".model.markdown")
    assert shown.eval_on_selector("strong", "n => n.textContent") == "bold"
    assert shown.eval_on_selector("code", "n => n.textContent") == "code"
    assert [li.inner_text() for li in shown.query_selector_all("li")] == ["one", "two"]
    # what the model wrote as HTML or a link is text, never an element
    assert shown.query_selector("img") is None and shown.query_selector("a") is None
    assert "<img src=x onerror=alert(1)>" in shown.inner_text()
