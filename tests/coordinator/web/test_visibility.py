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
    pages.opened("a")
    pages.seen("a", False)
    assert pages.report() == "unfocused"
    pages.seen("b", True)  # before its stream opened: kept, counted once it is open
    assert pages.report() == "unfocused"
    pages.opened("b")
    assert pages.report() == "present"
    pages.closed("b")
    assert pages.report() == "unfocused"
    clock.now += STALE_AFTER_S + 1  # "a" stopped reporting
    assert pages.report() == "gone"
    assert pages.report() is None  # said once


def test_a_closed_pages_last_word_does_not_count() -> None:
    """A closing tab says "hidden" as it goes; that may arrive after its stream closed."""
    pages = PageVisibility(Clock())
    pages.opened("a")
    pages.seen("a", True)
    assert pages.report() == "present"
    pages.closed("a")
    pages.seen("a", False)  # the unload's report, late
    assert pages.report() == "gone"
    assert pages.report() is None


def test_a_page_with_two_streams_counts_until_both_closed() -> None:
    pages = PageVisibility(Clock())
    pages.opened("a")
    pages.opened("a")  # reconnected before the old stream was noticed closed
    pages.seen("a", True)
    pages.closed("a")
    assert pages.report() == "present"
    pages.closed("a")
    assert pages.report() == "gone"


def test_page_ids_are_bounded() -> None:
    pages = PageVisibility()
    for n in range(MAX_PAGES + 10):
        pages.seen(f"p{n}", False)
    pages.opened("last")
    pages.seen("last", True)
    assert pages.report() == "present"
    assert len(pages._pages) == MAX_PAGES
