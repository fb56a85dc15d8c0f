"""The approval questions of the main chat's running turn: asked of the client that
sent the prompt, answered by an ``ApprovalAnswer``, lost when that client exits or no
answer comes within ``approvalTimeoutS``.

A yes may be kept for the rest of the chat session: for a shell command, that exact
command text (not the program: ``git commit -m x`` allowed says nothing of ``git push``);
for a file tool (``edit``, ``write_file``), the tool. Kept in memory only: a new session,
or a restarted service, asks again. Only the main chat's own turns use it; speculations
never do (what runs ahead of the person is decided by the approval mode alone)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

from coordinator.service.emitter import Emitter
from protocol.rules.tools import SHELL_TOOL
from protocol.text.approval_words import shell_reason_in_words
from protocol.wire.chat import ToolCall


class ApprovalLost(Exception):
    """An approval question nobody can answer any more: the client that was asked is
    gone, or no answer came in time. The call counts as declined and the turn ends."""


@dataclass(frozen=True)
class Answer:
    """What the person said: yes or no, whether to keep the yes for the session, and
    the reason for a no (words for the model, '' for none)."""

    approved: bool
    remember: bool = False
    reason: str = ""


MAX_REASON_CHARS = 2000


def remembered_as(call: ToolCall) -> str:
    """What a kept yes for ``call`` allows: its exact command, or its tool."""
    if call.name == SHELL_TOOL:
        command = call.args().get("command")
        return f"shell:{command}" if isinstance(command, str) else f"tool:{call.name}"
    return f"tool:{call.name}"


@dataclass
class _Question:
    future: asyncio.Future[Answer]
    call: ToolCall


class Approvals:
    """The questions waiting for a person's yes or no, by (request, call)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.client_pid: int | None = None  # the asking client of the running turn
        self._waiting: dict[tuple[int, str], _Question] = {}
        self._kept: set[str] = set()  # ``remembered_as`` of the yeses kept this session

    def forget(self) -> None:
        """A new session: every kept yes is asked again."""
        self._kept.clear()

    def pending(self) -> ToolCall | None:
        """The call a running turn is waiting on a person's yes for, if any."""
        for question in self._waiting.values():
            if not question.future.done():
                return question.call
        return None

    def answer(self, ask_req_id: int, call_id: str, approved: bool, remember: bool = False,
               reason: str = "") -> bool:
        question = self._waiting.get((ask_req_id, call_id))
        if question is None or question.future.done():
            return False
        question.future.set_result(
            Answer(approved, remember and approved, "" if approved else reason.strip()[
                :MAX_REASON_CHARS])
        )
        return True

    async def ask(self, out: Emitter, call: ToolCall, reason: str,
                  rememberable: bool = True) -> Answer:
        """Ask the client of ``out`` whether ``call`` may run (a yes kept this session
        answers at once); raises ``ApprovalLost`` when that client exits or the time runs
        out first. ``rememberable``: a yes may be kept."""
        kept_as = remembered_as(call)
        if rememberable and kept_as in self._kept:
            what = "this command" if kept_as.startswith("shell:") else f"{call.name}"
            await out.notice(f"Allowed without asking: you allowed {what} for this session.")
            return Answer(True)
        answer = await self._ask(out, call, reason, rememberable)
        if not rememberable:
            return Answer(answer.approved, False, answer.reason)
        if answer.remember:
            self._kept.add(kept_as)
        return answer

    async def _ask(self, out: Emitter, call: ToolCall, reason: str,
                   rememberable: bool) -> Answer:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Answer] = loop.create_future()
        key = (out.req_id, call.id)
        self._waiting[key] = _Question(future, call)
        gone = "the client that was asked for approval is gone (Ctrl-C or killed)"
        with contextlib.ExitStack() as watching:
            pid = self.client_pid
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
                    call,
                    reason if call.name != SHELL_TOOL else shell_reason_in_words(reason),
                    rememberable,
                )
                async with asyncio.timeout(self.timeout_s):
                    return await future
            except TimeoutError:
                why = f"nobody answered the approval question within {self.timeout_s} s"
                await out.tool(call, "refused", f"Not run: {why}.")
                raise ApprovalLost(why) from None
            except ApprovalLost as lost:
                await out.tool(call, "refused", f"Not run: {lost}.")
                raise
            finally:
                self._waiting.pop(key, None)
