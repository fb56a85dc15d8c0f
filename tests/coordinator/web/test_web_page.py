"""The page as a person reads it (issue 35), in Chromium through a real service on the
scripted model: a reply is markdown while it still streams, and hostile text in it stays
text; a speculation that ran before the page was opened shows its steps."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.coordinator.e2e import FIX, NEG
from tests.coordinator.test_chat_daily import _scenario
from tests.support import Specrun, wait_until
from tests.web_support import browser, need_chromium, page_of_service, save_screenshot, web_view

pytestmark = pytest.mark.usefixtures("shared_chromium")

STREAMED = "explain it slowly"
# Markdown, then everything a hostile model could try on a page, streamed word by word.
STREAMED_REPLY = (
    "## What changed\n\n"
    "The **fix** is in `src/calc.py`:\n\n"
    "- `add` returned `a - b`\n"
    "- it returns `a + b` now\n\n"
    "```python\ndef add(a, b):\n    return a + b\n```\n\n"
    "<script>window.pwned = 'script'</script>\n\n"
    "<img src=x onerror=\"window.pwned = 'onerror'\"> "
    "[click me](javascript:window.pwned='link') "
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) "
    "![pixel](data:image/png;base64,iVBORw0KGgo=) "
    "<b onclick=\"window.pwned = 'click'\">raw html</b> "
    "<iframe srcdoc=\"<script>parent.pwned='frame'</script>\"></iframe>\n\n"
    # time for a loaded machine to look at the page before the turn ends
    + "Then a last paragraph, long enough that the reply is still streaming while the test "
    "looks at what came before it, on a machine as busy as a shared one can be, which "
    "takes a few seconds more of words. That is all."
)


def _streaming_scenario(tmp_path: Path) -> Path:
    """The daily scenario plus a markdown reply that streams for a few seconds."""
    path = _scenario(tmp_path)
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    data["rules"][0:0] = [
        {"name": "streamed markdown", "when": {"purpose": "main", "last_user": STREAMED},
         "reply": {"text": STREAMED_REPLY, "chunk_ms": 150}},
    ]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def streaming_page(specrun: Specrun, tmp_path: Path) -> Iterator[Any]:
    with page_of_service(specrun, "--approval-mode", "auto-edit", "--scenario",
                         str(_streaming_scenario(tmp_path))) as page:
        yield page


# What a reply's node shows, element by element (the boxes a streaming reply is drawn in
# aside): the same whether it streamed in or was loaded whole.
DRAWN = """(node) => [...node.querySelectorAll('*')]
    .filter((n) => !n.matches('.md-closed, .md-open, .md-part, .md-pending'))
    .map((n) => n.tagName + ': ' + n.textContent)"""


def _no_markup_from_the_model(page: Any) -> None:
    """Nothing the model wrote became an element that runs, loads or navigates, and no
    element in the conversation has an attribute the page did not give it."""
    found = page.evaluate("""() => {
        const box = document.getElementById('conversation');
        const bad = [...box.querySelectorAll('script, img, a, iframe, b, style, svg, object')]
            .map((n) => n.tagName);
        // the page's own boxes of a streaming reply aside
        const own = ':not(.md-closed):not(.md-open):not(.md-part):not(.md-pending)';
        const attributes = [...box.querySelectorAll('.markdown *' + own)]
            .filter((n) => n.attributes.length > 0).map((n) => n.outerHTML.slice(0, 80));
        return {bad, attributes, pwned: window.pwned || null, href: location.href};
    }""")
    assert found["bad"] == [] and found["attributes"] == [], found
    assert found["pwned"] is None, found
    assert found["href"].endswith("/"), found


def test_a_reply_is_markdown_while_it_streams_and_hostile_text_in_it_stays_text(
    streaming_page: Any, tmp_path: Path
) -> None:
    page = streaming_page
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.fill("#prompt", STREAMED)
    page.click("#ask button")
    # Still streaming (no end of turn yet): what came so far is already markdown.
    page.wait_for_selector(".turn .streaming li >> text=a + b now", timeout=30_000)
    assert page.locator(".turn .end").count() == 0, "the turn ended before it was looked at"
    streaming = page.locator(".turn .streaming")
    assert streaming.locator("h2").inner_text() == "What changed"
    assert streaming.locator("strong").first.inner_text() == "fix"
    assert [c for c in streaming.locator("li code").all_inner_texts()] == ["add", "a - b", "a + b"]
    # the hostile part streams in as text, inert, while the turn still runs
    page.wait_for_selector(".turn .streaming >> text=raw html", timeout=30_000)
    _no_markup_from_the_model(page)
    assert page.locator(".turn .end").count() == 0
    save_screenshot(page, "streaming.png", tmp_path)

    page.wait_for_selector(".turn .end >> text=turn completed", timeout=30_000)
    reply = page.locator(".turn .model.markdown").last
    assert "streaming" not in (reply.get_attribute("class") or "")
    assert reply.locator("pre code").inner_text().startswith("def add(a, b):")
    shown = reply.inner_text()
    assert "<script>window.pwned = 'script'</script>" in shown
    assert "<img src=x onerror=" in shown and "That is all." in shown
    assert "**" not in shown and "```" not in shown  # no raw markdown left
    _no_markup_from_the_model(page)
    # The page loaded again draws the same reply from the conversation's snapshot.
    streamed = reply.evaluate(DRAWN)
    page.reload()
    page.wait_for_selector("#connection.ok")
    assert page.locator(".turn .model.markdown").last.evaluate(DRAWN) == streamed
    save_screenshot(page, "hostile.png", tmp_path)
    _no_markup_from_the_model(page)
    assert dialogs == []


def _completed_speculation(specrun: Specrun) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def completed() -> bool:
        branches = specrun.json("suggestion").get("branches") or []
        spec = branches[0].get("speculation") if branches else None
        if spec and spec["status"] == "completed":
            found.update(spec)
            return True
        return False

    assert wait_until(completed, timeout=30)
    return found


def test_a_speculation_that_ran_before_the_page_was_opened_shows_its_steps(
    specrun: Specrun, tmp_path: Path
) -> None:
    need_chromium()
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        assert specrun.run("ask", FIX).returncode == 0
        spec = _completed_speculation(specrun)  # before any page watched
        assert spec["tool_uses"] >= 1 and spec["turns"] >= 2, spec
        with web_view(specrun) as view, browser() as context:
            page = context.new_page()
            page.goto(view.url)
            page.wait_for_selector('.branch[data-rank="0"] .badge.status-completed')
            branch = page.locator('.branch[data-rank="0"]')
            assert branch.locator(".branch-text").inner_text() == NEG
            steps = branch.locator(".steps")
            tools = steps.locator(".tool").all_inner_texts()
            assert any(t.startswith("✓ read_file(") for t in tools), tools
            # a write as its file and its lines, the folded rest of a long read a click away
            assert any(t.startswith("✓ write_file tests/test_calc_negative.py [success]")
                       for t in tools), tools
            added = [t.strip() for t in steps.locator("pre.diff span.add").all_inner_texts()]
            assert "+def test_add_negative_numbers():" in added, added
            read = steps.locator(".tool", has_text="read_file").first
            assert read.locator("details summary").inner_text() == "6 more line(s)"
            assert "def test_multiply" not in read.inner_text()  # folded
            read.locator("details summary").click()
            assert "def test_multiply" in read.inner_text()
            texts = steps.locator(".model").all_inner_texts()
            assert texts[0] == "I'll follow the style of the existing tests.", texts
            # the model's text in steps is markdown too: `name` is code
            assert "test_add_negative_numbers" in steps.locator(".model code").all_inner_texts()
            # the order is the speculation's: text, its read, the write, the last text
            order = page.evaluate("""() => [...document.querySelectorAll(
                '.branch[data-rank="0"] .steps > *')].map((n) => n.classList.contains('tool')
                ? n.textContent.split(/[ (]/).slice(0, 2).join(' ') : 'text')""")
            assert order == ["text", "✓ read_file", "✓ write_file", "text"], order
            time.sleep(0.5)  # a step sent again as an event must not double it
            assert branch.locator(".steps > *").count() == 4
            save_screenshot(page, "steps.png", tmp_path)
    finally:
        specrun.run("stop")


def test_every_reason_for_no_suggestion_is_said_in_words_on_the_page() -> None:
    import re
    import typing

    from protocol.wire.control import SuppressReason

    def leaves(kind: object) -> set[str]:
        args = typing.get_args(kind)
        return {a for a in args if isinstance(a, str)} | {
            leaf for a in args if not isinstance(a, str) for leaf in leaves(a)}

    script = (Path(__file__).resolve().parents[3] / "coordinator/web/static/app.js").read_text()
    table = script[script.index("const SUPPRESSED = {"):].split("};", 1)[0]
    said = set(re.findall(r"(\w+): \"", table))
    assert leaves(SuppressReason) <= said, leaves(SuppressReason) - said
