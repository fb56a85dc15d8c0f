"""Whether anyone looks at the web view's pages: each open page says whether it is visible
(``document.visibilityState``) when that changes and every ``PRESENCE_REFRESH_S``; the view
tells the service, for all its pages at once, as one more client that reports presence
(``PresenceRequest`` with the view's own pid): ``present`` when a page is visible,
``unfocused`` when every open page is hidden, and ``gone`` when the last one closed (then
the view does not count at all, as when no page was ever opened).

A page is known by the random id it made at load; it counts while its event stream is open
and it reported in the last three refresh periods (a page that stopped reporting, a frozen
background tab, say, stops counting). A report from a page whose stream is not open is kept
but does not count: a closing tab says "hidden" as it goes, and that word may arrive after
its stream closed (it must not leave a gone page looking unfocused, which would skip the
next predictions)."""

from __future__ import annotations

import time
from collections.abc import Callable

from protocol.wire.control import PRESENCE_REFRESH_S, PresenceReport

STALE_AFTER_S = 3 * PRESENCE_REFRESH_S
MAX_PAGES = 64  # more ids than this are a script, not a person's tabs: the oldest go


class PageVisibility:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pages: dict[str, tuple[bool, float]] = {}  # id -> (visible, reported at)
        self._open: dict[str, int] = {}  # id -> its event streams open now
        self._reported = False  # the service has heard from this view (and not "gone")

    def seen(self, page: str, visible: bool) -> None:
        self._pages.pop(page, None)
        self._pages[page] = (visible, self._clock())
        while len(self._pages) > MAX_PAGES:
            del self._pages[next(iter(self._pages))]

    def opened(self, page: str) -> None:
        """An event stream of ``page`` opened (a page reconnects with the same id)."""
        self._open[page] = self._open.get(page, 0) + 1

    def closed(self, page: str) -> None:
        """An event stream of ``page`` closed; with its last one, the page stops counting."""
        left = self._open.get(page, 0) - 1
        if left > 0:
            self._open[page] = left
            return
        self._open.pop(page, None)
        self._pages.pop(page, None)

    def report(self) -> PresenceReport | None:
        """What to tell the service now; None: nothing (it has heard nothing, or ``gone``)."""
        now = self._clock()
        live = [visible for page, (visible, at) in self._pages.items()
                if page in self._open and now - at <= STALE_AFTER_S]
        if live:
            self._reported = True
            return "present" if any(live) else "unfocused"
        if self._reported:
            self._reported = False
            return "gone"
        return None
