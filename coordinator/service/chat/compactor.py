"""When the main chat compacts its history, against which window: the trigger around
``compaction`` (which says how a history is summarized)."""

from __future__ import annotations

import asyncio
import logging
import time

from coordinator.service.chat import compaction
from coordinator.service.chat.context_meter import ContextMeter
from coordinator.service.chat.history import CompactionRecord, HistoryStore
from coordinator.service.emitter import Emitter
from protocol.model import ModelClient
from protocol.model.tokens import estimate_request
from protocol.wire.chat import Message, ToolSpec

log = logging.getLogger("specrun.chat")


class Compactor:
    """Compacts the main chat's history in place (the summary on disk first, as one
    compaction record) when it nears the window of ``context``."""

    def __init__(
        self,
        context: ContextMeter,
        store: HistoryStore,
        model: ModelClient,
        *,
        model_name: str,
        fast_model: str,
        window_known: bool,
        summarized: compaction.Summarized | None = None,
    ) -> None:
        self.context = context
        self.store = store
        self.model = model
        self.model_name = model_name
        self.fast_model = fast_model
        # The endpoint is asked once: at the service's start, or at first use if that
        # comes first; a turn starting meanwhile waits for that one answer.
        self._window_asked = window_known
        self._window_probe: asyncio.Task[None] | None = None
        self.last = ""  # what the last compaction did, in one sentence
        # The prompts and files of what the history's summary stands for (the session
        # loaded from disk gives the first), so a compaction reads only the part it cuts.
        self.summarized = summarized if summarized is not None else compaction.Summarized()

    async def resolve_window(self) -> None:
        """Ask the endpoint for the model's window once, unless the setting gives it."""
        if self._window_asked:
            return
        if self._window_probe is None:
            self._window_probe = asyncio.ensure_future(self._ask_window())
        await asyncio.shield(self._window_probe)  # a cancelled turn leaves the probe be

    async def _ask_window(self) -> None:
        reported = await self.model.context_window(self.model_name)
        self._window_asked = True
        if reported is not None and self.context.source == "default":
            self.context.window, self.context.source = reported, "endpoint"

    async def at_end_of_turn(
        self, out: Emitter, system: str, tools: tuple[ToolSpec, ...], history: list[Message]
    ) -> bool:
        """Compact when the next request would pass ``compactAt`` of the window."""
        if not self.due(system, tools, history):
            return False
        return await self.compact(out, system, tools, history)

    def due(self, system: str, tools: tuple[ToolSpec, ...], history: list[Message]) -> bool:
        """The next request over ``history`` would pass ``compactAt`` of the window."""
        return self.context.estimate(system, history, tools) > self.context.compact_threshold

    async def compact(
        self,
        out: Emitter,
        system: str,
        tools: tuple[ToolSpec, ...],
        history: list[Message],
        *,
        forced: bool = False,
        on_request: bool = False,
    ) -> bool:
        """Replace the oldest part of ``history`` by a summary; whether anything was
        compacted. ``forced``: after an overflow error, where a cut anywhere beats none."""
        context = self.context
        before = context.estimate(system, history, tools)
        keep = context.keep_tokens // (2 if forced else 1)
        cut = compaction.split_point(history, keep, on_request=on_request)
        if cut is None:
            log.info("nothing to compact (%d messages)", len(history))
            return False
        old, kept = history[:cut], history[cut:]
        summarized = self.summarized.plus(old)
        summary = await compaction.summarize(
            self.model,
            self.fast_model,
            old,
            input_tokens=context.window // 2,
            kept_facts=summarized.text(),
            on_wait=lambda wait: out.notice(wait.text),  # the person waits for it too
        )
        message = compaction.summary_message(summary.text)
        compacted = [message, *kept]
        after = estimate_request(system, compacted, tools)
        record = CompactionRecord(
            summary=message,
            kept=len(kept),
            summarized=len(old),
            tokens_before=before,
            tokens_after=after,
            created=time.time(),
            by=summary.by,
        )
        await asyncio.to_thread(self.store.append_compaction, record)
        history[:] = compacted
        self.summarized = summarized
        context.forget()
        context.last_estimate = after
        how = "" if summary.by == "model" else " (the fast model failed: kept the facts only)"
        self.last = (
            f"Compacted the conversation: {len(old)} earlier messages summarized{how}, "
            f"about {before:,} -> {after:,} tokens of the {context.window:,}-token window."
        )
        await out.notice(self.last)
        return True
