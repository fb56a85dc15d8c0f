"""The main chat: one user query in, model and tools until a text-only answer.

``run_turn`` is the loop and reads top to bottom; everything else here is the
session state it needs (history on disk, the cache-safe snapshot, counters), the
instruction it sends, the check that stops a model repeating itself, and the memory
prefetch that runs beside it without ever being awaited.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

import msgspec

from coordinator.memory import (
    AbortReason,
    AbortSignal,
    MemoryPrefetcher,
    Recaller,
    memory_dirs,
)
from coordinator.service.chat import protected_writes
from coordinator.service.chat.approvals import Approvals
from coordinator.service.chat.compaction import Compactor, Summarized
from coordinator.service.chat.context_meter import DEFAULT_WINDOW, ContextMeter
from coordinator.service.chat.history import HistoryStore
from coordinator.service.chat.model_wait import ModelWait
from coordinator.service.chat.tool_exec import ToolExecutor
from coordinator.service.chat.tools import ChatToolCalls
from coordinator.service.chat.turn_slot import FollowUp, TurnSlot
from coordinator.service.emitter import Emitter
from coordinator.service.pool import WorkerHandle, WorkerStartError
from coordinator.service.ports import ChatWorkers
from coordinator.service.speculation import settle_pending
from coordinator.service.undo import Checkpoints, settle_undo
from coordinator.settings import Settings
from protocol.model import (
    ChatRequest,
    ChatResult,
    ModelClient,
    ModelError,
    RetryWait,
    StreamEvent,
    TextDelta,
)
from protocol.model.overflow import stated_window
from protocol.wire.approval import ApprovalMode
from protocol.wire.chat import CacheSafeSnapshot, Message, ToolCall, ToolResult, ToolSpec
from protocol.wire.control import ContextInfo, ControlReply, TurnEndReason
from protocol.wire.work import WorkerEvent

log = logging.getLogger("specrun.chat")

MAX_HISTORY_FOR_CACHE = 40


@dataclass
class TurnResult:
    reason: TurnEndReason  # never ``accepted`` or ``debounced``: those end accepts
    message: str = ""
    elapsed_s: float = 0.0


def _not_run(calls: tuple[ToolCall, ...], why: str) -> Message:
    """The results that answer ``calls`` none of which ran, so the history stays valid
    for the next request (results right after calls)."""
    return Message.tool(tuple(ToolResult(c.id, c.name, error=why) for c in calls))


class _Unheard:
    """Where the notice of a compaction after an accept goes: nobody waits for it (the
    accept has had its reply), and a late reply to a finished request only piles up in
    its client."""

    async def send(self, identity: bytes, reply: ControlReply) -> None:
        return None


# What a finish reason other than a plain stop means for the answer the person just read.
CUT_SHORT = {
    "length": "The model's answer was cut off at its output token limit.",
    "content_filter": "The provider's content filter stopped the model's answer part-way.",
    "error": "The provider reported an error part-way through the answer; it may be incomplete.",
}

CONTEXT_FULL = (
    "The conversation does not fit the model's context window even after compacting it; "
    "run `specrun reset` to start a new session (this one stays on disk), or set "
    "contextWindow if the model's window is smaller than specrun thinks."
)


# The main chat's system instruction (written for this project).
BASE_INSTRUCTION = """\
You are a coding assistant working inside the project at {root}.
Use the tools to look before you change anything: read files, search, list
directories. Make the smallest change that does what the user asked, then say
briefly what you changed and how to check it. Paths are relative to the project
root. When a command or an edit needs the user's permission, the tool result
says so; do not try to work around a refusal."""


def build_system_prompt(project_root: Path, memory_index: str) -> str:
    text = BASE_INSTRUCTION.format(root=project_root)
    if memory_index.strip():
        text += "\n\n# Project memory index\n" + memory_index.strip()
    return text


# Stopping a model that repeats itself: the same tool calls, turn after turn.
LOOP_REPEATS = 4  # reading a file twice is normal; four identical turns in a row is not


class LoopDetector:
    """Counts the same batch of tool calls, turn after turn, to end a loop the model is in."""

    def __init__(self, repeats: int = LOOP_REPEATS) -> None:
        self.repeats = repeats
        self._last: tuple[tuple[str, str], ...] | None = None
        self._count = 0

    def observe(self, answer: Message) -> bool:
        """True once the same batch of calls (names and arguments) came ``repeats`` times
        in a row."""
        batch = tuple((c.name, c.arguments) for c in answer.tool_calls)
        if not batch:
            self._last, self._count = None, 0
            return False
        self._count = self._count + 1 if batch == self._last else 1
        self._last = batch
        return self._count >= self.repeats


class MainChat:
    """One chat session of the project. It needs the settings, the workers its tools run
    on (``ChatWorkers``: the pool) and the model client; replies go out through the
    ``Emitter`` of the request that runs a turn. The turn loop is here; its tool calls
    (``ChatToolCalls``), their approval questions (``Approvals``) and the compaction of
    its history (``Compactor``) each have their own part."""

    def __init__(
        self, project_root: Path, settings: Settings, workers: ChatWorkers, model: ModelClient
    ) -> None:
        self.settings = settings
        self.workers = workers
        self.model = model
        self.project_root = project_root
        self.model_name: str = settings.model
        self.fast_model: str = settings.suggestion_model
        self.approval_mode = settings.approval_mode
        self.history_store = HistoryStore(self.project_root)
        settle_pending(self.project_root, self.history_store)  # after overlay.recover()
        # Undo checkpoints of the files each accept and turn writes (docs/cli.md#undo).
        self.checkpoints = Checkpoints(self.project_root, settings)
        settle_undo(self.checkpoints, self.history_store)  # after overlay.recover() too
        loaded = self.history_store.load_report()
        self.history: list[Message] = loaded.messages  # the compacted view, if compacted
        self.compactions = len(loaded.compactions)
        self.session_id = self.history_store.current_session().session_id
        configured = settings.context_window
        self.context = ContextMeter(
            window=configured or DEFAULT_WINDOW,
            source="setting" if configured else "default",
            compact_at=settings.compact_at,
        )
        self.compactor = Compactor(
            self.context,
            self.history_store,
            model,
            model_name=self.model_name,
            fast_model=self.fast_model,
            window_known=bool(configured),
            summarized=Summarized.of_session(loaded.full_messages, loaded.messages),
        )
        guard = protected_writes.for_project(self.project_root, settings)
        self.tools_exec = ToolExecutor(
            workers,
            str(self.project_root),
            settings.containment().limits,
            private_paths=memory_dirs(self.project_root, settings.memory_dir or None),
            write_guard=guard.rule,  # the worker judges shell commands with the same rule
        )
        self.approvals = Approvals(settings.approval_timeout_s)
        self.tool_calls = ChatToolCalls(self.tools_exec, self.approvals, self.context, guard)
        self.tool_calls.before_write = self.checkpoints.before_write
        self.checkpoints.next_turn = lambda: (self.session_id, self.session_turns + 1)
        self.recaller = Recaller(
            self.project_root,
            model=model,
            model_name=self.fast_model,
            memory_dir=settings.memory_dir or None,
            include_project=settings.project_trusted,
        )
        self.prefetcher = MemoryPrefetcher(self.recaller, enabled=settings.enable_memory)
        self.snapshot: CacheSafeSnapshot | None = None
        self._snapshot_key: bytes | None = None
        self._snapshot_version = 0
        self.session_turns = sum(1 for m in loaded.full_messages if m.role == "user")
        self.session_tokens = 0
        self.slot = TurnSlot()
        self._turn_task: asyncio.Task[TurnResult] | None = None
        self._turn_req_id: int | None = None
        # Prompts waiting for the running turn to end, by request.
        self._queued: dict[int, asyncio.Event] = {}  # its event: Ctrl-C while it waits
        # An accept recorded its turn and still holds the slot; leaving it settles the snapshot.
        self._accept_recorded = False
        self._context_key: tuple[int, int, int] | None = None  # of the cached status estimate
        self._context_tokens = 0
        self.model_wait = ModelWait()  # its model request waiting to retry, for status

    # -- the loop -------------------------------------------------------------

    async def run_turn(
        self,
        out: Emitter,
        text: str,
        mode: ApprovalMode | None = None,
        can_confirm: bool = False,
        *,
        client_pid: int | None = None,
        from_accept: bool = False,
    ) -> TurnResult:
        """Run one user query to its end. Only one turn runs at a time: a prompt sent
        meanwhile waits, and Ctrl-C while it waits (``cancel``) means it never runs."""
        cancelled = self._queued[out.req_id] = asyncio.Event()
        try:
            if not await self.slot.take(cancelled):
                return TurnResult("aborted", "The turn was cancelled before it started.")
        finally:
            self._queued.pop(out.req_id, None)
        try:
            self._turn_req_id = out.req_id
            self.approvals.client_pid = client_pid
            self.tool_calls.from_accept = from_accept
            task = asyncio.ensure_future(
                self._turn(out, text, mode or self.approval_mode, can_confirm)
            )
            self._turn_task = task
            try:
                return await task
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
                return TurnResult("aborted", "The turn was cancelled.")
            finally:
                self._turn_task = None
                self._turn_req_id = None
        finally:
            self.slot.release()

    async def _turn(
        self, out: Emitter, text: str, mode: ApprovalMode, can_confirm: bool
    ) -> TurnResult:
        started = time.monotonic()
        turn_abort = AbortSignal()
        self.prefetcher.fire(text, turn_abort)  # never awaited: consumed opportunistically below
        if self.session_turns >= self.settings.max_session_turns:
            self.prefetcher.abort_and_clear(AbortReason.MAX_SESSION_TURNS)
            return TurnResult(
                "max_session_turns", "This session reached its turn limit; run `specrun reset`."
            )
        self.session_turns += 1
        self.checkpoints.begin_turn(self.session_id, self.session_turns, text)
        try:
            system, tools = self.system_prompt(), await self.workers.wait_tools()
            await self.compactor.resolve_window()
            await asyncio.sleep(0)  # let a recall that is already done settle: consume point 1
            memory = self.prefetcher.consume_for_user_query()  # memory leads the reminders
            await self.record(Message.user(text, reminders=(memory,) if memory else ()))
            result = await self._model_loop(out, system, tools, mode, can_confirm, started)
            if result.reason in ("completed", "refused", "max_turns_per_query"):
                # Compact when the next request would pass compactAt, then keep the snapshot
                # speculations fork from (so they fork from the compacted view).
                if await self.compactor.at_end_of_turn(out, system, tools, self.history):
                    self.compactions += 1
                self.save_snapshot(system, tools)
            return result
        except (ModelError, WorkerStartError) as exc:
            self.prefetcher.abort_and_clear(AbortReason.ERROR)
            overflow = isinstance(exc, ModelError) and exc.kind == "context_length"
            message = CONTEXT_FULL if overflow else str(exc)
            return TurnResult("error", message, time.monotonic() - started)
        except asyncio.CancelledError:
            turn_abort.abort("turn aborted")
            self.prefetcher.abort_and_clear(AbortReason.TURN_ABORTED)
            self._close_unanswered_calls()
            raise
        except BaseException:
            self.prefetcher.abort_and_clear(AbortReason.ABNORMAL_EXIT)
            self._close_unanswered_calls()
            raise
        finally:
            # Completed, failed or cancelled: what its tools wrote can be taken back.
            await asyncio.shield(self.checkpoints.end_turn())

    async def _model_loop(
        self,
        out: Emitter,
        system: str,
        tools: tuple[ToolSpec, ...],
        mode: ApprovalMode,
        can_confirm: bool,
        started: float,
    ) -> TurnResult:
        """Model answer, its tool calls, their results, until an answer without calls or
        a limit; the user's message is already in the history."""
        settings = self.settings
        loops = LoopDetector()
        for _ in range(settings.max_turns_per_query):
            answer = await self._ask_model(out, system, tools)
            if answer.refusal is not None:
                # Not an empty success: the person sees the model's own words, and the
                # history keeps them as the answer (no calls, so it stays valid).
                await self.record(Message.assistant(answer.refusal))
                return TurnResult("refused", answer.refusal, time.monotonic() - started)
            await self.record(answer.message)
            if loops.observe(answer.message):
                self.prefetcher.abort_and_clear(AbortReason.LOOP_DETECTED)
                why = "not run: the same calls kept repeating"
                await self.record(_not_run(answer.message.tool_calls, why))
                return TurnResult(
                    "loop_detected", "The model repeated the same tool calls; stopped the turn."
                )
            limit = settings.session_token_limit
            if limit > 0 and self.session_tokens >= limit:
                self.prefetcher.abort_and_clear(AbortReason.SESSION_TOKEN_LIMIT)
                return TurnResult(
                    "session_token_limit",
                    "The session token limit was reached; run `specrun reset`.",
                )
            if not answer.message.tool_calls:
                return TurnResult("completed", elapsed_s=time.monotonic() - started)
            results, lost = await self.tool_calls.run_all(
                out, answer.message.tool_calls, mode, can_confirm
            )
            if lost is not None:  # nobody is there to answer: the turn ends
                await self.record(Message.tool(tuple(results)))
                self.prefetcher.abort_and_clear(AbortReason.TURN_ABORTED)
                return TurnResult(
                    "aborted",
                    f"{lost[:1].upper()}{lost[1:]}: the call counts as declined and the "
                    "turn ended.",
                    time.monotonic() - started,
                )
            memory = self.prefetcher.consume_for_tool_results()  # consume point 2
            await self.record(Message.tool(tuple(results), reminders=(memory,) if memory else ()))
        self.prefetcher.abort_and_clear(AbortReason.BOUNDED_TURNS_ZERO)
        return TurnResult(
            "max_turns_per_query",
            f"Stopped after {settings.max_turns_per_query} model turns for one query.",
        )

    # -- steps ----------------------------------------------------------------

    async def _ask_model(
        self, out: Emitter, system: str, tools: tuple[ToolSpec, ...]
    ) -> ChatResult:
        """One model request over the history; its words stream to the client.

        A request that would not fit the window is preceded by a compaction; a provider
        that still refuses it as too long gets one more try after a compaction (its
        error may name the real window), then the turn ends with ``CONTEXT_FULL``."""
        compactor = self.compactor
        estimate = self.context.estimate(system, self.history, tools)
        too_long = estimate > self.context.mid_turn_limit
        if too_long and await compactor.compact(out, system, tools, self.history):
            self.compactions += 1
        for attempt in (1, 2):
            request = ChatRequest(
                system=system,
                history=tuple(self.history),
                tools=tools,
                model=self.model_name,
                purpose="main",
            )

            async def show(event: StreamEvent) -> None:
                if isinstance(event, RetryWait):
                    # One line per wait, so the person knows why nothing comes; Ctrl-C
                    # cancels the turn and with it the wait.
                    self.model_wait.started(event)
                    await out.notice(event.text)
                    return
                self.model_wait.ended()
                if isinstance(event, TextDelta):
                    await out.text(event.text)

            try:
                result = await self.model.chat(request, show)
            except ModelError as exc:
                if exc.kind != "context_length" or attempt == 2:
                    raise
                refused = self.context.estimate(system, self.history, tools)
                self.context.learn_limit(stated_window(str(exc)), refused)
                log.warning("the provider refused %d estimated tokens as too long", refused)
                if not await compactor.compact(out, system, tools, self.history, forced=True):
                    raise
                self.compactions += 1
                continue
            finally:
                self.model_wait.ended()
            break
        if result.finish_reason in CUT_SHORT:
            await out.notice(CUT_SHORT[result.finish_reason])
        self.session_tokens += result.usage.total_tokens
        self.context.reported(result.usage, len(self.history) + 1)  # + this answer
        return result

    async def compact_on_request(self, out: Emitter) -> str | None:
        """``specrun compact``: after the running turn, summarize all but the last turn.
        What was done in one sentence, or None when there is nothing to summarize."""
        async with self.slot.held():
            system, tools = self.system_prompt(), await self.workers.wait_tools()
            await self.compactor.resolve_window()
            if not await self.compactor.compact(
                out, system, tools, self.history, on_request=True
            ):
                return None
            self.compactions += 1
            self.save_snapshot(system, tools)
            return self.compactor.last

    def set_approval_mode(self, mode: ApprovalMode) -> None:
        """The mode of the turns started from now on (and of the speculations after them);
        a running turn keeps the one it started with."""
        self.approval_mode = mode

    def pending_approval(self) -> ToolCall | None:
        """The call a running turn is waiting on a person's yes for, if any."""
        return self.approvals.pending()

    @property
    def busy(self) -> bool:
        return self.slot.busy

    def answer_approval(self, ask_req_id: int, call_id: str, approved: bool,
                        remember: bool = False, reason: str = "") -> bool:
        return self.approvals.answer(ask_req_id, call_id, approved, remember, reason)

    def cancel(self, ask_req_id: int | None = None) -> bool:
        """Ctrl-C: abort the running turn (model request cancelled, tool worker killed), or
        a prompt still waiting for it to end, which then never runs."""
        task = self._turn_task
        if task is not None and (ask_req_id is None or ask_req_id == self._turn_req_id):
            task.cancel()
            return True
        waiting = self._queued.get(ask_req_id) if ask_req_id is not None else None
        if waiting is not None:
            waiting.set()
            return True
        return False

    # -- session state ---------------------------------------------------------

    def system_prompt(self) -> str:
        return build_system_prompt(self.project_root, self.recaller.store.index_prompt())

    async def record(self, *messages: Message) -> None:
        """Add to the history, on disk first (an answered turn survives a crash), with the
        disk write (an fsync) off the event loop."""
        await asyncio.to_thread(self.history_store.append, messages)
        self.history.extend(messages)

    def _close_unanswered_calls(self) -> None:
        """After an abort, give every call of the last model message a result, so the
        history stays valid for the next request (results right after calls). Written at
        once (not ``record``'s thread): the turn is being cancelled."""
        if self.history and self.history[-1].role == "assistant" and self.history[-1].tool_calls:
            closing = (_not_run(self.history[-1].tool_calls, "cancelled by the user"),)
            self.history_store.append(closing)  # on disk first, as every record
            self.history.extend(closing)

    def save_snapshot(self, system: str, tools: tuple[ToolSpec, ...]) -> None:
        """The cache-safe parameters a forked query needs; the version moves only when the
        system instruction or the tools change."""
        key = msgspec.msgpack.encode((system, tools))
        if key != self._snapshot_key:
            self._snapshot_key = key
            self._snapshot_version += 1
        self.snapshot = CacheSafeSnapshot(
            system=system,
            tools=tools,
            history=tuple(self.history[-MAX_HISTORY_FOR_CACHE:]),
            model=self.model_name,
            version=self._snapshot_version,
        )

    def context_info(self) -> ContextInfo:
        """How full the window is, for ``status``: estimated without a request, once per
        change of the history (status is polled; the estimate reads the history)."""
        key = (len(self.history), self.compactions, self.context.window)
        if self._context_key != key:
            self._context_key = key
            self._context_tokens = self.context.estimate(
                self.system_prompt(), self.history, self.workers.tool_specs
            )
        tokens = self._context_tokens
        return ContextInfo(
            window=self.context.window,
            window_source=self.context.source,
            tokens=tokens,
            compact_at=self.context.compact_at,
            compactions=self.compactions,
        )

    def model_turns(self) -> int:
        return sum(1 for m in self.history if m.role == "assistant")

    def reset(self, keep: Sequence[Message] = ()) -> None:
        """A new session (``specrun reset``). ``keep``: the messages it starts with
        (``specrun undo --conversation``: the turns before the one rewound to)."""
        self.cancel()
        self.approvals.forget()
        self.slot.cancel_follow_up()
        self.prefetcher.abort_and_clear(AbortReason.RESET)
        self.prefetcher.reset()
        self.history_store.new_session()
        self.history_store.append(keep)
        self.session_id = self.history_store.current_session().session_id
        self.history = list(keep)
        self.snapshot = None
        self._snapshot_key = None
        self.session_turns = sum(1 for m in keep if m.role == "user")
        self.session_tokens = 0
        self.compactions = 0
        self.compactor.summarized = Summarized()
        self.context.forget()

    def turn_slot(self) -> AbstractAsyncContextManager[None]:
        """The one-turn-at-a-time slot as an accept holds it (see ``ForkSource.turn_slot``).
        Leaving it after ``extend_from_speculation`` takes the snapshot the next speculation
        forks from; when the accepted turn brought the history past ``compactAt``, the slot
        stays held by the compaction that comes first (in the background: the accept's
        reply does not wait for the fast model), so a prompt sent meanwhile waits for it as
        it would for the compaction at a turn's end."""
        return self.slot.held_for_accept(self._settle_accept)

    async def extend_from_speculation(self, messages: list[Message]) -> None:
        """An accepted speculation's messages (its user message first) join the history as
        one more turn; called with ``turn_slot`` held, whose end takes the snapshot."""
        await self.record(*messages)
        self.session_turns += 1
        self._accept_recorded = True
        self.slot.snapshot_changing()

    def _settle_accept(self) -> FollowUp | None:
        """After an accept that recorded its turn: the snapshot now, or the compaction that
        must come first, which then holds the turn slot and takes the snapshot when done."""
        if not self._accept_recorded:
            return None
        self._accept_recorded = False
        system, tools = self.system_prompt(), self.workers.tool_specs
        if not self.compactor.due(system, tools, self.history):
            self.save_snapshot(system, tools)
            return None
        return self._compact_after_accept(system, tools)

    async def _compact_after_accept(self, system: str, tools: tuple[ToolSpec, ...]) -> None:
        """The compaction an accepted turn made due, by the same rules as at a turn's end;
        the turn slot is held until it ends (``TurnSlot.held_for_accept``)."""
        cancelled = False
        try:
            out = Emitter(_Unheard(), b"", 0)
            if await self.compactor.compact(out, system, tools, self.history):
                self.compactions += 1
                log.info("after an accept: %s", self.compactor.last)
        except asyncio.CancelledError:
            cancelled = True  # reset or shutdown: this history is no longer forked from
            raise
        except Exception:
            # The next turn compacts before its request instead (or recovers from the
            # provider's overflow error); speculations meanwhile fork from the full history.
            log.exception("the compaction after an accept failed")
        finally:
            if not cancelled:
                self.save_snapshot(system, tools)

    async def forkable(self) -> None:
        """Until the snapshot is the one to fork the next speculation from: right after an
        accept, once the compaction it made due is done."""
        await self.slot.forkable()

    # -- worker events (routed here for the workers running this chat's tools) ---

    async def on_worker_event(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        if not self.tools_exec.on_event(handle, event):
            log.info("dropping a %s that answers no running tool call", type(event).__name__)

    async def on_worker_death(self, handle: WorkerHandle) -> None:
        self.tools_exec.on_death(handle)

    async def shutdown(self) -> None:
        self.cancel()
        self.slot.cancel_follow_up()
        self.prefetcher.abort_and_clear(AbortReason.SHUTDOWN)
        await self.prefetcher.aclose()
        self.history_store.close()
