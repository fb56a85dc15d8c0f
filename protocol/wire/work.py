"""Coordinator <-> worker messages.

Jobs flow coordinator -> worker; events flow worker -> coordinator. Every
message names its job (a speculation id or a tool-job id) and the coordinator
epoch it belongs to: the coordinator drops any event whose (job, epoch) is not
the one it is waiting for, so a late message from a killed worker, or from a
worker of a previous coordinator, is never applied.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from protocol.text.secret_text import without_password
from protocol.wire.approval import ApprovalMode
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import CacheSafeSnapshot, Message, ToolCall, ToolResult, ToolSpec, Usage
from protocol.wire.model_options import ModelOptions

PROJECT_ROOT_ENV = "SPECRUN_FORK_SERVER_PROJECT"
"""Set by the pool for its fork server: the project its workers will serve. The fork server
lists the project's directories once for the read-only git hazard check, so a worker starts
with that listing and only looks again at directories changed since."""

# --- fixed sets of values ----------------------------------------------------

Sandbox = Literal["landlock", "none"]
"""A worker's own write backstop: ``landlock`` when the kernel can confine speculations."""

ShellPermission = Literal["read_only", "full"]
"""What a main-chat shell call may run: ``read_only`` only if the classifier proves the
command read-only (else the worker asks back), ``full`` anything (the user said yes)."""

ToolDecision = Literal["allow", "redirect", "sandbox"]
"""The gate's decision for a speculative tool call that runs (a boundary stops instead)."""

WorkerPurpose = Literal["speculation", "pipelined"]
"""What a speculation's worker asked the model for: the loop, or the next suggestion."""

FilterReason = Literal[
    "empty",
    "hidden_characters",
    "done",
    "meta_text",
    "meta_wrapped",
    "error_message",
    "prefixed_label",
    "too_few_words",
    "too_many_words",
    "too_long",
    "multiple_sentences",
    "has_formatting",
    "evaluative",
    "ai_voice",
]
"""Why ``protocol.prompts.prediction.filter_suggestion`` suppresses a guess, in the order its checks
run. Here rather than there so the wire does not import the filter's patterns."""

PipelinedSkipReason = Literal[FilterReason, "disabled", "error", "refusal"]
"""Why a completed speculation has no pipelined suggestion: the suggestion filter's reason,
pipelining off for this job, a failed model request, or a refusal."""


# --- shared pieces -----------------------------------------------------------


class ModelEndpoint(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where a worker sends its model requests. The key crosses the process boundary
    inside the job only; it is never logged."""

    base_url: str
    api_key: str | None = None
    cache_sharing: bool = True
    timeout_s: float = 120.0  # between bytes, once an answer has begun
    options: ModelOptions = msgspec.field(default_factory=ModelOptions)

    def __repr__(self) -> str:  # keep the key out of logs and tracebacks
        return (
            f"ModelEndpoint(base_url={without_password(self.base_url)!r}, "
            f"api_key={'***' if self.api_key else None})"
        )


class SpeculationLimits(msgspec.Struct, frozen=True):
    max_turns: int = 20
    max_messages: int = 100
    # per shell command (the speculationShellTimeoutS setting): sized for test suites
    shell_timeout_s: float = 300.0
    # the whole speculation (model turns and commands): then it ends at limit:wall_clock
    wall_clock_s: float = 600.0


class CommandLimits(msgspec.Struct, frozen=True):
    """Per-command limits of the containment profile (design §11); from settings."""

    cpu_s: int = 60
    memory_bytes: int = 4 << 30
    file_size_bytes: int = 256 << 20
    open_files: int = 1024
    processes: int = 128
    tmp_bytes: int = 512 << 20


class Containment(msgspec.Struct, frozen=True):
    """What bounds a speculation besides the gate: the per-command limits, the overlay
    quota and the paths it may never write (design §11)."""

    limits: CommandLimits = CommandLimits()
    overlay_quota_bytes: int = 256 << 20
    overlay_quota_files: int = 2000
    protected_paths: tuple[str, ...] = ()
    # specrun's own state besides <project>/.specrun (the memory directories, absolute):
    # never read or listed by a speculation, hidden in its commands' view
    private_paths: tuple[str, ...] = ()
    # more host paths a captured command sees read-only (the toolchainPaths setting)
    toolchain_paths: tuple[str, ...] = ()
    # Files that run later without a key press (``protocol.rules.runs_later``): extra patterns, and
    # whether writing one is a boundary (``runs_later:<path>``) instead of a flagged change.
    runs_later_paths: tuple[str, ...] = ()
    runs_later_boundary: bool = False


LayerName = Literal[
    "filesystem", "network", "ipc_signals", "limits", "privileges", "landlock", "seccomp",
    "chat_backstop",
]
"""The speculation's containment profile, then ``chat_backstop``: what holds the main
chat's own shell commands (its kernel backstop, ``worker.contain.backstop``)."""


class LayerStatus(msgspec.Struct, frozen=True):
    """One layer of the containment profile as a worker found it at start."""

    name: LayerName
    active: bool
    detail: str


class OriginalFile(msgspec.Struct, frozen=True):
    """A real file as it was when the overlay copied it up (``overlay.Fingerprint`` on the
    wire)."""

    size: int
    mtime_ns: int
    sha256: str


class WrittenFile(msgspec.Struct, frozen=True):
    """One file a speculation wrote: where its new content is, and what the real file
    looked like at copy-up (``None``: it did not exist). ``deleted``: the speculation removed
    it (a tool or a captured command); ``overlay_path`` then holds nothing. ``by_command``:
    a sandboxed command wrote it last, not a file tool (the coordinator holds back such
    files when git ignores them: build output and caches). ``link``: a command left a
    symlink there with this target instead of a file (``overlay_path`` then holds nothing;
    the coordinator applies it only within ``protocol.rules.links``)."""

    overlay_path: str
    original: OriginalFile | None = None
    deleted: bool = False
    by_command: bool = False
    link: str | None = None


# --- coordinator -> worker ---------------------------------------------------


class RunSpeculation(msgspec.Struct, frozen=True, tag="run_speculation"):
    job_id: str
    epoch: int
    suggestion: str
    snapshot: CacheSafeSnapshot
    approval_mode: ApprovalMode
    model: str
    project_root: str
    overlay_dir: str
    endpoint: ModelEndpoint
    limits: SpeculationLimits = SpeculationLimits()
    pipelined: bool = True
    # How many ranked guesses the pipelined step asks for (speculationBranches): with more
    # than one, the suggestion after this speculation's Tab has alternatives too.
    alternatives: int = 1
    sandbox: bool = True
    # Opt-in: run shell commands that are not read-only in a writable overlayfs view
    # without network instead of stopping at a boundary; their writes join the overlay.
    speculate_shell: bool = False
    containment: Containment = Containment()
    # The main chat's context window (0: none) and its estimate of a request over the
    # snapshot: each tool result is cut to a quarter of the window, as the main chat's are;
    # and, when the window is known (0 tokens while it is only the default guess, which a
    # larger real window would make a needless stop), a request that would not fit ends
    # the speculation at limit:context_window.
    context_window: int = 0
    context_tokens: int = 0


class WriteGuard(msgspec.Struct, frozen=True):
    """What a main-chat write may only touch after a person's yes, for one project
    (judged by ``protocol.rules.protected_writes``): ``root`` its real path,
    ``protected`` the ``protectedPaths`` patterns, ``later`` the ``runsLaterPaths`` ones,
    ``private`` the absolute real directories of specrun's own state."""

    root: str
    protected: tuple[str, ...] = ()
    later: tuple[str, ...] = ()
    private: tuple[str, ...] = ()


class RunTool(msgspec.Struct, frozen=True, tag="run_tool"):
    """Run one of the main chat's tool calls in the real tree (no overlay).

    ``shell="read_only"``: a shell command runs only if the classifier proves it
    read-only (with the safe runner); otherwise nothing runs and ``ToolDone`` comes
    back with ``needs_approval`` set. ``shell="full"``: the user already said yes."""

    job_id: str
    epoch: int
    call: ToolCall
    project_root: str
    shell: ShellPermission = "read_only"
    timeout_s: float = 120.0
    limits: CommandLimits = CommandLimits()
    # as ``Containment.private_paths``: with ``shell="read_only"`` a read of them asks
    private_paths: tuple[str, ...] = ()
    # A shell command that writes what this rule protects asks first in every mode
    # (``ToolDone.always_asks``) unless ``protected_confirmed``: the person said yes to it.
    write_guard: WriteGuard | None = None
    protected_confirmed: bool = False


class Shutdown(msgspec.Struct, frozen=True, tag="shutdown"):
    epoch: int


WorkerJob = RunSpeculation | RunTool | Shutdown


# --- worker -> coordinator ---------------------------------------------------


class Hello(msgspec.Struct, frozen=True, tag="hello"):
    """First message of every worker. ``tools`` is the worker's tool registry in its fixed
    order: the coordinator sends exactly these to the model, so the main chat and every
    fork share a byte-identical ``tools`` array."""

    pid: int
    epoch: int
    sandbox: Sandbox
    tools: tuple[ToolSpec, ...] = ()
    # The containment profile's layers for unapproved shell commands, probed at start.
    containment: tuple[LayerStatus, ...] = ()


class Heartbeat(msgspec.Struct, frozen=True, tag="heartbeat"):
    pid: int
    epoch: int
    job_id: str | None = None


class ModelText(msgspec.Struct, frozen=True, tag="model_text"):
    job_id: str
    epoch: int
    turn: int
    text: str


class ToolStarted(msgspec.Struct, frozen=True, tag="tool_started"):
    job_id: str
    epoch: int
    turn: int
    call: ToolCall
    decision: ToolDecision


class ToolFinished(msgspec.Struct, frozen=True, tag="tool_finished"):
    job_id: str
    epoch: int
    turn: int
    result: ToolResult
    # The speculation's files so far, when this tool added or deleted one (else None):
    # what ``specrun diff`` previews while the speculation runs (checked like a report).
    written: dict[str, WrittenFile] | None = None


class SpeculationOutcome(msgspec.Struct, frozen=True):
    """What a finished speculative loop produced."""

    messages: tuple[Message, ...]
    written_files: dict[str, WrittenFile]
    tool_use_count: int
    turns: int


class Boundary(msgspec.Struct, frozen=True, tag="boundary"):
    job_id: str
    epoch: int
    reason: BoundaryReason
    outcome: SpeculationOutcome


class Completed(msgspec.Struct, frozen=True, tag="completed"):
    job_id: str
    epoch: int
    outcome: SpeculationOutcome


class PipelinedSuggestion(msgspec.Struct, frozen=True, tag="pipelined_suggestion"):
    """Sent just after ``Completed``: the next prompt, or ``None`` with why not."""

    job_id: str
    epoch: int
    text: str | None
    reason: PipelinedSkipReason | None = None
    # With ``RunSpeculation.alternatives`` > 1: every guess kept, best first (``text`` is the
    # first); empty when only one was asked for.
    alternatives: tuple[str, ...] = ()


class ToolDone(msgspec.Struct, frozen=True, tag="tool_done"):
    """A main-chat tool job finished; ``needs_approval`` (the reason) when it did not run
    because the user must say yes first."""

    job_id: str
    epoch: int
    result: ToolResult
    needs_approval: str | None = None
    # the question is about a protected write: asked in every mode, its yes never kept
    always_asks: bool = False


class ModelUsage(msgspec.Struct, frozen=True, tag="model_usage"):
    """The tokens of one model request a speculation's worker made, sent as soon as the
    answer is in: a speculation killed later still counts what it spent."""

    job_id: str
    epoch: int
    purpose: WorkerPurpose
    usage: Usage


class Failed(msgspec.Struct, frozen=True, tag="failed"):
    job_id: str
    epoch: int
    error: str


WorkerEvent = (
    Hello
    | Heartbeat
    | ModelText
    | ToolStarted
    | ToolFinished
    | Boundary
    | Completed
    | PipelinedSuggestion
    | ModelUsage
    | ToolDone
    | Failed
)
