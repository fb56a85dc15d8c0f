"""What the model calls cost in tokens, and the speculation budget.

Every request the service makes (main turns, suggestions, recall) and every request a
speculation's worker makes (the speculative loop, the pipelined suggestion) reports its
usage here. Worker tokens are also kept per speculation, so ``specrun stats`` can say how
many went into speculations that were accepted and how many were thrown away, and so the
budget can stop new speculations once the tokens of a window are spent.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field

from protocol.model import PURPOSES
from protocol.wire.chat import Usage
from protocol.wire.control import BudgetInfo, BudgetWindow, SpeculationTokens, TokenCount

HOUR_S = 3600.0
# Tokens counted for each ended speculation stay here so the accepted/discarded split can
# be reported; a long-running service forgets the oldest ones (folded into the totals).
MAX_TRACKED_SPECULATIONS = 4096


@dataclass
class _TokenTally:
    """The running counts of one purpose's requests (``TokenCount`` once reported)."""

    requests: int = 0
    prompt: int = 0
    cached_prompt: int = 0
    completion: int = 0
    # prompt tokens of the last request the provider did not serve from its prefix cache
    last_uncached: int = 0

    def add(self, usage: Usage) -> None:
        self.last_uncached = usage.prompt_tokens - min(usage.cached_tokens, usage.prompt_tokens)
        self.requests += 1
        self.prompt += usage.prompt_tokens
        self.cached_prompt += min(usage.cached_tokens, usage.prompt_tokens)
        self.completion += usage.completion_tokens

    def frozen(self) -> TokenCount:
        return TokenCount(self.requests, self.prompt, self.cached_prompt, self.completion)


def spent(usage: Usage) -> int:
    """The tokens one request costs: prompt (cached or not) plus completion. Cached prompt
    tokens are usually billed for less, but they are billed; the split is in ``tokens``."""
    return usage.prompt_tokens + usage.completion_tokens


@dataclass
class Budget:
    """``speculationBudget`` tokens per window; 0 means no budget."""

    tokens: int = 0
    window: BudgetWindow = "hour"

    @property
    def enabled(self) -> bool:
        return self.tokens > 0


@dataclass
class CostLedger:
    budget: Budget = field(default_factory=Budget)
    by_purpose: dict[str, _TokenTally] = field(
        default_factory=lambda: {purpose: _TokenTally() for purpose in PURPOSES}
    )
    # Worker tokens per speculation id, and which of those speculations were accepted.
    per_speculation: dict[str, int] = field(default_factory=dict)
    accepted_ids: set[str] = field(default_factory=set)
    forgotten_accepted: int = 0
    forgotten_discarded: int = 0
    # (monotonic time, tokens) of each worker request in the last hour, for the budget.
    _recent: deque[tuple[float, int]] = field(default_factory=deque)
    _session_spent: int = 0

    def count(self, purpose: str, usage: Usage, speculation_id: str | None = None) -> None:
        """One finished request. ``speculation_id``: it was made by that speculation's
        worker (purposes ``speculation`` and ``pipelined``)."""
        self.by_purpose.setdefault(purpose, _TokenTally()).add(usage)
        if speculation_id is None:
            return
        tokens = spent(usage)
        self.per_speculation[speculation_id] = self.per_speculation.get(speculation_id, 0) + tokens
        if self.budget.enabled and self.budget.window == "hour":
            self._recent.append((time.monotonic(), tokens))
        self._session_spent += tokens
        self._forget_oldest()

    def accepted(self, speculation_id: str) -> None:
        self.accepted_ids.add(speculation_id)

    def average_speculation_tokens(self, ended_ids: Collection[str]) -> float | None:
        """What a speculation has cost on average, over those in ``ended_ids`` that spent
        anything; None before any did (an estimate for the budget of one more branch)."""
        spent_by = [self.per_speculation[i] for i in ended_ids if self.per_speculation.get(i)]
        return sum(spent_by) / len(spent_by) if spent_by else None

    def new_session(self) -> None:
        """A new chat session: a per-session budget starts again."""
        self._session_spent = 0

    # -- budget -------------------------------------------------------------------

    def budget_spent(self) -> int:
        if self.budget.window == "session":
            return self._session_spent
        cutoff = time.monotonic() - HOUR_S
        while self._recent and self._recent[0][0] < cutoff:
            self._recent.popleft()
        return sum(tokens for _, tokens in self._recent)

    def budget_exhausted(self) -> bool:
        return self.budget.enabled and self.budget_spent() >= self.budget.tokens

    def budget_info(self) -> BudgetInfo | None:
        if not self.budget.enabled:
            return None
        used = self.budget_spent()
        return BudgetInfo(self.budget.tokens, self.budget.window, used, used >= self.budget.tokens)

    # -- reporting ------------------------------------------------------------------

    def tokens(self) -> dict[str, TokenCount]:
        return {purpose: count.frozen() for purpose, count in self.by_purpose.items()}

    def speculation_tokens(self, pending_id: str | Collection[str] | None) -> SpeculationTokens:
        """``pending_id``: the speculation (or, with several branches, the speculations)
        of the current suggestion, not decided yet."""
        pending_ids = {pending_id} if isinstance(pending_id, str) else set(pending_id or ())
        accepted = self.forgotten_accepted
        discarded = self.forgotten_discarded
        pending = 0
        for spec_id, tokens in self.per_speculation.items():
            if spec_id in self.accepted_ids:
                accepted += tokens
            elif spec_id in pending_ids:
                pending += tokens
            else:
                discarded += tokens
        return SpeculationTokens(accepted + discarded + pending, accepted, discarded, pending)

    def _forget_oldest(self) -> None:
        while len(self.per_speculation) > MAX_TRACKED_SPECULATIONS:
            spec_id = next(iter(self.per_speculation))
            tokens = self.per_speculation.pop(spec_id)
            if spec_id in self.accepted_ids:
                self.accepted_ids.discard(spec_id)
                self.forgotten_accepted += tokens
            else:
                self.forgotten_discarded += tokens
