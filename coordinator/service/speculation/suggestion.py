"""The suggestion the person sees: one predicted next prompt, or with
``speculationBranches`` N > 1 up to N ranked ones, each a ``BranchRun`` with its own
speculation (``protocol.wire.control.Branch`` is what the wire says of a ``BranchRun``);
and ``ShownSuggestion``, which one is shown now."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.service.speculation.record import AbortCause, Speculation
from protocol.prompts.prediction import is_typed_prefix, matches_prompt
from protocol.text.inert_text import inert
from protocol.wire.control import Branch, SkipReason, SuppressReason

SUGGESTION_DELAY_MS = 300


@dataclass(eq=False)
class BranchRun:
    """One ranked guess of a suggestion and its speculation."""

    rank: int
    text: str
    speculation: Speculation | None = None
    skipped: SkipReason | None = None  # why it is not speculated
    # Why it was dropped while its speculation was being started (killed on arrival).
    dropped: AbortCause | None = None
    tried: bool = False  # its speculation was started (or could not be)

    @property
    def waiting(self) -> bool:
        """A branch beyond the top one neither started nor skipped: waiting for its turn
        (``branch_decision``). The top branch is never waiting: it starts at once."""
        return self.rank > 0 and not self.tried and self.skipped is None and not self.dropped

    def info(self) -> Branch:
        spec = self.speculation.info() if self.speculation else None
        return Branch(self.rank, self.text, spec, self.skipped)


class Suggestion:
    """``branches`` holds the live guesses in rank order (never empty: a suggestion whose
    last branch goes is dismissed); ``text``, ``speculation`` and ``skipped`` are the top
    live branch's."""

    def __init__(
        self,
        text: str | Sequence[str],
        *,
        delay_s: float = SUGGESTION_DELAY_MS / 1000,
        speculation: Speculation | None = None,
        skipped: SkipReason | None = None,
    ) -> None:
        texts = [text] if isinstance(text, str) else list(text)
        if not texts:
            raise ValueError("a suggestion needs at least one text")
        self.branches: list[BranchRun] = [BranchRun(rank, t) for rank, t in enumerate(texts)]
        self.branches[0].speculation = speculation
        self.branches[0].skipped = skipped
        self.created_at = time.monotonic()
        self.delay_s = delay_s
        self.settled = False  # its outcome (accepted / ignored) is recorded
        self.typed_prefix = False  # typing kept it alive (keepSpeculationWhileTyping)
        self.typed = ""  # the typed text last acted on (clients and tests can see it was)

    @property
    def top(self) -> BranchRun:
        return self.branches[0]

    @property
    def text(self) -> str:
        return self.top.text

    @property
    def speculation(self) -> Speculation | None:
        return self.top.speculation

    @speculation.setter
    def speculation(self, spec: Speculation | None) -> None:
        self.top.speculation = spec

    @property
    def skipped(self) -> SkipReason | None:
        return self.top.skipped

    @skipped.setter
    def skipped(self, reason: SkipReason | None) -> None:
        self.top.skipped = reason

    @property
    def visible(self) -> bool:
        return time.monotonic() - self.created_at >= self.delay_s

    def branch(self, rank: int) -> BranchRun | None:
        """The live branch of that rank, if any."""
        return next((b for b in self.branches if b.rank == rank), None)

    def shows(self, index: int | None, text: str, speculation_id: str) -> bool:
        """The branch ``index`` (None: the top one) is still the one a client showed: the
        same speculation, or when it showed none (not started yet, or skipped), the same
        text (as shown: made inert)."""
        branch = self.top if index is None else self.branch(index)
        if branch is None:
            return False
        if speculation_id:
            return branch.speculation is not None and branch.speculation.id == speculation_id
        return text in (branch.text, inert(branch.text))

    def speculations(self) -> list[Speculation]:
        return [b.speculation for b in self.branches if b.speculation is not None]

    def leading_to(self, typed: str) -> list[BranchRun]:
        """The branches ``typed`` is still a prefix of (case and whitespace ignored)."""
        return [b for b in self.branches if is_typed_prefix(typed, b.text)]

    def typed_match(self, text: str) -> BranchRun | None:
        """The best-ranked branch a submitted prompt equals (``matches_prompt``: case,
        whitespace and a final period ignored) whose speculation completed or still runs."""
        for branch in self.branches:
            spec = branch.speculation
            live = spec is not None and spec.status in ("running", "completed")
            if live and matches_prompt(text, branch.text):
                return branch
        return None


class ShownSuggestion:
    """The suggestion shown now (if any), why none is, and how many times the person
    moved on (a late suggestion for an earlier turn sees the count changed and stays
    away). The parts of the speculation core share this one object; only its methods
    change it. ``changed`` is set whenever what a client is shown may have changed: the
    live view, a layer above, waits on it (nothing here calls up into the live view)."""

    def __init__(self) -> None:
        self._current: Suggestion | None = None
        self._last_suppressed: SuppressReason | None = None
        self._moves = 0
        self.changed = asyncio.Event()

    @property
    def current(self) -> Suggestion | None:
        return self._current

    @property
    def last_suppressed(self) -> SuppressReason | None:
        return self._last_suppressed

    @property
    def moves(self) -> int:
        return self._moves

    def is_current(self, suggestion: Suggestion) -> bool:
        return self._current is suggestion

    def show(self, suggestion: Suggestion | None) -> None:
        """Show ``suggestion`` (None: none); a new one clears the last suppression."""
        self._current = suggestion
        if suggestion is not None:
            self._last_suppressed = None
        self.notify()

    def take(self) -> Suggestion | None:
        """The shown suggestion, no longer shown: an accept has it to itself."""
        taken, self._current = self._current, None
        self.notify()
        return taken

    def suppressed(self, reason: SuppressReason) -> None:
        """No suggestion after this turn, for ``reason``."""
        self._last_suppressed = reason

    def moved_on(self) -> None:
        """The person submitted something."""
        self._moves += 1

    def notify(self) -> None:
        """Something about the shown suggestion changed (a branch, a speculation's status)."""
        self.changed.set()
