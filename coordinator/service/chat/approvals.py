"""The approval questions of the main chat's running turn: asked of the client that
sent the prompt, answered by an ``ApprovalAnswer``, lost when that client exits or no
answer comes within ``approvalTimeoutS``."""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

from coordinator.service.emitter import Emitter
from protocol.rules.tools import SHELL_TOOL
from protocol.wire.chat import ToolCall


class ApprovalLost(Exception):
    """An approval question nobody can answer any more: the client that was asked is
    gone, or no answer came in time. The call counts as declined and the turn ends."""


@dataclass
class _Question:
    future: asyncio.Future[bool]
    call: ToolCall


class Approvals:
    """The questions waiting for a person's yes or no, by (request, call)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.client_pid: int | None = None  # the asking client of the running turn
        self._waiting: dict[tuple[int, str], _Question] = {}

    def pending(self) -> ToolCall | None:
        """The call a running turn is waiting on a person's yes for, if any."""
        for question in self._waiting.values():
            if not question.future.done():
                return question.call
        return None

    def answer(self, ask_req_id: int, call_id: str, approved: bool) -> bool:
        question = self._waiting.get((ask_req_id, call_id))
        if question is None or question.future.done():
            return False
        question.future.set_result(approved)
        return True

    async def ask(self, out: Emitter, call: ToolCall, reason: str) -> bool:
        """Ask the client of ``out`` whether ``call`` may run; raises ``ApprovalLost``
        when that client exits or the time runs out first."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
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
                    call, reason if call.name != SHELL_TOOL else f"shell: {reason}"
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
