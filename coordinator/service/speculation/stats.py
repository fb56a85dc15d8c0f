"""Acceptance, time-saved and token metrics for `specrun stats`."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

from coordinator.service.speculation.cost import MAX_TRACKED_SPECULATIONS, CostLedger
from protocol.wire.control import (
    AcceptMethod,
    BranchCost,
    BranchSpend,
    CountByReason,
    StatsReply,
    TypingAccept,
)


@dataclass
class BranchRecord:
    """A speculation as one branch of a suggestion: its rank and the CPU seconds its
    worker's process tree used (read when it completed or just before it was killed)."""

    rank: int
    cpu_s: float = 0.0


@dataclass
class _Spend:
    tokens: int = 0
    cpu_s: float = 0.0

    def add(self, tokens: int, cpu_s: float) -> None:
        self.tokens += tokens
        self.cpu_s += cpu_s

    def frozen(self) -> BranchSpend:
        return BranchSpend(self.tokens, round(self.cpu_s, 4))


@dataclass
class Stats:
    shown: int = 0
    accepted: Counter[AcceptMethod] = field(default_factory=Counter)  # by method
    ignored: int = 0
    unused_streak: int = 0  # suggestions ignored since the last accept (for the backoff)
    suppressed: Counter[str] = field(default_factory=Counter)  # by reason
    made_on_return: int = 0  # skipped while nobody looked, predicted when someone came back
    completed: int = 0
    boundary: Counter[str] = field(default_factory=Counter)  # by reason
    aborted: int = 0
    failed: int = 0
    time_saved_s: list[float] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # suggestions not speculated, by why
    cost: CostLedger = field(default_factory=CostLedger)
    accepted_by_rank: Counter[int] = field(default_factory=Counter)
    accepted_by_typing: Counter[TypingAccept] = field(default_factory=Counter)
    # Every speculation as a branch (rank 0 when only one is asked for), by id; the
    # oldest are folded into ``_folded_*`` past MAX_TRACKED_SPECULATIONS.
    branches: dict[str, BranchRecord] = field(default_factory=dict)
    _folded_by_rank: dict[int, _Spend] = field(default_factory=dict)
    _folded_discarded: _Spend = field(default_factory=_Spend)

    def branch(self, speculation_id: str, rank: int) -> BranchRecord:
        """Start keeping a speculation's branch spending."""
        record = self.branches[speculation_id] = BranchRecord(rank)
        while len(self.branches) > MAX_TRACKED_SPECULATIONS:
            old_id = next(iter(self.branches))
            old = self.branches.pop(old_id)
            tokens = self.cost.per_speculation.get(old_id, 0)
            self._folded_by_rank.setdefault(old.rank, _Spend()).add(tokens, old.cpu_s)
            if old_id not in self.cost.accepted_ids:
                self._folded_discarded.add(tokens, old.cpu_s)
        return record

    def branch_cost(self, pending: Collection[str]) -> BranchCost:
        by_rank = {rank: _Spend(s.tokens, s.cpu_s) for rank, s in self._folded_by_rank.items()}
        discarded = _Spend(self._folded_discarded.tokens, self._folded_discarded.cpu_s)
        for spec_id, record in self.branches.items():
            tokens = self.cost.per_speculation.get(spec_id, 0)
            by_rank.setdefault(record.rank, _Spend()).add(tokens, record.cpu_s)
            if spec_id not in self.cost.accepted_ids and spec_id not in pending:
                discarded.add(tokens, record.cpu_s)
        return BranchCost(
            {rank: spend.frozen() for rank, spend in sorted(by_rank.items())}, discarded.frozen()
        )

    def reply(
        self, req_id: int, pending_speculation: str | Collection[str] | None = None
    ) -> StatsReply:
        """``pending_speculation``: the id of the current suggestion's speculation (or the
        ids of its branches' speculations), whose tokens are neither accepted nor thrown
        away yet."""
        pending = (
            {pending_speculation}
            if isinstance(pending_speculation, str)
            else set(pending_speculation or ())
        )
        saved = self.time_saved_s
        spec_tokens = self.cost.speculation_tokens(pending)
        per_1k = round(sum(saved) / (spec_tokens.total / 1000), 4) if spec_tokens.total else None
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
            accepted_by_rank=dict(sorted(self.accepted_by_rank.items())),
            accepted_by_typing=dict(self.accepted_by_typing),
            branch_cost=self.branch_cost(pending),
            suggestions_made_on_return=self.made_on_return,
        )
