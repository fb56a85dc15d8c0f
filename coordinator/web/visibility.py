"""Whether anyone looks at the web view's pages: each open page says whether it is visible
(``document.visibilityState``) when that changes and every ``PRESENCE_REFRESH_S``; the view
tells the service, for all its pages at once, as one more client that reports presence
(``PresenceRequest`` with the view's own pid): ``present`` when a page is visible,
``unfocused`` when every open page is hidden, and ``gone`` when the last one closed (then
the view does not count at all, as when no page was ever opened).

A page is known by the random id it made at load; it counts while its event stream is open
and it reported in the last three refresh periods (a page that stopped reporting, a frozen
background tab, say, stops counting)."""

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
        self._reported = False  # the service has heard from this view (and not "gone")

    def seen(self, page: str, visible: bool) -> None:
        self._pages.pop(page, None)
        self._pages[page] = (visible, self._clock())
        while len(self._pages) > MAX_PAGES:
            del self._pages[next(iter(self._pages))]

    def closed(self, page: str) -> None:
        self._pages.pop(page, None)

    def report(self) -> PresenceReport | None:
        """What to tell the service now; None: nothing (it has heard nothing, or ``gone``)."""
        now = self._clock()
        live = [visible for visible, at in self._pages.values() if now - at <= STALE_AFTER_S]
        if live:
            self._reported = True
            return "present" if any(live) else "unfocused"
        if self._reported:
            self._reported = False
            return "gone"
        return None
