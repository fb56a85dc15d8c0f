"""One speculation: the record the service keeps of it, and the moves its status can make.

Only ``Speculation.move_to`` changes a status, and only along ``MOVES``: a late or
repeated end (an abort after a failure, a second abort) changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from coordinator.boundary_text import describe_boundary
from coordinator.service.pool import WorkerHandle
from coordinator.service.speculation.preview import Progress
from protocol.wire.boundary import BoundaryReason
from protocol.wire.control import SpeculationInfo, SpeculationStatus
from protocol.wire.work import SpeculationOutcome

log = logging.getLogger("specrun.speculation")

# An abort marks any speculation not yet decided ``aborted`` (design §5 "Abort"), a completed
# or boundary one too: its worker is killed and its overlay removed all the same.
MOVES: Final[dict[SpeculationStatus, frozenset[SpeculationStatus]]] = {
    "running": frozenset({"completed", "boundary", "failed", "aborted"}),
    "completed": frozenset({"accepted", "aborted"}),
    "boundary": frozenset({"aborted"}),
    "failed": frozenset(),
    "aborted": frozenset(),
    "accepted": frozenset(),
}
# Every status but ``running``: the speculative loop is over (``finished`` is set).
TERMINAL: Final = frozenset(get_args(SpeculationStatus)) - {"running"}
# Why a speculation is aborted (the callers of ``SpeculationManager.abort``).
AbortCause = Literal[
    "replaced",  # a new suggestion takes its place
    "user typed something else",
    "rejected",  # `specrun reject`, Esc
    "reset",
    "accepted before completion",  # accepted while running or at a boundary: a normal turn
    "shutdown",
    "another branch accepted",  # speculationBranches > 1: the person took another guess
    "cancelled",  # Ctrl-C while a typed prompt waited for its running speculation
    "undo",  # `specrun undo`: the files or the conversation it was made for went back
]


@dataclass(eq=False)
class Speculation:
    """A suggested prompt being run ahead on a worker, and what its worker reported."""

    id: str
    suggestion: str
    rank: int = 0  # the branch it speculates (0: the top guess)
    overlay_dir: str = ""
    status: SpeculationStatus = "running"
    started_at: float = field(default_factory=time.monotonic)
    ended_at: float | None = None
    worker: WorkerHandle | None = None
    turns: int = 0
    tool_uses: int = 0
    boundary_reason: BoundaryReason | None = None
    error: str | None = None
    abort_cause: AbortCause | None = None
    outcome: SpeculationOutcome | None = None
    pipelined: str | None = None
    pipelined_alternatives: tuple[str, ...] = ()  # with speculationBranches > 1, best first
    pipelined_done: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    progress: Progress = field(default_factory=Progress)  # what its worker reported so far

    def move_to(self, status: SpeculationStatus) -> bool:
        """Change the status if ``MOVES`` allows it; False (and no change) if not."""
        if status not in MOVES[self.status]:
            if status != self.status:
                log.debug("speculation %s stays %s (not %s)", self.id, self.status, status)
            return False
        self.status = status
        self.ended_at = self.ended_at or time.monotonic()
        self.finished.set()
        return True

    @property
    def elapsed_s(self) -> float:
        return (self.ended_at or time.monotonic()) - self.started_at

    @property
    def abortable(self) -> bool:
        return "aborted" in MOVES[self.status]

    def describe(self) -> str:
        """Why it cannot be accepted, as the fallback notice says it."""
        if self.status == "boundary":
            return describe_boundary(self.boundary_reason)
        if self.status == "failed":
            return f"failed ({self.error})"
        return f"was {self.status}"

    def info(self) -> SpeculationInfo:
        files = tuple(self.outcome.written_files) if self.outcome else ()
        return SpeculationInfo(
            id=self.id,
            status=self.status,
            turns=self.turns,
            tool_uses=self.outcome.tool_use_count if self.outcome else self.tool_uses,
            files_written=files,
            boundary_reason=self.boundary_reason.text() if self.boundary_reason else None,
            elapsed_s=round(self.elapsed_s, 4),
            worker_pid=self.worker.pid if self.worker else None,
            pipelined_suggestion=self.pipelined,
            boundary=self.boundary_reason,
        )
