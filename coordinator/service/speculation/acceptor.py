"""Accept: take a branch of the shown suggestion, apply its speculation's files and give
the main chat its messages, then offer its pipelined suggestion (Tab-Tab-Tab).

The files go first (all or nothing), then the history, so a failed apply leaves neither;
a small pending record written before the files settles a crash between the two at the
next start (``pending_accept``). The overlay goes in every case.
"""

from __future__ import annotations

import asyncio
import logging
import time

import overlay
from coordinator.service.emitter import Emitter
from coordinator.service.speculation.applied_set import (
    AppliedSet,
    RefusedReport,
    SpeculationFiles,
    held_summary,
)
from coordinator.service.speculation.context import Offer, SpeculationContext, SpeculationPart
from coordinator.service.speculation.pending_accept import (
    GONE,
    LINK_MARK,
    PendingAccept,
    clear_pending,
    digest,
    write_pending,
)
from coordinator.service.speculation.record import Speculation
from coordinator.service.speculation.runner import SpeculationRunner
from coordinator.service.speculation.suggestion import BranchRun, Suggestion
from coordinator.service.speculation.transcript import ensure_tool_result_pairing, render_transcript
from coordinator.service.undo import Checkpoint, Checkpoints
from overlay.errors import describe_paths
from protocol.text.branch_number import branch_name
from protocol.text.inert_text import quote_name
from protocol.wire.chat import Message
from protocol.wire.control import AcceptMethod, Transcript

log = logging.getLogger("specrun.speculation")

ACCEPT_DEBOUNCE_MS = 100


class AcceptFallback(Exception):
    """Accept could not use the speculation; the text runs as a normal turn."""


class Debounced(Exception):
    """A second accept within ``ACCEPT_DEBOUNCE_MS`` of the last one: ignored, nothing runs."""


class AcceptCancelled(Exception):
    """Ctrl-C while a typed prompt waited for its running speculation: it was aborted and
    nothing runs, as a cancelled turn."""


class Acceptor(SpeculationPart):
    """Takes a branch of the shown suggestion and turns its completed speculation into
    the main chat's turn, or raises why the prompt must run as a normal turn instead."""

    def __init__(
        self, context: SpeculationContext, runner: SpeculationRunner, offer: Offer
    ) -> None:
        super().__init__(context)
        self.runner = runner
        self.offer = offer
        self.accepting: Speculation | None = None  # being accepted right now
        self.accepted: Speculation | None = None  # accepted, its pipelined text pending
        self._last_accept = 0.0
        self._cancels: dict[int, asyncio.Event] = {}  # typed prompts waiting, by request
        # Where each accept's files are checkpointed for `specrun undo` (set by the service).
        self.checkpoints: Checkpoints | None = None

    def live(self) -> list[Speculation]:
        """The speculations whose events still matter to the accept."""
        return [s for s in (self.accepting, self.accepted) if s is not None]

    @property
    def pipelined_pending(self) -> bool:
        """The next suggestion is on its way: the accepted speculation's worker is still
        writing it, or the main chat is compacting the history it will fork from."""
        return self.accepted is not None

    async def accept(
        self, method: AcceptMethod, out: Emitter, index: int = 0, wait: bool = False
    ) -> float:
        """Apply the completed speculation of the shown suggestion's branch of rank
        ``index``, killing every other branch at once. Returns seconds saved; raises
        ``AcceptFallback`` (after aborting) when the text must run as a normal turn, and
        ``Debounced`` for a second accept right after the last one. A ``typed`` accept (the
        person typed the prompt out) or one with ``wait`` (a prompt sent, as the chat's
        Enter sends the line it filled) waits for a running speculation to end first."""
        now = time.monotonic()
        if (now - self._last_accept) * 1000 < ACCEPT_DEBOUNCE_MS:
            raise Debounced
        self._last_accept = now
        suggestion = self.shown.current
        if suggestion is None:
            raise AcceptFallback("there is no suggestion to accept")
        branch = suggestion.branch(index)
        if branch is None:
            raise AcceptFallback(f"there is no {branch_name(index)} of this suggestion")
        # Taken at once: a reject, a typed key or another prompt arriving while this accept
        # applies files finds no suggestion to dismiss, instead of killing this speculation
        # and removing its overlay mid-apply.
        self.shown.take()
        self._count(suggestion, branch, method)
        self.accepting = branch.speculation
        try:
            return await self._accept_branch(suggestion, branch, method, out, now, wait)
        finally:
            self.accepting = None
            self.shown.notify()

    def _count(self, suggestion: Suggestion, branch: BranchRun, method: AcceptMethod) -> None:
        suggestion.settled = True
        self.stats.accepted[method] += 1
        self.stats.unused_streak = 0
        self.stats.accepted_by_rank[branch.rank] += 1
        if method == "typed":
            self.stats.accepted_by_typing["exact_match"] += 1
        elif suggestion.typed_prefix:
            self.stats.accepted_by_typing["prefix_kept"] += 1

    async def _accept_branch(
        self,
        suggestion: Suggestion,
        branch: BranchRun,
        method: AcceptMethod,
        out: Emitter,
        now: float,
        wait: bool,
    ) -> float:
        others = [b for b in suggestion.branches if b is not branch]
        if others:
            suggestion.branches = [branch]
            await self.runner.kill_branches(others, "another branch accepted")
        spec = branch.speculation
        if (method == "typed" or wait) and spec is not None and spec.status == "running":
            await self._wait_unless_cancelled(spec, out.req_id)
        if spec is None or spec.status != "completed" or spec.outcome is None:
            why = "no speculation ran" if spec is None else f"its speculation {spec.describe()}"
            if spec is not None:
                await self.runner.abort(spec, "accepted before completion")
            raise AcceptFallback(why)
        # The accepted prompt is this turn: a prompt sent while it is applied waits for it
        # (and one already running finishes first).
        async with self.chat.turn_slot():
            return await self._apply(spec, branch, out, now)

    async def _wait_unless_cancelled(self, spec: Speculation, req_id: int) -> None:
        """Wait for a running speculation to end, or for ``cancel_accept(req_id)``: then
        abort it and raise ``AcceptCancelled``."""
        cancel = self._cancels[req_id] = asyncio.Event()
        waits = [asyncio.ensure_future(spec.finished.wait()), asyncio.ensure_future(cancel.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._cancels.pop(req_id, None)
            for one in waits:
                one.cancel()
        if cancel.is_set() and spec.status == "running":
            await self.runner.abort(spec, "cancelled")
            raise AcceptCancelled

    def waiting(self, req_id: int) -> bool:
        """A typed prompt of that request waits for its speculation."""
        return req_id in self._cancels

    def cancel_accept(self, req_id: int | None = None) -> bool:
        """Ctrl-C for a typed prompt still waiting for its speculation (``req_id``: that
        prompt's request; None: any). Whether one was waiting."""
        found = [e for rid, e in self._cancels.items() if req_id is None or rid == req_id]
        for event in found:
            event.set()
        return bool(found)

    async def _apply(self, spec: Speculation, branch: BranchRun, out: Emitter, now: float) -> float:
        assert spec.outcome is not None  # completed
        messages = ensure_tool_result_pairing(list(spec.outcome.messages))
        applied = await self._apply_files(spec, [Message.user(branch.text), *messages])
        spec.move_to("accepted")
        self.stats.cost.accepted(spec.id)
        saved = max(0.0, spec.elapsed_s - (time.monotonic() - now))
        self.stats.time_saved_s.append(saved)
        entries = render_transcript(branch.text, messages)
        await out.send(
            Transcript(
                out.req_id,
                tuple(entries),
                applied.paths,
                saved,
                changes=applied.changes,
                ignored_skipped=applied.ignored_skipped,
                ignored_held=len(applied.held),
                ignored_held_in=held_summary(applied.held),
                links_held=applied.links_held,
            )
        )
        # The accepted suggestion is used up (taken when the accept began); its worker may
        # still be writing the pipelined suggestion, which the next Tab will want.
        self.accepted = spec
        self.context.background.spawn(self._continue_pipeline(spec, self.shown.moves))
        return saved

    async def _apply_files(self, spec: Speculation, accepted: list[Message]) -> AppliedSet:
        """Apply the speculation's files and record ``accepted`` in the main chat, or
        neither (``AcceptFallback``); its overlay is removed either way."""
        assert spec.outcome is not None  # completed
        root = self.project_root
        ov = overlay.Overlay(root, spec.overlay_dir)
        try:
            # The worker's report is checked entry by entry before anything is read from its
            # overlay or written to the project (``SpeculationFiles``).
            files = await asyncio.to_thread(
                SpeculationFiles, root, spec.overlay_dir, spec.outcome.written_files, self.settings
            )
            ov = files.overlay
            if self.settings.runs_later_boundary:
                later = (await asyncio.to_thread(files.preview)).runs_later
                if later:
                    names = describe_paths(c.path for c in later)
                    raise AcceptFallback(
                        f"it changed files that run later ({names}) and runsLaterBoundary is on"
                    )
            await asyncio.to_thread(self._write_pending, files, accepted)
            checkpoint = await self._checkpoint(files, accepted)
            try:
                applied = await asyncio.to_thread(files.apply)
            finally:
                if self.checkpoints is not None:
                    await asyncio.shield(self.checkpoints.accept_ended(checkpoint))
            await self.chat.extend_from_speculation(accepted)
        except RefusedReport as exc:
            log.warning("speculation %s: refused report %s", spec.id, exc.refused)
            raise AcceptFallback(_refused_text(exc)) from None
        except overlay.ConflictError as exc:
            raise AcceptFallback(f"you changed files it also changed ({exc})") from None
        except (overlay.OverlayError, OSError) as exc:
            raise AcceptFallback(f"its files could not be applied ({exc})") from None
        finally:
            clear_pending(root)
            ov.cleanup()
        return applied

    async def _checkpoint(
        self, files: SpeculationFiles, accepted: list[Message]
    ) -> Checkpoint | None:
        """The undo checkpoint of the files this accept may change, taken before it does."""
        if self.checkpoints is None:
            return None
        ov = files.overlay
        rels = [*ov.written_files(), *ov.deleted_files(), *ov.links()]
        prompt = accepted[0].text if accepted else ""
        return await self.checkpoints.accept_begins(prompt, rels)

    def _write_pending(self, files: SpeculationFiles, accepted: list[Message]) -> None:
        """The record that settles a crash between the files and the history. Files git
        ignores are left out (the apply may skip them: the real one wins); a deletion is
        recorded as "" (applied: the file is gone)."""
        ov = files.overlay
        record = {
            rel: digest(path)
            for rel, path in ov.written_files().items()
            if path.exists() and rel not in files.ignored
        }
        record.update((rel, GONE) for rel in ov.deleted_files() if rel not in files.ignored)
        record.update((rel, LINK_MARK + link) for rel, link in ov.links().items())
        write_pending(self.project_root, PendingAccept(tuple(accepted), record))

    async def _continue_pipeline(self, spec: Speculation, moves: int) -> None:
        """Tab-Tab-Tab: the pipelined suggestion becomes the next one at once (waiting for
        it if the worker is still writing it), and its speculation starts immediately, or
        once the compaction the accept made due is done (so it never forks from the
        over-full history)."""
        await spec.pipelined_done.wait()
        await self.chat.forkable()
        if self.accepted is spec:
            self.accepted = None
        if self.shown.moves != moves or self.shown.current is not None:
            return  # the person moved on meanwhile
        if spec.pipelined and self.settings.enable_followup_suggestions:
            # Its ranked guesses become the next suggestion's branches (speculationBranches).
            await self.offer(spec.pipelined_alternatives or spec.pipelined, 0.0)


def _refused_text(exc: RefusedReport) -> str:
    refused = describe_paths(f"{quote_name(path)}: {why}" for path, why in exc.refused.items())
    return f"the speculation reported files it may not change, so nothing was applied ({refused})"
