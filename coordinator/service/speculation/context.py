"""What the parts of the speculation core are given and share (design §5).

Each part (``prediction``, ``scheduler``, ``runner``, ``acceptor``) takes one
``SpeculationContext`` and the one or two collaborators of its own, instead of the same
seven arguments each: the project, the settings, the main chat as a speculation forks it
(``ForkSource``), the stats, the shown suggestion, the background tasks and the chats
that say whether someone looks (``Viewers``). The context
itself never changes; what changes inside it (the stats, the shown suggestion) changes
through those objects' own methods.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from coordinator.service.speculation.stats import Stats
from coordinator.service.speculation.suggestion import ShownSuggestion
from coordinator.service.speculation.viewers import Viewers
from coordinator.settings import Settings
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import CacheSafeSnapshot, Message
from protocol.wire.control import ContextInfo

# Make these texts the shown suggestion (several: its ranked branches), visible after
# delay_s: the manager's ``offer``, which the prediction and the accept's pipeline call.
Offer = Callable[[str | Sequence[str], float], Awaitable[None]]


class ForkSource(Protocol):
    """The main chat as the speculation core sees it: what a speculation forks from
    (the cache-safe snapshot, the fast model, the approval mode) and where an accepted
    speculation's messages go."""

    @property
    def snapshot(self) -> CacheSafeSnapshot | None: ...

    @property
    def fast_model(self) -> str: ...

    @property
    def approval_mode(self) -> ApprovalMode: ...

    def model_turns(self) -> int: ...

    def context_info(self) -> ContextInfo:
        """The window and the estimate of a request over the snapshot's history."""
        ...

    @property
    def busy(self) -> bool:
        """A main turn is running (a speculation branch beyond the top one waits)."""
        ...

    def turn_slot(self) -> AbstractAsyncContextManager[object]:
        """Held while a turn runs, one at a time: an accept holds it while it applies
        files and records the messages, so a prompt sent meanwhile waits for it (and for
        the compaction the accepted turn may make due, which keeps it after the accept)."""
        ...

    async def extend_from_speculation(self, messages: list[Message]) -> None: ...

    async def forkable(self) -> None:
        """Until ``snapshot`` is the one to fork from: after an accept, once the
        compaction it made due is done (never the over-full history)."""
        ...


class Background:
    """The speculation core's background tasks, kept so shutdown can cancel and await them."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()

    def spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@dataclass(frozen=True)
class SpeculationContext:
    project_root: Path
    settings: Settings
    chat: ForkSource
    stats: Stats
    shown: ShownSuggestion = field(default_factory=ShownSuggestion)
    background: Background = field(default_factory=Background)
    viewers: Viewers = field(default_factory=Viewers)  # the chats, and whether anyone looks


class SpeculationPart:
    """A part of the speculation core that reads the shared context's members by name
    (``self.settings``, ``self.chat``, ...) instead of copying each into an attribute of
    its own, the same lines in every part."""

    def __init__(self, context: SpeculationContext) -> None:
        self.context = context

    @property
    def project_root(self) -> Path:
        return self.context.project_root

    @property
    def settings(self) -> Settings:
        return self.context.settings

    @property
    def chat(self) -> ForkSource:
        return self.context.chat

    @property
    def stats(self) -> Stats:
        return self.context.stats

    @property
    def shown(self) -> ShownSuggestion:
        return self.context.shown
