"""recall: pick the memories relevant to a user query and render them as a prompt.

Order of decisions:

1. caller already aborted, blank query, or no memory left after removing ``excluded_paths``
   → empty result (strategy ``none``);
2. the fast model chooses from the manifest (:mod:`.selector`). There is deliberately no short
   timeout: recall runs in the background and nobody waits for it. Only the caller's abort and
   a 30 s safety ceiling stop it;
3. the caller aborts → empty result, no fallback (the answer is no longer wanted);
4. model error, invalid answer or the ceiling → lexical fallback (BM25, :mod:`.lexical`);
5. a valid empty selection is final: the model said nothing fits, so no fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .abort import AbortLike
from .lexical import lexical_rank
from .render import render_memories
from .selector import MAX_SELECTED, SideQueryModel, select_memories
from .store import MemoryDoc, MemoryStore

log = logging.getLogger(__name__)

RecallStrategy = Literal["model", "lexical", "none"]
SAFETY_CEILING_S = 30.0


@dataclass(frozen=True, slots=True)
class RecallResult:
    prompt: str
    selected_docs: list[MemoryDoc] = field(default_factory=list)
    strategy: RecallStrategy = "none"
    #: Why the model's selection was not used (lexical fallback), or why recall stopped.
    note: str = ""

    @property
    def paths(self) -> list[str]:
        return [d.path for d in self.selected_docs]


EMPTY_RECALL = RecallResult(prompt="")


def _empty(note: str) -> RecallResult:
    return RecallResult(prompt="", note=note)


async def recall(
    project_root: str | os.PathLike[str],
    query: str,
    excluded_paths: Iterable[str] = (),
    abort: AbortLike | None = None,
    *,
    model: SideQueryModel | None,
    model_name: str,
    store: MemoryStore | None = None,
    memory_dir: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
    ceiling_s: float = SAFETY_CEILING_S,
    now: float | None = None,
) -> RecallResult:
    """The memory prompt for ``query``; never raises except ``CancelledError``.

    ``model`` ``None`` (no endpoint for side queries) goes straight to the lexical ranking.
    """
    if abort is not None and abort.is_set():
        return _empty("aborted")
    if not query.strip():
        return _empty("blank query")
    store = store or MemoryStore(project_root, memory_dir=memory_dir, home=home)
    docs = await asyncio.to_thread(store.scan)  # file I/O off the event loop
    excluded = set(excluded_paths)
    if excluded:
        docs = [d for d in docs if d.path not in excluded]
    if not docs:
        return _empty("no memories")
    if abort is not None and abort.is_set():
        return _empty("aborted")

    def finish(chosen: list[MemoryDoc], strategy: RecallStrategy, note: str = "") -> RecallResult:
        prompt = render_memories(chosen, project_root=store.project_root, home=home, now=now)
        return RecallResult(prompt, chosen, strategy, note)

    if model is None:
        return finish(lexical_rank(query, docs, MAX_SELECTED), "lexical", "no side-query model")

    selection = asyncio.ensure_future(select_memories(model, model_name, query, docs))
    watcher = asyncio.ensure_future(abort.wait()) if abort is not None else None
    started = time.monotonic()
    try:
        waiting: set[asyncio.Future[Any]] = {selection}
        if watcher is not None:
            waiting.add(watcher)
        await asyncio.wait(waiting, timeout=ceiling_s, return_when=asyncio.FIRST_COMPLETED)
        if abort is not None and abort.is_set():
            return _empty("aborted")
        if not selection.done():
            note = f"selector still running after the {ceiling_s:g} s safety ceiling"
        elif selection.exception() is not None:
            exc = selection.exception()
            note = f"selector failed: {type(exc).__name__}: {exc}"
        else:
            chosen = selection.result()
            log.debug(
                "recall: model chose %d memories in %.0f ms",
                len(chosen),
                (time.monotonic() - started) * 1000,
            )
            return finish(chosen, "model")
    finally:
        for fut in (selection, watcher):
            if fut is not None and not fut.done():
                fut.cancel()
        pending = [f for f in (selection, watcher) if f is not None]
        # Let the cancelled model request unwind (closes its HTTP stream) before returning.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.gather(*pending, return_exceptions=True)
    log.info("recall: %s; using the lexical fallback", note)
    return finish(lexical_rank(query, docs, MAX_SELECTED), "lexical", note)


class Recaller:
    """``recall`` bound to one project's configuration: what the prefetcher calls."""

    def __init__(
        self,
        project_root: str | os.PathLike[str],
        *,
        model: SideQueryModel | None,
        model_name: str,
        memory_dir: str | os.PathLike[str] | None = None,
        home: str | os.PathLike[str] | None = None,
        ceiling_s: float = SAFETY_CEILING_S,
        include_project: bool = True,
    ) -> None:
        self.project_root = Path(project_root).resolve()
        self.model = model
        self.model_name = model_name
        self.home = home
        self.ceiling_s = ceiling_s
        # An untrusted project's memory is the repository's text, not the person's notes.
        self.store = MemoryStore(
            self.project_root, memory_dir=memory_dir, home=home, include_project=include_project
        )

    async def __call__(
        self, query: str, excluded_paths: Iterable[str], abort: AbortLike | None
    ) -> RecallResult:
        return await recall(
            self.project_root,
            query,
            excluded_paths,
            abort,
            model=self.model,
            model_name=self.model_name,
            store=self.store,
            home=self.home,
            ceiling_s=self.ceiling_s,
        )
