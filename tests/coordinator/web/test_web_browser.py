"""The web view in a real browser, through a real service on the scripted model: a
speculation appears live with its diff; Accept puts its files on disk and the CLI sees the
accepted turn; Reject; a branch taken by its number (branch 1 the top guess, as the
command line numbers them); worker pids only on a `specrun --verbose web` page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.service.chat.history import HistoryStore
from tests.coordinator.e2e import FIX, NEG
from tests.support import Specrun, wait_until
from tests.web_support import browser, need_chromium, save_screenshot, web_view

# One Chromium for the module (tests/conftest.py): each test still gets a fresh context.
pytestmark = pytest.mark.usefixtures("shared_chromium")

NEG_FILE = "tests/test_calc_negative.py"


@pytest.fixture
def started(specrun: Specrun, request: pytest.FixtureRequest) -> Iterator[Specrun]:
    need_chromium()
    settings: dict[str, Any] = getattr(request, "param", {})
    if settings:
        specrun.env.own_settings(specrun.project).write_text(json.dumps(settings))
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        yield specrun
    finally:
        specrun.run("stop")


@pytest.fixture
def page(started: Specrun) -> Iterator[Any]:
    with web_view(started) as view, browser() as context:
        page = context.new_page()
        page.goto(view.url)
        # The token went into a cookie and out of the address bar.
        assert page.url == view.base + "/"
        page.wait_for_selector("#connection.ok")
        yield page


def _branch(page: Any, rank: int, status: str) -> Any:
    selector = f'.branch[data-rank="{rank}"] .badge.status-{status}'
    page.wait_for_selector(selector, timeout=30_000)
    return page.locator(f'.branch[data-rank="{rank}"]')


def test_a_prompt_sent_from_the_page_streams_and_its_speculation_shows_its_diff_then_accept_applies_it(  # noqa: E501
    started: Specrun, page: Any, tmp_path: Path
) -> None:
    page.fill("#prompt", FIX)
    page.click("#ask button")
    # The conversation streams: the prompt, the model's text, its tool calls.
    page.wait_for_selector(".turn .user >> text=" + FIX)
    page.wait_for_selector(".turn .tool >> text=edit src/calc.py")  # its file, then its diff
    page.wait_for_selector(".turn .end >> text=turn completed")
    assert "return a + b" in (started.project / "src/calc.py").read_text()

    branch = _branch(page, 0, "completed")
    assert branch.locator(".branch-text").inner_text() == NEG
    page.wait_for_selector(f'.branch[data-rank="0"] .file-head >> text=created: {NEG_FILE} +6 -0')
    added = branch.locator("pre.diff span.add")
    page.wait_for_function(
        "() => [...document.querySelectorAll('pre.diff span.add')]"
        ".some(s => s.textContent.includes('def test_add_negative_numbers'))"
    )
    assert "+    assert add(-2, -3) == -5" in added.all_inner_texts()
    assert branch.locator(".warn").count() == 0  # a test file does not run by itself
    steps = branch.locator(".steps .tool").all_inner_texts()
    assert any(s.startswith("✓ read_file(") and "[success]" in s for s in steps), steps
    # a write shows its file and its lines as a diff, not its arguments
    assert any(s.startswith(f"✓ write_file {NEG_FILE} [success]") for s in steps), steps
    page.wait_for_selector("#workers table tr >> nth=1")
    page.wait_for_selector("#containment li")
    # every layer, the main chat's backstop too (active here, or NOT active with its reason)
    page.wait_for_selector("#containment li >> text=chat_backstop:")
    page.wait_for_selector("#stats svg")
    assert not (started.project / NEG_FILE).exists(), "the speculation wrote the real tree"
    save_screenshot(page, "web.png", tmp_path)

    before = len(HistoryStore(started.project).load())
    branch.locator("button.accept").click()
    assert wait_until(lambda: (started.project / NEG_FILE).exists(), timeout=20)
    page.wait_for_selector("#action-result[data-ok=true]")
    # The CLI sees the accepted turn, taken by the page.
    stats = started.json("stats")
    assert stats["suggestions_accepted"] == 1
    assert stats["accepted_by_method"].get("web") == 1
    history = HistoryStore(started.project).load()
    assert history[before].role == "user" and history[before].text == NEG
    # And the page shows it as a turn of the conversation.
    page.wait_for_selector(".turn .end >> text=turn accepted (from the speculation)")


def test_reject_in_the_page_dismisses_the_suggestion_and_kills_its_speculation(
    started: Specrun, page: Any
) -> None:
    assert started.run("ask", FIX).returncode == 0
    branch = _branch(page, 0, "completed")
    assert branch.locator(".branch-text").inner_text() == NEG
    page.click("#reject")
    page.wait_for_selector("#suggestion >> text=no suggestion")
    shown = started.json("suggestion")
    assert shown["text"] is None
    assert started.json("stats")["suggestions_ignored"] == 1
    assert not (started.project / NEG_FILE).exists()


@pytest.mark.parametrize("started", [{"speculationBranches": 2}], indirect=True)
def test_accept_takes_the_branch_chosen_by_its_number(started: Specrun, page: Any) -> None:
    assert started.run("ask", FIX).returncode == 0
    page.wait_for_selector('.branch[data-rank="1"]', timeout=30_000)
    texts = page.locator(".branch .branch-text").all_inner_texts()
    assert texts == ["run the tests", NEG]
    # numbered as `specrun accept --branch N` takes them, never by the wire's 0-based rank
    badges = page.locator(".branch .branch-head .badge:first-child").all_inner_texts()
    assert badges == ["branch 1", "branch 2"], badges
    assert "--index" not in page.locator("#suggestion").inner_text()
    # the top guess's boundary in words, as the terminal says it, not its internal code
    top = _branch(page, 0, "boundary").locator(".warn").inner_text()
    assert top.startswith("stopped before the shell command `python -m pytest -q`"), top
    assert "shell:" not in top
    second = _branch(page, 1, "completed")
    second.locator("button.accept").click()
    assert wait_until(lambda: (started.project / NEG_FILE).exists(), timeout=20)
    stats = started.json("stats")
    assert stats["accepted_by_rank"] == {"1": 1}
    assert stats["accepted_by_method"].get("web") == 1
    last_user = [m for m in HistoryStore(started.project).load() if m.role == "user"][-1]
    assert last_user.text == NEG


def test_undo_in_the_page_takes_back_the_last_accept_and_names_a_file_changed_since(
    started: Specrun, page: Any, tmp_path: Path
) -> None:
    assert started.run("ask", FIX).returncode == 0
    fixed = (started.project / "src/calc.py").read_bytes()
    branch = _branch(page, 0, "completed")
    branch.locator("button.accept").click()
    assert wait_until(lambda: (started.project / NEG_FILE).exists(), timeout=20)
    page.wait_for_selector("#action-result[data-ok=true]")

    # Changed since: the page says which file and nothing is undone.
    (started.project / NEG_FILE).write_text("# mine\n")
    page.click("#undo")
    page.wait_for_selector(f"#action-result[data-ok=false] >> text={NEG_FILE}")
    assert (started.project / NEG_FILE).read_text() == "# mine\n"

    (started.project / NEG_FILE).unlink()
    page.click("#undo")  # the file is already gone: the accept is taken back at once
    page.wait_for_selector("#action-result[data-ok=true] >> text=Undid turn")
    page.click("#undo")  # then the fix's turn: src/calc.py as it was before it
    page.wait_for_selector("#action-result[data-ok=true] >> text=restored src/calc.py")
    assert (started.project / "src/calc.py").read_bytes() != fixed
    assert "return a - b" in (started.project / "src/calc.py").read_text()
    save_screenshot(page, "web-undo.png", tmp_path)
    assert started.json("undo", "--list")["checkpoints"] == []


def test_worker_pids_are_on_the_page_only_with_verbose(started: Specrun, page: Any) -> None:
    page.wait_for_selector("#workers table tr >> nth=1")
    heads = page.locator("#workers th").all_inner_texts()
    assert heads[0] == "state" and "pid" not in heads, heads
    pids = {str(w["pid"]) for w in started.json("workers")["workers"]}
    cells = set(page.locator("#workers td").all_inner_texts())
    assert pids and not pids & cells, cells
    with web_view(started, verbose=True) as view, browser() as context:
        verbose = context.new_page()
        verbose.goto(view.url)
        verbose.wait_for_selector("#connection.ok")
        verbose.wait_for_selector("#workers table tr >> nth=1")
        assert verbose.locator("#workers th").all_inner_texts()[0] == "pid"
        assert pids & set(verbose.locator("#workers td").all_inner_texts())
