"""Acceptance, time-saved and token metrics for `specrun stats`."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from coordinator.service.cost import CostLedger
from protocol.control import AcceptMethod, CountByReason, StatsReply


@dataclass
class Stats:
    shown: int = 0
    accepted: Counter[AcceptMethod] = field(default_factory=Counter)  # by method
    ignored: int = 0
    suppressed: Counter[str] = field(default_factory=Counter)  # by reason
    completed: int = 0
    boundary: Counter[str] = field(default_factory=Counter)  # by reason
    aborted: int = 0
    failed: int = 0
    time_saved_s: list[float] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # suggestions not speculated, by why
    cost: CostLedger = field(default_factory=CostLedger)

    def reply(self, req_id: int, pending_speculation: str | None = None) -> StatsReply:
        """``pending_speculation``: the id of the current suggestion's speculation, whose
        tokens are neither accepted nor thrown away yet."""
        saved = self.time_saved_s
        spec_tokens = self.cost.speculation_tokens(pending_speculation)
        per_1k = (
            round(sum(saved) / (spec_tokens.total / 1000), 4) if spec_tokens.total else None
        )
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
            tokens=self.cost.tokens(),
            speculation_tokens=spec_tokens,
            time_saved_per_1k_tokens_s=per_1k,
            speculations_skipped=CountByReason(sum(self.skipped.values()), dict(self.skipped)),
            speculation_budget=self.cost.budget_info(),
        )
