"""Acceptance and time-saved metrics for `specrun stats`."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from protocol.control import CountByReason, StatsReply


@dataclass
class Stats:
    shown: int = 0
    accepted: Counter[str] = field(default_factory=Counter)  # by method
    ignored: int = 0
    suppressed: Counter[str] = field(default_factory=Counter)  # by reason
    completed: int = 0
    boundary: Counter[str] = field(default_factory=Counter)  # by reason
    aborted: int = 0
    failed: int = 0
    time_saved_s: list[float] = field(default_factory=list)

    def reply(self, req_id: int) -> StatsReply:
        saved = self.time_saved_s
        return StatsReply(
            req_id=req_id,
            suggestions_shown=self.shown,
            suggestions_accepted=sum(self.accepted.values()),
            accepted_by_method=dict(self.accepted),
            suggestions_ignored=self.ignored,
            suggestions_suppressed=CountByReason(
                sum(self.suppressed.values()), dict(self.suppressed)
            ),
            speculations_completed=self.completed,
            speculations_boundary=CountByReason(sum(self.boundary.values()), dict(self.boundary)),
            speculations_aborted=self.aborted,
            speculations_failed=self.failed,
            time_saved_s=tuple(round(s, 4) for s in saved),
            time_saved_median_s=round(statistics.median(saved), 4) if saved else 0.0,
            time_saved_total_s=round(sum(saved), 4),
        )
