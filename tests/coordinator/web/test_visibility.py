"""``PageVisibility``: the web view's pages added up into one presence report."""

from __future__ import annotations

from coordinator.web.visibility import MAX_PAGES, STALE_AFTER_S, PageVisibility


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_pages_add_up_to_present_unfocused_then_gone_once() -> None:
    clock = Clock()
    pages = PageVisibility(clock)
    assert pages.report() is None  # no page ever: the view says nothing
    pages.seen("a", False)
    assert pages.report() == "unfocused"
    pages.seen("b", True)
    assert pages.report() == "present"
    pages.closed("b")
    assert pages.report() == "unfocused"
    clock.now += STALE_AFTER_S + 1  # "a" stopped reporting
    assert pages.report() == "gone"
    assert pages.report() is None  # said once


def test_page_ids_are_bounded() -> None:
    pages = PageVisibility()
    for n in range(MAX_PAGES + 10):
        pages.seen(f"p{n}", False)
    pages.seen("last", True)
    assert pages.report() == "present"
    assert len(pages._pages) == MAX_PAGES
