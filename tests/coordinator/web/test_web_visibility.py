"""The web view's pages say whether they are looked at (issue 35), in Chromium through a
real service on the scripted model: while the only page open is hidden (and no chat looks),
the next prompt is not predicted; when the page is shown again it is; a closed page no
longer counts, so nothing is skipped once it is gone."""

from __future__ import annotations

from typing import Any

from protocol.wire.control import SuggestionRequest
from tests.coordinator.e2e import FIX, NEG
from tests.support import Specrun, wait_until
from tests.web_support import browser, need_chromium, open_page, web_view

# The page's visibility as the browser would set it (a headless page is always visible),
# then the page's own report, awaited: the service has it when this returns.
SET_VISIBILITY = """(state) => {
  Object.defineProperty(document, "visibilityState", {configurable: true, get: () => state});
  document.dispatchEvent(new Event("visibilitychange"));
  return reportVisibility();
}"""


def _suppressed(specrun: Specrun) -> Any:
    return specrun.json("stats")["suggestions_suppressed"]["by_reason"]


def test_a_hidden_page_skips_the_prediction_and_a_shown_one_makes_it(specrun: Specrun) -> None:
    need_chromium()
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        with web_view(specrun) as view, browser() as context:
            page = context.new_page()
            page.goto(view.url)
            page.wait_for_selector("#connection.ok")
            page.evaluate(SET_VISIBILITY, "hidden")
            specrun.run("ask", FIX, check=True)
            shown = specrun.json("suggestion", "--wait")
            assert shown["text"] is None and shown["suppressed_reason"] == "unfocused"

            page.evaluate(SET_VISIBILITY, "visible")  # back: the prediction is made now
            page.wait_for_selector(f'.branch[data-rank="0"] >> text={NEG}', timeout=30_000)
            assert specrun.json("stats")["suggestions_made_on_return"] == 1

            page.evaluate(SET_VISIBILITY, "hidden")
            page.close()  # the last page closed: the view no longer counts
            assert wait_until(lambda: "gone" in specrun.run("logs", "-n", "200").stdout,
                              timeout=15)
            specrun.run("reject", check=True)
            specrun.run("ask", "what does multiply do?", check=True)
            assert specrun.json("suggestion", "--wait")["suppressed_reason"] != "unfocused"
            assert _suppressed(specrun) == {"unfocused": 1}
            assert specrun.query(SuggestionRequest)["suppressed_reason"] != "unfocused"
    finally:
        specrun.run("stop")


def test_a_closed_pages_late_hidden_word_skips_nothing(specrun: Specrun) -> None:
    """A closing tab says "hidden" as it goes, and that request can reach the view after the
    tab's event stream closed: it must not leave the gone page counting as unfocused."""
    import httpx

    need_chromium()
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        with web_view(specrun) as view, browser() as context:
            page = open_page(context, view)
            page_id = page.evaluate("PAGE_ID")
            page.close()
            assert wait_until(lambda: "gone" in specrun.run("logs", "-n", "200").stdout,
                              timeout=15)
            late = httpx.post(view.base + "/api/visibility", timeout=30,
                              json={"page": page_id, "visible": False},
                              headers={"cookie": view.cookie, "x-specrun-key": view.key,
                                       "origin": view.base})
            assert late.status_code == 200, late.text
            specrun.run("ask", FIX, check=True)
            shown = specrun.json("suggestion", "--wait")
            assert shown["suppressed_reason"] != "unfocused", shown
            assert shown["text"] == NEG
    finally:
        specrun.run("stop")
