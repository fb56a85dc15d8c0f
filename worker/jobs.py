"""The two kinds of work a worker does.

``run_tool``: one of the main chat's tool calls, in the real tree. A shell command the
user has not approved runs only when it is proven read-only, and then inside the
containment profile (``worker.contain``): read-only project, no network, no specrun
socket, limits. If the profile cannot be had, nothing runs and the answer says the user
must approve it.

``run_speculation``: confine the process (kernel write backstop), run the speculative
loop against an overlay, report ``Completed``/``Boundary``, then the pipelined
suggestion. Every shell command runs through the worker's sandbox helper, inside the
same profile with the speculation's writes on top. The worker exits afterwards (a
confinement cannot be lifted), so the process-wide changes made here (``TMPDIR``, no
bytecode writes) die with it.

Both take the worker's ``WorkerSeams`` (``protocol.wire.seams``): what a test built into
this worker, given as an argument of its start; production's are ``NO_SEAMS``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from overlay import (
    Overlay,
    ensure_private_base,
    ensure_private_dir,
    make_private_dir,
    mark_owner,
    speculation_base_dir,
)
from protocol.model import ModelClient, ModelError
from protocol.rules.tools import READ_TOOLS, SHELL_TOOL
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import ToolCall, ToolResult, Usage
from protocol.wire.endpoints import runtime_base
from protocol.wire.seams import NO_SEAMS, WorkerSeams
from protocol.wire.work import (
    Boundary,
    CommandLimits,
    Completed,
    Failed,
    ModelUsage,
    PipelinedSkipReason,
    PipelinedSuggestion,
    RunSpeculation,
    RunTool,
    ToolDone,
    WriteGuard,
)
from worker.capture import capture_space, import_capture, remove_capture
from worker.contain.backstop import Opened, ShellRunner, guarded_runner
from worker.contain.captured_env import CapturedSetup, captured_setup, sandbox_notes
from worker.contain.helper import Captured, Request, SandboxHelper, shell_program
from worker.contain.landlock import restrict_writes_to
from worker.contain.limits import limit_reached
from worker.contain.spawn import ContainmentUnavailable
from worker.contain.toolchains import missing_program
from worker.fork import ForkedChat, pipelined_suggestion
from worker.gate import read_only_verdict
from worker.shell.git_config import git_config_hazard
from worker.shell.runner import ShellResult
from worker.shell.write_targets import protected_write_paths, protected_write_reason
from worker.speculation import WALL_CLOCK, Emit, LoopEnd, Toolbox, final_event, run_loop
from worker.tools import (
    DirectAccess,
    ToolContext,
    ToolStop,
    arguments_fit,
    declared_paths,
    execute,
)
from worker.tools.reach import read_boundary

if TYPE_CHECKING:
    from worker.outbox import Outbox

log = logging.getLogger("specrun.worker.jobs")

EXTRA_WRITABLE = ("/dev/null",)
"""Files a confined worker may still write besides its own directories."""


# --- main-chat tool calls ------------------------------------------------------------------


async def run_tool(
    job: RunTool, outbox: Outbox, helper: SandboxHelper, seams: WorkerSeams = NO_SEAMS
) -> None:
    """Answer ``job`` with exactly one ``ToolDone`` (or ``Failed`` on an internal error)."""
    try:
        result, needs_approval, always_asks = await _main_chat_tool(job, helper, seams)
    except Exception as exc:
        log.exception("tool job %s failed", job.job_id)
        await outbox.send(
            Failed(job_id=job.job_id, epoch=job.epoch, error=f"The tool call failed: {exc}")
        )
        return
    await outbox.send(
        ToolDone(job_id=job.job_id, epoch=job.epoch, result=result, needs_approval=needs_approval,
                 always_asks=always_asks)
    )


async def _main_chat_tool(
    job: RunTool, helper: SandboxHelper, seams: WorkerSeams
) -> tuple[ToolResult, str | None, bool]:
    """The result, why it did not run (the person decides), and whether that question
    is about a protected write (asked in every mode, its yes never kept)."""
    call = job.call
    protected = _protected_shell_write(job)
    unapproved = job.shell == "read_only"
    ctx = ToolContext(
        access=DirectAccess(
            job.project_root, private=job.private_paths, contained=unapproved
        ),
        shell_mode=job.shell,
        shell_timeout_s=job.timeout_s,
    )
    if call.name in READ_TOOLS and unapproved:
        # Outside the project, or specrun's own state: the user decides what leaves.
        boundary = read_boundary(
            call.name, call.args(), declared_paths(call.name), job.project_root, job.private_paths
        )
        if boundary is not None:
            return _refused(call, boundary.text()), boundary.text(), False
    if protected is not None and not unapproved:  # yolo, or a yes that was not about this
        return _refused(call, protected), protected, True
    if call.name == SHELL_TOOL and not unapproved:
        ctx = dataclasses.replace(ctx, full_runner=_guarded_runner(job))
    if call.name == SHELL_TOOL and unapproved:
        reason = approval_needed(call, job.project_root, seams)
        if reason is not None:
            if protected is not None:  # one question, the one no mode or kept yes answers
                return _refused(call, protected), protected, True
            return _refused(call, reason), reason, False
        runner = contained_runner(
            helper,
            job.project_root,
            None,
            job.limits,
            stop_on_limit=False,
            private_paths=job.private_paths,
        )
        ctx = dataclasses.replace(ctx, read_only_runner=runner)
    try:
        return await execute(call, ctx), None, False
    except ToolStop as stop:  # a missing sandbox layer, a read that leaves: the user decides
        return _refused(call, stop.reason.text()), stop.reason.text(), False


def _protected_shell_write(job: RunTool) -> str | None:
    """Why this main-chat shell command must ask in every mode: it writes a protected or
    runs-later path (``worker.shell.write_targets``), unless the person said yes to that."""
    command = job.call.args().get("command") if job.call.name == SHELL_TOOL else None
    if job.write_guard is None or job.protected_confirmed or command is None:
        return None
    if not isinstance(command, str):
        return None  # the tool itself refuses a command that is not text
    return protected_write_reason(command, job.write_guard)


def _guarded_runner(job: RunTool) -> ShellRunner:
    """The main chat's full shell behind the kernel backstop, with what the person said
    yes to writing (the paths the command names) left writable."""
    guard = job.write_guard or WriteGuard(os.path.realpath(job.project_root))
    opened = Opened()
    command = job.call.args().get("command")
    if job.protected_confirmed and isinstance(command, str):
        paths, everything = protected_write_paths(command, guard)
        opened = Opened(paths, everything)
    return guarded_runner(guard, opened)


def _refused(call: ToolCall, reason: str) -> ToolResult:
    return ToolResult(
        call.id, call.name, error=f"Not run: the call needs the user's approval ({reason})"
    )


def approval_needed(
    call: ToolCall, project_root: str, seams: WorkerSeams = NO_SEAMS
) -> str | None:
    """Why a shell call must wait for the user's yes, or ``None`` when it is proven
    read-only (and, for git, the repository's configuration names no program git could
    run). A call without a command runs: the tool itself reports the bad argument."""
    command = call.args().get("command")
    if not isinstance(command, str) or not command.strip():
        return None
    verdict = read_only_verdict(command, seams)
    if not verdict.read_only:
        return verdict.reason or "not proven read-only"
    if verdict.uses_git:
        hazard = git_config_hazard(project_root)
        if hazard is not None:
            return f"git_config:{hazard}"
    return None


def contained_runner(
    helper: SandboxHelper,
    project_root: str,
    overlay_dir: str | None,
    limits: CommandLimits,
    *,
    stop_on_limit: bool,
    private_paths: tuple[str, ...] = (),
    deadline: float | None = None,
    session: str | None = None,
) -> Callable[[str, str | Path, float, int], ShellResult]:
    """A shell runner for the tools: every command goes through the sandbox helper.

    A missing layer raises ``ToolStop`` with ``sandbox_unavailable`` and the layer: the
    command did not run, and will not run with less containment. With ``stop_on_limit``
    (speculations) a command stopped by a limit raises ``ToolStop`` with ``limit`` and its
    name, and one cut short by the speculation's ``deadline`` (monotonic) ``limit``
    ``wall_clock``; a command
    that reached its own timeout is a result like any other (the model sees that it was
    killed, as in the main chat). The result carries notes on the sandbox it ran in (no
    network...)."""

    def run(command: str, cwd: str | Path, timeout_s: float, output_cap: int) -> ShellResult:
        request = Request(
            command=command,
            cwd=os.fspath(cwd),
            project=project_root,
            timeout_s=_within(timeout_s, deadline),
            output_cap=output_cap,
            overlay_dir=overlay_dir,
            limits=limits,
            private_paths=private_paths,
            session=session,
        )
        try:
            result = helper.run(request)
        except ContainmentUnavailable as exc:
            raise ToolStop(BoundaryReason("sandbox_unavailable", exc.layer), str(exc)) from exc
        result = _stop_on_limit(result, deadline) if stop_on_limit else result
        return _with_notes(result, captured=False)

    return run


def _with_notes(result: ShellResult, *, captured: bool) -> ShellResult:
    notes = sandbox_notes(result, captured=captured)
    return dataclasses.replace(result, notes=result.notes + notes) if notes else result


def _within(timeout_s: float, deadline: float | None) -> float:
    """A command's timeout, shortened to end by the speculation's deadline."""
    if deadline is None:
        return timeout_s
    return max(min(timeout_s, deadline - time.monotonic()), 0.01)


def _stop_on_limit(result: ShellResult, deadline: float | None = None) -> ShellResult:
    if result.timed_out and deadline is not None and time.monotonic() >= deadline:
        raise ToolStop(WALL_CLOCK, "the speculation reached its wall-clock limit")
    limit = limit_reached(result)
    if limit is not None and limit != "timeout":
        raise ToolStop(BoundaryReason("limit", limit), f"the command hit its {limit} limit")
    return result


# --- speculations --------------------------------------------------------------------------


async def run_speculation(
    job: RunSpeculation, outbox: Outbox, helper: SandboxHelper, seams: WorkerSeams = NO_SEAMS
) -> None:
    """Confine, run the loop, report the end, then the pipelined suggestion. Never raises.

    A model error during the loop ends as ``Failed`` with its one-sentence message, any
    other failure as ``Failed`` too; a failure of the pipelined suggestion never fails the
    speculation.
    """
    client = ModelClient(
        job.endpoint.base_url,
        job.endpoint.api_key,
        cache_sharing=job.endpoint.cache_sharing,
        on_usage=_usage_reporter(job, outbox),
        timeout_s=job.endpoint.timeout_s,
        options=job.endpoint.options,
        arguments_fit=arguments_fit,
    )
    try:
        event, end = await _speculate(job, client, outbox.send, helper, seams)
        await outbox.send(event)
        if end is not None and end.status == "completed":
            await outbox.send(await _pipelined(job, client, end))
    finally:
        await client.aclose()


def _usage_reporter(job: RunSpeculation, outbox: Outbox) -> Callable[[str, Usage], Any]:
    """Sends each model request's tokens to the coordinator as soon as its answer is in,
    before the events that answer leads to, so what a speculation spent is counted even
    if it is killed later, and is complete when ``Completed`` arrives."""

    async def report(purpose: str, usage: Usage) -> None:
        kind: Literal["speculation", "pipelined"] = (
            "pipelined" if purpose == "pipelined" else "speculation"
        )
        await outbox.send(ModelUsage(job_id=job.job_id, epoch=job.epoch, purpose=kind, usage=usage))

    return report


async def _speculate(
    job: RunSpeculation, client: ModelClient, send: Emit, helper: SandboxHelper,
    seams: WorkerSeams,
) -> tuple[Completed | Boundary | Failed, LoopEnd | None]:
    """The confined loop and the event that reports how it ended."""
    scratch: Path | None = None
    try:
        scratch = make_dirs(job)
        # Read before confining: the user's PATH, git identity and toolchain directories.
        setup = _setup_for(job)
        if job.sandbox:
            confine(job)
        deadline = time.monotonic() + job.limits.wall_clock_s
        overlay = Overlay(job.project_root, job.overlay_dir)
        limits = job.containment.limits
        runner = contained_runner(
            helper,
            job.project_root,
            job.overlay_dir,
            limits,
            stop_on_limit=True,
            private_paths=job.containment.private_paths,
            deadline=deadline,
            session=job.job_id,
        )
        tools = Toolbox(
            overlay,
            job.approval_mode,
            shell_timeout_s=job.limits.shell_timeout_s,
            seams=seams,
            read_only_runner=runner,
            captured_runner=_captured_runner(helper, job, overlay, scratch, setup, deadline)
            if job.speculate_shell
            else None,
            containment=job.containment,
        )
        end = await run_loop(job, client, tools, send, deadline=deadline)
        return final_event(job, end, overlay), end
    except ModelError as exc:
        return Failed(job_id=job.job_id, epoch=job.epoch, error=str(exc)), None
    except Exception as exc:
        log.exception("speculation %s failed", job.job_id)
        return Failed(job_id=job.job_id, epoch=job.epoch, error=_sentence(exc)), None
    finally:
        # No tool runs after the loop: drop the scratch dir now, so the coordinator's
        # overlay cleanup can also remove the then empty per-pid directory; and the
        # speculation's /tmp, HOME and carry layer in the helper.
        helper.end_session()
        _remove(scratch)


def _setup_for(job: RunSpeculation) -> Callable[[], CapturedSetup]:
    """What captured commands get, worked out at the first one (tens of milliseconds of
    directory scans and two ``git config`` runs that most speculations never need), from
    the user's environment as it was before ``confine`` changed ``TMPDIR``."""
    environ = dict(os.environ)
    private = [str(speculation_base_dir()), str(runtime_base())]
    paths = job.containment.toolchain_paths
    return functools.cache(lambda: captured_setup(job.project_root, environ, paths, private))


def _captured_runner(
    helper: SandboxHelper,
    job: RunSpeculation,
    overlay: Overlay,
    scratch: Path,
    setup: Callable[[], CapturedSetup],
    deadline: float | None = None,
) -> Callable[[str, str | Path, float, int], ShellResult]:
    """Opt-in: run a command that is not read-only in a writable view, with the user's
    toolchains and git identity (``setup``), then keep what it wrote (within the quota,
    never a protected path). The view's writes land on a file system the size of the quota
    left: a command that fills it ends the speculation at ``quota:overlay_bytes`` /
    ``quota:overlay_files`` as the quota check would. A command whose program the view
    lacks but the user's machine has stops the speculation
    (``toolchain_missing:<program>``): Tab then runs the prompt for real, instead of
    showing a "command not found" that the user's own terminal would not give."""
    runs = itertools.count(1)
    shell = shell_program() or "bash"

    def run(command: str, cwd: str | Path, timeout_s: float, output_cap: int) -> ShellResult:
        capture_dir = scratch / f"capture-{next(runs)}"
        size, inodes = capture_space(overlay, job.containment)
        given = setup()
        request = Request(
            command=command,
            cwd=os.fspath(cwd),
            project=job.project_root,
            timeout_s=_within(timeout_s, deadline),
            output_cap=output_cap,
            mode="captured",
            overlay_dir=job.overlay_dir,
            capture_dir=os.fspath(capture_dir),
            capture_bytes=size,
            capture_inodes=inodes,
            limits=job.containment.limits,
            private_paths=job.containment.private_paths,
            toolchains=given.toolchains.binds,
            env=given.env,
            session=job.job_id,
            # every directory and link of the speculation's commands: room beyond the
            # quota's files, since a build's directories are not counted there
            session_inodes=4 * job.containment.overlay_quota_files + 1024,
        )
        try:
            with _run_captured(helper, request) as captured:
                if captured.full is not None:
                    raise ToolStop(
                        BoundaryReason("quota", captured.full),
                        "the command ran out of the speculation's quota",
                    )
                result = _stop_on_limit(captured.result, deadline)
                missing = missing_program(result.stderr, shell, os.fspath(cwd), given.host_path)
                if missing is not None:
                    raise ToolStop(
                        BoundaryReason("toolchain_missing", missing),
                        f"{missing} is on this machine but not in the speculation's view",
                    )
                note = import_capture(captured.root / "upper", overlay, job.containment).note()
        finally:
            remove_capture(capture_dir)
        if note:
            result = dataclasses.replace(result, stdout=f"{result.stdout}\n{note}".lstrip("\n"))
        return _with_notes(result, captured=True)

    return run


def _run_captured(helper: SandboxHelper, request: Request) -> Captured:
    try:
        return helper.run_captured(request)
    except ContainmentUnavailable as exc:
        raise ToolStop(BoundaryReason("sandbox_unavailable", exc.layer), str(exc)) from exc


async def _pipelined(job: RunSpeculation, client: ModelClient, end: LoopEnd) -> PipelinedSuggestion:
    texts: tuple[str, ...] = ()
    reason: PipelinedSkipReason | None = "disabled"
    if job.pipelined:
        chat = ForkedChat.from_snapshot(job.snapshot, job.model)
        texts, reason = await pipelined_suggestion(
            client, chat, end.conversation.messages, job.suggestion, job.alternatives
        )
    return PipelinedSuggestion(
        job_id=job.job_id,
        epoch=job.epoch,
        text=texts[0] if texts else None,
        reason=reason,
        alternatives=texts if job.alternatives > 1 else (),
    )


def scratch_dir() -> Path:
    """This worker's temp dir: ``<speculation base>/<pid>/tmp``."""
    return speculation_base_dir() / str(os.getpid()) / "tmp"


def make_dirs(job: RunSpeculation) -> Path:
    """This worker's private per-pid directory with its scratch directory, and the
    overlay directory (created exclusively: a leftover or a planted entry is refused);
    returns the scratch directory."""
    scratch = scratch_dir()
    ensure_private_base(scratch.parent.parent)
    own = ensure_private_dir(scratch.parent)
    make_private_dir(scratch, replace_stale=True)
    overlay_dir = Path(job.overlay_dir).absolute()
    if overlay_dir.parent == own:
        make_private_dir(overlay_dir)
    # The overlay outlives this worker (it waits for the user's Tab): our parent, the
    # fork server, lives exactly as long as the coordinator that will apply or remove it.
    mark_owner(own, os.getppid())
    return scratch


def confine(job: RunSpeculation) -> Path:
    """The kernel write backstop, applied before any tool runs (after ``make_dirs``).

    Points ``TMPDIR`` at the scratch directory for tool subprocesses, stops Python
    from writing bytecode, then lets this process and its children write only beneath
    ``<speculation base>/<pid>/``, the overlay directory and ``/dev/null``. Everything
    else the worker needs is already open (the ZeroMQ socket, stdio) or needs no disk
    (httpx). Without Landlock nothing is confined and nothing fails (the hello already
    said ``sandbox: none``). Returns the scratch directory.

    Landlock governs contents and directory entries, not metadata: a command that got
    past the gate could still change a real file's timestamps or mode (``touch``,
    ``chmod`` of an existing file), never its bytes, name or existence.
    """
    scratch = scratch_dir()
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


def _remove(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def _sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"The speculation failed: {text}"
