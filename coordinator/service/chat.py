"""The main chat: one user query in, model and tools until a text-only answer.

``run_turn`` is the loop and reads top to bottom; everything else here is the
session state it needs (history on disk, the cache-safe snapshot, counters) and
the memory prefetch that runs beside it without ever being awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
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
from coordinator.service import compaction
from coordinator.service.accept_record import settle_pending
from coordinator.service.context_meter import DEFAULT_WINDOW, ContextMeter
from coordinator.service.emitter import Emitter
from coordinator.service.history import CompactionRecord, HistoryStore
from coordinator.service.loop_detect import LoopDetector
from coordinator.service.pool import WorkerHandle, WorkerStartError
from coordinator.service.ports import ChatWorkers
from coordinator.service.system_prompt import build_system_prompt
from coordinator.service.tool_exec import (
    HIDDEN_NAME_REASON,
    ToolExecutor,
    hidden_name_reason,
    shell_mode,
    write_policy,
)
from coordinator.settings import Settings
from protocol.approval import ApprovalMode
from protocol.chat import CacheSafeSnapshot, Message, ToolCall, ToolResult, ToolSpec
from protocol.control import ContextInfo, TurnEndReason
from protocol.model import (
    ChatRequest,
    ChatResult,
    ModelClient,
    ModelError,
    StreamEvent,
    TextDelta,
)
from protocol.model.overflow import stated_window
from protocol.model.tokens import cut_to_tokens, estimate_request, estimate_tokens
from protocol.tools import SHELL_TOOL, WRITE_TOOLS
from protocol.work import WorkerEvent

log = logging.getLogger("specrun.chat")

MAX_HISTORY_FOR_CACHE = 40


@dataclass
class TurnResult:
    reason: TurnEndReason  # never ``accepted`` or ``debounced``: those end accepts
    message: str = ""
    elapsed_s: float = 0.0


CONTEXT_FULL = (
    "The conversation does not fit the model's context window even after compacting it; "
    "run `specrun reset` to start a new session (this one stays on disk), or set "
    "contextWindow if the model's window is smaller than specrun thinks."
)


@dataclass
class _Approval:
    future: asyncio.Future[bool]
    ask_req_id: int
    call: ToolCall


class ApprovalLost(Exception):
    """An approval question nobody can answer any more: the client that was asked is
    gone, or no answer came in time. The call counts as declined and the turn ends."""


class MainChat:
    """One chat session of the project. It needs the settings, the workers its tools run
    on (``ChatWorkers``: the pool) and the model client; replies go out through the
    ``Emitter`` of the request that runs a turn."""

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
        loaded = self.history_store.load_report()
        self.history: list[Message] = loaded.messages  # the compacted view, if compacted
        self.compactions = len(loaded.compactions)
        self._summarized = compaction.Summarized.of_session(loaded.full_messages, loaded.messages)
        self.session_id = self.history_store.current_session().session_id
        configured = settings.context_window
        self.context = ContextMeter(
            window=configured or DEFAULT_WINDOW,
            source="setting" if configured else "default",
            compact_at=settings.compact_at,
        )
        self._window_asked = bool(configured)  # the endpoint is asked once, at first use
        self.tools_exec = ToolExecutor(
            workers,
            str(self.project_root),
            settings.containment().limits,
            private_paths=memory_dirs(self.project_root, settings.memory_dir or None),
        )
        self.recaller = Recaller(
            self.project_root,
            model=model,
            model_name=self.fast_model,
            memory_dir=settings.memory_dir or None,
        )
        self.prefetcher = MemoryPrefetcher(self.recaller, enabled=settings.enable_memory)
        self.snapshot: CacheSafeSnapshot | None = None
        self._snapshot_key: bytes | None = None
        self._snapshot_version = 0
        self.session_turns = sum(1 for m in loaded.full_messages if m.role == "user")
        self.session_tokens = 0
        self._turn_lock = asyncio.Lock()
        self._turn_task: asyncio.Task[TurnResult] | None = None
        self._turn_req_id: int | None = None
        # Prompts waiting for the running turn to end, by request.
        self._queued: dict[int, asyncio.Event] = {}  # its event: Ctrl-C while it waits
        self._approvals: dict[tuple[int, str], _Approval] = {}
        self._client_pid: int | None = None  # the asking client of the running turn
        self._from_accept = False  # the running turn is an accept's fallback (no flags)
        self._last_compaction = ""
        self._context_key: tuple[int, int, int] | None = None  # of the cached status estimate
        self._context_tokens = 0

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
            if not await self._take_turn_slot(cancelled):
                return TurnResult("aborted", "The turn was cancelled before it started.")
        finally:
            self._queued.pop(out.req_id, None)
        try:
            self._turn_req_id = out.req_id
            self._client_pid = client_pid
            self._from_accept = from_accept
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
            self._turn_lock.release()

    async def _take_turn_slot(self, cancelled: asyncio.Event) -> bool:
        """Wait for the turn slot: True once held, False (not held) if ``cancelled`` is
        set first, so a Ctrl-C ends a waiting prompt at once."""
        acquiring = asyncio.ensure_future(self._turn_lock.acquire())
        stop = asyncio.ensure_future(cancelled.wait())
        try:
            await asyncio.wait({acquiring, stop}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # this request itself was cancelled (shutdown)
            await self._give_up(acquiring)
            raise
        finally:
            stop.cancel()
        if cancelled.is_set():
            await self._give_up(acquiring)
            return False
        return True

    async def _give_up(self, acquiring: asyncio.Task[bool]) -> None:
        """Stop waiting for the slot; if it was taken in the same moment, hand it back."""
        acquiring.cancel()
        try:
            await acquiring
        except asyncio.CancelledError:
            return  # never taken
        self._turn_lock.release()

    async def _turn(
        self, out: Emitter, text: str, mode: ApprovalMode, can_confirm: bool
    ) -> TurnResult:
        started = time.monotonic()
        settings = self.settings
        turn_abort = AbortSignal()
        self.prefetcher.fire(text, turn_abort)  # never awaited: consumed opportunistically below
        if self.session_turns >= settings.max_session_turns:
            self.prefetcher.abort_and_clear(AbortReason.MAX_SESSION_TURNS)
            return TurnResult(
                "max_session_turns", "This session reached its turn limit; run `specrun reset`."
            )
        self.session_turns += 1
        try:
            system, tools = self.system_prompt(), await self.workers.wait_tools()
            await self.resolve_window()
            reminders: list[str] = []
            await asyncio.sleep(0)  # let a recall that is already done settle: consume point 1
            memory = self.prefetcher.consume_for_user_query()
            if memory:
                reminders.insert(0, memory)  # memory leads the system reminders
            await self.record(Message.user(text, reminders=tuple(reminders)))
            loops = LoopDetector()
            for _ in range(settings.max_turns_per_query):
                answer = await self._ask_model(out, system, tools)
                if answer.refusal is not None:
                    # Not an empty success: the person sees the model's own words, and the
                    # history keeps them as the answer (no calls, so it stays valid).
                    await self.record(Message.assistant(answer.refusal))
                    await self._end_of_turn(out, system, tools)
                    return TurnResult("refused", answer.refusal, time.monotonic() - started)
                await self.record(answer.message)
                if loops.observe(answer.message):
                    self.prefetcher.abort_and_clear(AbortReason.LOOP_DETECTED)
                    await self._answer_unanswered("not run: the same calls kept repeating")
                    return TurnResult(
                        "loop_detected",
                        "The model repeated the same tool calls; stopped the turn.",
                    )
                if self._over_token_limit(answer):
                    self.prefetcher.abort_and_clear(AbortReason.SESSION_TOKEN_LIMIT)
                    return TurnResult(
                        "session_token_limit",
                        "The session token limit was reached; run `specrun reset`.",
                    )
                if not answer.message.tool_calls:
                    await self._end_of_turn(out, system, tools)
                    return TurnResult("completed", elapsed_s=time.monotonic() - started)
                results: list[ToolResult] = []
                try:
                    for call in answer.message.tool_calls:
                        results.append(await self._run_tool(out, call, mode, can_confirm))
                except ApprovalLost as lost:
                    # The history stays valid: the calls that ran keep their results, the
                    # rest are answered as not run; then the turn ends (nobody is there).
                    why = str(lost)
                    ran = {r.call_id for r in results}
                    results += [
                        ToolResult(c.id, c.name, error=f"not run: {why}")
                        for c in answer.message.tool_calls
                        if c.id not in ran
                    ]
                    await self.record(Message.tool(tuple(results)))
                    self.prefetcher.abort_and_clear(AbortReason.TURN_ABORTED)
                    return TurnResult(
                        "aborted",
                        f"{why[:1].upper()}{why[1:]}: the call counts as declined and the "
                        "turn ended.",
                        time.monotonic() - started,
                    )
                memory = self.prefetcher.consume_for_tool_results()  # consume point 2
                await self.record(
                    Message.tool(tuple(results), reminders=(memory,) if memory else ())
                )
            self.prefetcher.abort_and_clear(AbortReason.BOUNDED_TURNS_ZERO)
            await self._end_of_turn(out, system, tools)
            return TurnResult(
                "max_turns_per_query",
                f"Stopped after {settings.max_turns_per_query} model turns for one query.",
            )
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

    # -- steps ----------------------------------------------------------------

    async def _ask_model(
        self, out: Emitter, system: str, tools: tuple[ToolSpec, ...]
    ) -> ChatResult:
        """One model request over the history; its words stream to the client.

        A request that would not fit the window is preceded by a compaction; a provider
        that still refuses it as too long gets one more try after a compaction (its
        error may name the real window), then the turn ends with ``CONTEXT_FULL``."""
        estimate = self.context.estimate(system, self.history, tools)
        if estimate > self.context.mid_turn_limit:
            await self._compact(out, system, tools)
        for attempt in (1, 2):
            request = ChatRequest(
                system=system,
                history=tuple(self.history),
                tools=tools,
                model=self.model_name,
                purpose="main",
            )

            async def show(event: StreamEvent) -> None:
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
                if not await self._compact(out, system, tools, forced=True):
                    raise
                continue
            break
        self.session_tokens += result.usage.total_tokens
        self.context.reported(result.usage, len(self.history) + 1)  # + this answer
        return result

    # -- context ----------------------------------------------------------------

    async def resolve_window(self) -> None:
        """Ask the endpoint for the model's window once, unless the setting gives it."""
        if self._window_asked:
            return
        self._window_asked = True
        reported = await self.model.context_window(self.model_name)
        if reported is not None and self.context.source == "default":
            self.context.window, self.context.source = reported, "endpoint"

    async def _end_of_turn(self, out: Emitter, system: str, tools: tuple[ToolSpec, ...]) -> None:
        """Compact when the next request would pass ``compactAt`` of the window, then
        keep the snapshot speculations fork from (so they fork from the compacted view)."""
        if self.context.estimate(system, self.history, tools) > self.context.compact_threshold:
            await self._compact(out, system, tools)
        self.save_snapshot(system, tools)

    async def compact_on_request(self, out: Emitter) -> str | None:
        """``specrun compact``: after the running turn, summarize all but the last turn.
        What was done in one sentence, or None when there is nothing to summarize."""
        async with self._turn_lock:
            system, tools = self.system_prompt(), await self.workers.wait_tools()
            await self.resolve_window()
            before = self.compactions
            await self._compact(out, system, tools, on_request=True)
            if self.compactions == before:
                return None
            self.save_snapshot(system, tools)
            return self._last_compaction

    async def _compact(
        self,
        out: Emitter,
        system: str,
        tools: tuple[ToolSpec, ...],
        *,
        forced: bool = False,
        on_request: bool = False,
    ) -> bool:
        """Replace the oldest part of the history by a summary (on disk first: one
        compaction record); whether anything was compacted. ``forced``: after an
        overflow error, where a cut anywhere beats none."""
        context = self.context
        before = context.estimate(system, self.history, tools)
        keep = context.keep_tokens // (2 if forced else 1)
        cut = compaction.split_point(self.history, keep, on_request=on_request)
        if cut is None:
            log.info("nothing to compact (%d messages)", len(self.history))
            return False
        old, kept = self.history[:cut], self.history[cut:]
        summarized = self._summarized.plus(old)
        summary = await compaction.summarize(
            self.model,
            self.fast_model,
            old,
            input_tokens=context.window // 2,
            kept_facts=summarized.text(),
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
        await asyncio.to_thread(self.history_store.append_compaction, record)
        self.history, self._summarized = compacted, summarized
        context.forget()
        context.last_estimate = after
        self.compactions += 1
        how = "" if summary.by == "model" else " (the fast model failed: kept the facts only)"
        self._last_compaction = (
            f"Compacted the conversation: {len(old)} earlier messages summarized{how}, "
            f"about {before:,} -> {after:,} tokens of the {context.window:,}-token window."
        )
        await out.notice(self._last_compaction)
        return True

    def _fit_result(self, result: ToolResult) -> ToolResult:
        """One tool result may take at most a quarter of the window: cut with a note."""
        limit = self.context.tool_result_tokens
        body = result.error if result.error is not None else result.output or ""
        if estimate_tokens(body) <= limit:
            return result
        cut = cut_to_tokens(body, limit - 60)
        note = (
            f"\n[Output cut to fit the model's context window: showing {len(cut):,} of "
            f"{len(body):,} characters; ask for a narrower part to see more.]"
        )
        if result.error is not None:
            return ToolResult(result.call_id, result.name, error=cut + note)
        return ToolResult(result.call_id, result.name, output=cut + note)

    async def _run_tool(
        self, out: Emitter, call: ToolCall, mode: ApprovalMode, can_confirm: bool
    ) -> ToolResult:
        policy = write_policy(call, mode)
        if policy == "refuse":
            return await self._refused(out, call, f"{call.name} is not allowed in plan mode.")
        hidden_name = hidden_name_reason(call)
        if policy == "ask" and not await self._confirm(
            out, call, hidden_name or f"{call.name} changes files", can_confirm
        ):
            return await self._refused(out, call, self._refusal_text(can_confirm, call,
                                                                     hidden_name or ""))
        await out.tool(call, "running")
        outcome = await self.tools_exec.run(call, shell_mode(call, mode))
        if outcome.needs_approval is not None:
            if mode is ApprovalMode.PLAN and call.name == SHELL_TOOL:
                return await self._refused(
                    out, call, "Only read-only shell commands run in plan mode."
                )
            if not await self._confirm(out, call, outcome.needs_approval, can_confirm):
                return await self._refused(
                    out, call, self._refusal_text(can_confirm, call, outcome.needs_approval)
                )
            outcome = await self.tools_exec.run(call, "full")
        result = self._fit_result(
            ToolResult(call.id, call.name, outcome.result.output, outcome.result.error)
        )
        await out.tool(
            call, "success" if result.ok else "error", result.error or result.output or ""
        )
        return result

    async def _refused(self, out: Emitter, call: ToolCall, why: str) -> ToolResult:
        await out.tool(call, "refused", why)
        return ToolResult(call.id, call.name, error=why)

    def _refusal_text(self, can_confirm: bool, call: ToolCall, why: str = "") -> str:
        """Why a call was not run, naming the one approval mode that allows exactly this
        call (file writes: auto-edit; shell, reads outside the project: yolo) and saying
        where it can be given."""
        if can_confirm:
            return "The user declined this tool call."
        needed = "auto-edit" if call.name in WRITE_TOOLS else "yolo"
        if why == HIDDEN_NAME_REASON:  # no mode allows it: only a yes at a terminal
            return (f"This call needs the user's approval ({why}) and no terminal can ask; "
                    "`specrun chat` or `specrun ask` on a terminal asks.")
        if self._from_accept:
            where = (
                f"`specrun accept` takes no approval mode: to allow it, ask the same prompt "
                f'with `specrun ask "<prompt>" --approval-mode {needed}`, or start the '
                f"service with --approval-mode {needed}"
            )
        else:
            where = f"rerun with --approval-mode {needed} to allow it"
        because = f" ({why})" if why else ""
        return f"This call needs the user's approval{because} and no terminal can ask; {where}."

    def pending_approval(self) -> ToolCall | None:
        """The call a running turn is waiting on a person's yes for, if any."""
        for approval in self._approvals.values():
            if not approval.future.done():
                return approval.call
        return None

    @property
    def busy(self) -> bool:
        return self._turn_lock.locked()

    async def _confirm(self, out: Emitter, call: ToolCall, reason: str, can_confirm: bool) -> bool:
        if not can_confirm:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        key = (out.req_id, call.id)
        self._approvals[key] = _Approval(future, out.req_id, call)
        timeout_s = self.settings.approval_timeout_s
        gone = "the client that was asked for approval is gone (Ctrl-C or killed)"
        with contextlib.ExitStack() as watching:
            pid = self._client_pid
            if pid is not None:
                # A pidfd is readable once the client exits: no polling, no missed exit.
                try:
                    pidfd = os.pidfd_open(pid)
                except ProcessLookupError:
                    future.set_exception(ApprovalLost(gone))
                else:
                    def client_exited() -> None:
                        if not future.done():
                            future.set_exception(ApprovalLost(gone))

                    watching.callback(os.close, pidfd)
                    loop.add_reader(pidfd, client_exited)
                    watching.callback(loop.remove_reader, pidfd)
            try:
                await out.approval(
                    call, reason if call.name != SHELL_TOOL else f"shell: {reason}"
                )
                async with asyncio.timeout(timeout_s):
                    return await future
            except TimeoutError:
                why = f"nobody answered the approval question within {timeout_s} s"
                await out.tool(call, "refused", f"Not run: {why}.")
                raise ApprovalLost(why) from None
            except ApprovalLost as lost:
                await out.tool(call, "refused", f"Not run: {lost}.")
                raise
            finally:
                self._approvals.pop(key, None)

    def answer_approval(self, ask_req_id: int, call_id: str, approved: bool) -> bool:
        approval = self._approvals.get((ask_req_id, call_id))
        if approval is None or approval.future.done():
            return False
        approval.future.set_result(approved)
        return True

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

    def tools(self) -> tuple[ToolSpec, ...]:
        """The tool registry the workers announced (empty until the first hello)."""
        return self.workers.tool_specs

    def system_prompt(self) -> str:
        return build_system_prompt(self.project_root, self.recaller.store.index_prompt())

    async def record(self, *messages: Message) -> None:
        """``append`` with the disk write (an fsync) off the event loop."""
        await asyncio.to_thread(self.history_store.append, messages)
        self.history.extend(messages)

    def append(self, *messages: Message) -> None:
        """Add to the history, on disk first: an answered turn survives a crash."""
        self.history_store.append(messages)
        self.history.extend(messages)

    async def _answer_unanswered(self, why: str) -> None:
        if self.history and self.history[-1].role == "assistant" and self.history[-1].tool_calls:
            calls = self.history[-1].tool_calls
            await self.record(
                Message.tool(tuple(ToolResult(c.id, c.name, error=why) for c in calls))
            )

    def _close_unanswered_calls(self) -> None:
        """After an abort, give every call of the last model message a result, so the
        history stays valid for the next request (results right after calls)."""
        if self.history and self.history[-1].role == "assistant" and self.history[-1].tool_calls:
            calls = self.history[-1].tool_calls
            self.append(
                Message.tool(
                    tuple(ToolResult(c.id, c.name, error="cancelled by the user") for c in calls)
                )
            )

    def _over_token_limit(self, answer: ChatResult) -> bool:
        limit = self.settings.session_token_limit
        return limit > 0 and self.session_tokens >= limit

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
                self.system_prompt(), self.history, self.tools()
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

    def reset(self) -> None:
        self.cancel()
        self.prefetcher.abort_and_clear(AbortReason.RESET)
        self.prefetcher.reset()
        self.history_store.new_session()
        self.session_id = self.history_store.current_session().session_id
        self.history = []
        self.snapshot = None
        self._snapshot_key = None
        self.session_turns = 0
        self.session_tokens = 0
        self.compactions = 0
        self._summarized = compaction.Summarized()
        self.context.forget()

    def turn_slot(self) -> asyncio.Lock:
        """The one-turn-at-a-time lock (see ``ForkSource.turn_slot``)."""
        return self._turn_lock

    async def extend_from_speculation(self, messages: list[Message]) -> None:
        """An accepted speculation's messages (its user message first) join the history as
        one more turn, and the snapshot the next speculation forks from includes them."""
        await self.record(*messages)
        self.session_turns += 1
        self.save_snapshot(self.system_prompt(), self.tools())

    # -- worker events (routed here for the workers running this chat's tools) ---

    async def on_worker_event(self, handle: WorkerHandle, event: WorkerEvent) -> None:
        if not self.tools_exec.on_event(handle, event):
            log.info("dropping a %s that answers no running tool call", type(event).__name__)

    async def on_worker_death(self, handle: WorkerHandle) -> None:
        self.tools_exec.on_death(handle)

    async def shutdown(self) -> None:
        self.cancel()
        self.prefetcher.abort_and_clear(AbortReason.SHUTDOWN)
        await self.prefetcher.aclose()
        self.history_store.close()
