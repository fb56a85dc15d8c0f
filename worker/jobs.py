"""The two kinds of work a worker does.

``run_tool``: one of the main chat's tool calls, in the real tree. A shell command the
user has not approved runs only when it is proven read-only; otherwise nothing runs and
the answer says why approval is needed.

``run_speculation``: confine the process (kernel write backstop), run the speculative
loop against an overlay, report ``Completed``/``Boundary``, then the pipelined
suggestion. The worker exits afterwards (a confinement cannot be lifted), so the
process-wide changes made here (``TMPDIR``, no bytecode writes) die with it.

Test-only hook: when the environment variable ``SPECRUN_TEST_UNGATED_SHELL`` holds a
command, a speculation's ``run_shell_command`` call with exactly that command skips the
tool gate and runs with the full shell. It exists so a test can prove the kernel backstop
stops a write the gate would have refused. Unset (the default) it does nothing; it never
widens anything else, and a worker with it set logs a warning per speculation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from overlay import Overlay, mark_owner, speculation_base_dir
from overlay.sandbox import restrict_writes_to
from protocol.chat import ToolCall, ToolResult
from protocol.model import ModelClient, ModelError
from protocol.work import (
    Boundary,
    Completed,
    Failed,
    PipelinedSuggestion,
    RunSpeculation,
    RunTool,
    ToolDone,
)
from worker.capture import import_capture, remove_capture
from worker.fork import ForkedChat, pipelined_suggestion
from worker.shell import classify
from worker.shell.executor import ShellExecutor
from worker.shell.runner import ShellResult
from worker.speculation import Emit, LoopEnd, Toolbox, final_event, run_loop
from worker.tools import DirectAccess, ToolContext, execute

if TYPE_CHECKING:
    from worker.process import Outbox

log = logging.getLogger("specrun.worker.jobs")

UNGATED_SHELL_ENV = "SPECRUN_TEST_UNGATED_SHELL"
SHELL_TOOL = "run_shell_command"
EXTRA_WRITABLE = ("/dev/null",)
"""Files a confined worker may still write besides its own directories."""


# --- main-chat tool calls ------------------------------------------------------------------


async def run_tool(job: RunTool, outbox: Outbox) -> None:
    """Answer ``job`` with exactly one ``ToolDone`` (or ``Failed`` on an internal error)."""
    try:
        result, needs_approval = await _main_chat_tool(job)
    except Exception as exc:
        log.exception("tool job %s failed", job.job_id)
        await outbox.send(
            Failed(job_id=job.job_id, epoch=job.epoch, error=f"The tool call failed: {exc}")
        )
        return
    await outbox.send(
        ToolDone(job_id=job.job_id, epoch=job.epoch, result=result, needs_approval=needs_approval)
    )


async def _main_chat_tool(job: RunTool) -> tuple[ToolResult, str | None]:
    call = job.call
    if call.name == SHELL_TOOL and job.shell == "read_only":
        reason = approval_needed(call)
        if reason is not None:
            refused = ToolResult(
                call.id,
                call.name,
                error=f"Not run: the command needs the user's approval ({reason})",
            )
            return refused, reason
    ctx = ToolContext(
        access=DirectAccess(job.project_root),
        shell_mode=job.shell,
        shell_timeout_s=job.timeout_s,
    )
    return await execute(call, ctx), None


def approval_needed(call: ToolCall) -> str | None:
    """Why a shell call must wait for the user's yes, or ``None`` when it is proven
    read-only. A call without a command runs: the tool itself reports the bad argument."""
    command = call.args().get("command")
    if not isinstance(command, str) or not command.strip():
        return None
    verdict = classify(command)
    if verdict.read_only:
        return None
    return verdict.reason or "not proven read-only"


# --- speculations --------------------------------------------------------------------------


async def run_speculation(job: RunSpeculation, outbox: Outbox) -> None:
    """Confine, run the loop, report the end, then the pipelined suggestion. Never raises.

    A model error during the loop ends as ``Failed`` with its one-sentence message, any
    other failure as ``Failed`` too; a failure of the pipelined suggestion never fails the
    speculation.
    """
    client = ModelClient(
        job.endpoint.base_url, job.endpoint.api_key, cache_sharing=job.endpoint.cache_sharing
    )
    try:
        event, end = await _speculate(job, client, outbox.send)
        await outbox.send(event)
        if end is not None and end.status == "completed":
            await outbox.send(await _pipelined(job, client, end))
    finally:
        await client.aclose()


async def _speculate(
    job: RunSpeculation, client: ModelClient, send: Emit
) -> tuple[Completed | Boundary | Failed, LoopEnd | None]:
    """The confined loop and the event that reports how it ended."""
    scratch: Path | None = None
    shell: ShellExecutor | None = None
    try:
        scratch = make_dirs(job)
        # The shell helper must start before the worker confines itself: it mounts each
        # command's view of the overlay, which a Landlock-confined process may not do.
        shell = ShellExecutor(job.project_root, job.overlay_dir, str(scratch))
        if job.sandbox:
            confine(job)
        overlay = Overlay(job.project_root, job.overlay_dir)
        tools = Toolbox(
            overlay,
            job.approval_mode,
            shell_timeout_s=job.limits.shell_timeout_s,
            ungated_command=_ungated_command(),
            read_only_runner=shell.run,
            captured_runner=_captured_runner(shell, overlay, scratch)
            if job.speculate_shell
            else None,
        )
        end = await run_loop(job, client, tools, send)
        return final_event(job, end, overlay), end
    except ModelError as exc:
        return Failed(job_id=job.job_id, epoch=job.epoch, error=str(exc)), None
    except Exception as exc:
        log.exception("speculation %s failed", job.job_id)
        return Failed(job_id=job.job_id, epoch=job.epoch, error=_sentence(exc)), None
    finally:
        if shell is not None:
            await asyncio.to_thread(shell.close)
        # No tool runs after the loop: drop the scratch dir now, so the coordinator's
        # overlay cleanup can also remove the then empty per-pid directory.
        _remove(scratch)


def _captured_runner(
    shell: ShellExecutor, overlay: Overlay, scratch: Path
) -> Callable[[str, str | Path, float, int], ShellResult]:
    """Opt-in: run a command that is not read-only sandboxed, then keep what it wrote."""
    runs = itertools.count(1)

    def run(command: str, cwd: str | Path, timeout_s: float, output_cap: int) -> ShellResult:
        capture = scratch / f"capture-{next(runs)}"
        try:
            result = shell.run_captured(command, cwd, timeout_s, output_cap, capture)
            note = import_capture(capture / "upper", overlay).note()
        finally:
            remove_capture(capture)
        if note:
            result = dataclasses.replace(result, stdout=f"{result.stdout}\n{note}".lstrip("\n"))
        return result

    return run


async def _pipelined(job: RunSpeculation, client: ModelClient, end: LoopEnd) -> PipelinedSuggestion:
    text: str | None = None
    reason: str | None = "disabled"
    if job.pipelined:
        chat = ForkedChat.from_snapshot(job.snapshot, job.model)
        text, reason = await pipelined_suggestion(
            client, chat, end.transcript.messages, job.suggestion
        )
    return PipelinedSuggestion(job_id=job.job_id, epoch=job.epoch, text=text, reason=reason)


def scratch_dir() -> Path:
    """This worker's temp dir: ``<speculation base>/<pid>/tmp``."""
    return speculation_base_dir() / str(os.getpid()) / "tmp"


def make_dirs(job: RunSpeculation) -> Path:
    """The overlay directory and this worker's scratch directory; returns the latter."""
    scratch = scratch_dir()
    _make_base(scratch.parent.parent)
    for path in (scratch.parent, scratch, Path(job.overlay_dir).absolute()):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The overlay outlives this worker (it waits for the user's Tab): our parent, the
    # fork server, lives exactly as long as the coordinator that will apply or remove it.
    mark_owner(scratch.parent, os.getppid())
    return scratch


def confine(job: RunSpeculation) -> Path:
    """The kernel write backstop, applied before any tool runs.

    Creates the overlay directory and this worker's scratch directory
    (``<speculation base>/<pid>/tmp``, swept with the per-pid directory if the worker
    dies), points ``TMPDIR`` at the scratch directory for tool subprocesses, stops Python
    from writing bytecode, then lets this process and its children write only beneath
    ``<speculation base>/<pid>/``, the overlay directory and ``/dev/null``. Everything
    else the worker needs is already open (the ZeroMQ socket, stdio) or needs no disk
    (httpx). Without Landlock nothing is confined and nothing fails (the hello already
    said ``sandbox: none``). Returns the scratch directory.

    Landlock governs contents and directory entries, not metadata: a command that got
    past the gate could still change a real file's timestamps or mode (``touch``,
    ``chmod`` of an existing file), never its bytes, name or existence.
    """
    scratch = make_dirs(job)
    own = scratch.parent
    overlay_dir = Path(job.overlay_dir).absolute()
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = str(scratch)
    writable = [own]
    if not overlay_dir.is_relative_to(own):
        writable.append(overlay_dir)
    writable.extend(Path(p) for p in EXTRA_WRITABLE if os.path.exists(p))
    if restrict_writes_to(writable):
        log.debug("speculation %s confined to %s", job.job_id, [str(p) for p in writable])
    return scratch


def _make_base(base: Path) -> None:
    """The shared speculation base, sticky and world-writable like ``/tmp`` itself."""
    if base.is_dir():
        return
    base.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        base.chmod(0o1777)


def _ungated_command() -> str | None:
    command = os.environ.get(UNGATED_SHELL_ENV) or None
    if command is not None:
        log.warning("%s is set: the test-only ungated shell probe is active", UNGATED_SHELL_ENV)
    return command


def _remove(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def _sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"The speculation failed: {text}"
