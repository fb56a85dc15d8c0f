"""CLI <-> coordinator messages (the control API).

A client (DEALER) sends a request with its own ``req_id``; the coordinator
(ROUTER) answers with one or more replies carrying that id. Simple requests get
exactly one reply. ``Ask`` and ``Accept`` stream turn events and end with
``TurnEnded``; any request may end with ``ErrorReply`` instead. ``is_final``
tells a client when a request is over.
"""

from __future__ import annotations

import enum
from typing import Literal

import msgspec

from protocol.wire.approval import ApprovalMode
from protocol.wire.boundary import BoundaryReason
from protocol.wire.chat import ToolCall
from protocol.wire.work import FilterReason, LayerStatus, Sandbox

# --- fixed sets of values -------------------------------------------------------

AcceptMethod = Literal["tab", "enter", "right", "cli", "typed", "web"]
"""How the person took a suggestion: a key in the terminal, `specrun accept`, the web
view's Accept (``web``), or ``typed``: a submitted prompt that matched a speculated one
(``acceptTypedPrompt``)."""

TypingAccept = Literal["prefix_kept", "exact_match"]
"""How typing led to an accept: ``prefix_kept`` (the user typed, the typed text stayed a
prefix of the suggestion, and the speculation was then accepted) or ``exact_match`` (the
submitted prompt equalled a speculated one)."""

ErrorCode = Literal["bad_request", "busy", "not_found", "internal"]
"""``bad_request``: the request is malformed or empty; ``busy``: another turn waits for an
approval; ``not_found``: nothing to act on (no suggestion, no such worker or approval);
``internal``: the service failed on this request (its log says why)."""


class WorkerState(enum.StrEnum):
    """A worker process's life: ``starting`` until its hello, ``idle`` in the warm pool,
    ``busy`` with a job, ``stopping`` (killed, or exiting by itself after a speculation),
    ``dead`` once its exit was seen."""

    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    STOPPING = "stopping"
    DEAD = "dead"


JobKind = Literal["speculation", "tool"]

WorkerSandbox = Literal[Sandbox, "unknown"]
"""A worker's backstop as its hello said; ``unknown`` before any hello."""

SpeculationStatus = Literal["running", "completed", "boundary", "aborted", "failed", "accepted"]

SuppressReason = Literal[
    FilterReason,
    "early_conversation",
    "no_snapshot",
    "error",
    "refusal",
    "backoff",
    "cold_cache",
    "unfocused",
    "away",
]
"""Why no suggestion is shown after a turn: the filter's reason, too early in the chat, no
cache-safe snapshot to fork from, a failed suggestion request, or a refusal; or a guard
(``backoff``, ``cold_cache``; ``unfocused`` / ``away``: every chat that reports whether
someone looks at it says nobody does)."""

Presence = Literal["present", "unfocused", "away"]
"""Whether someone looks at a chat: ``present``; ``unfocused``: its terminal lost focus;
``away``: no keystroke for ``suggestionAwayMinutes``."""

PresenceReport = Literal["present", "unfocused", "away", "gone"]
"""What a client reports: a ``Presence``, or ``gone``: it no longer reports (the web view's
last page closed); its earlier report stops counting at once."""

SkipReason = Literal["budget"]
"""Why a shown suggestion is not speculated: the speculation budget is spent."""

BudgetWindow = Literal["hour", "session"]
"""``hour``: the last 60 minutes; ``session``: since the chat session began."""

ToolStatus = Literal["running", "success", "error", "refused", "cancelled"]

TurnEndReason = Literal[
    "completed",
    "accepted",
    "debounced",
    "aborted",
    "error",
    "refused",
    "max_session_turns",
    "max_turns_per_query",
    "session_token_limit",
    "loop_detected",
]
"""How a turn ended: ``accepted`` (a speculation was applied) and ``debounced`` (a second
accept within 100 ms, ignored) end accepts; the rest end normal turns, ``refused`` being
the model's own refusal and the last four the limits that stop a turn."""

# --- requests (client -> coordinator) -----------------------------------------


class StatusRequest(msgspec.Struct, frozen=True, tag="status"):
    req_id: int


class StopRequest(msgspec.Struct, frozen=True, tag="stop"):
    req_id: int


class AskRequest(msgspec.Struct, frozen=True, tag="ask"):
    """A user query. ``can_confirm``: the client is a terminal that can answer
    ``ApprovalNeeded``; without it, calls that need a yes are refused."""

    req_id: int
    text: str
    approval_mode: ApprovalMode | None = None
    can_confirm: bool = False
    accept_method: AcceptMethod = "enter"
    # Enter filled the chat's empty line with the suggestion shown and a second Enter sent
    # it unchanged: a speculation it equals is taken as an ``enter`` accept (not ``typed``).
    filled: bool = False
    # The asking process: while it waits for an approval the service watches it, so a
    # client that is gone (Ctrl-C, kill) counts as a "no" instead of a wait forever.
    client_pid: int | None = None


class SuggestionRequest(msgspec.Struct, frozen=True, tag="suggestion"):
    req_id: int
    wait_visible: bool = False
    # also wait until the visible suggestion's speculation stopped running (`--settled`)
    wait_settled: bool = False
    # the rank of a branch whose speculation's transcript so far (its tool calls and
    # results) the reply carries (`--transcript`), or None
    transcript: int | None = None
    # the transcript's tool results whole (`--full`; bounded by the capture limits), not
    # cut to 500 characters
    full: bool = False


class DiffRequest(msgspec.Struct, frozen=True, tag="diff"):
    """What Tab would do now with a branch's speculation (``index``: its rank; None: the
    top live one): ``DiffReply``, or ``ErrorReply`` ``not_found``. ``stat``: per-file
    counts only, no diff text."""

    req_id: int
    index: int | None = None
    stat: bool = False


class AcceptRequest(msgspec.Struct, frozen=True, tag="accept"):
    """Take a suggestion. ``index``: the rank of the branch to take (0: the top guess);
    None takes the best-ranked branch still live (after typing dropped rank 0, Tab takes
    what is shown); a rank that is not live gets ``ErrorReply`` ``not_found``."""

    req_id: int
    method: AcceptMethod = "cli"
    index: int | None = None
    #: What the client showed of the branch it takes (the web page sends it): its text and
    #: its speculation's id ('' for none). When given and the branch at ``index`` is no
    #: longer that one (a new suggestion came, its speculation was replaced), nothing is
    #: taken: ``not_found``. A page that fell behind never takes what it did not show.
    shown_text: str | None = None
    shown_speculation: str = ""
    #: As ``AskRequest``'s: the client can answer ``ApprovalNeeded`` (a terminal, the
    #: chat), so a speculation that stopped at a boundary runs as a turn that asks, the
    #: same as sending its text with Enter; and the process to watch while it waits.
    can_confirm: bool = False
    client_pid: int | None = None


class TypedRequest(msgspec.Struct, frozen=True, tag="typed"):
    """What the user has typed so far at the prompt. The service keeps the branches
    whose text the typed text is a prefix of (``protocol.prompts.prediction.is_typed_prefix``),
    kills the others at once and answers with a ``SuggestionReply``; empty text keeps
    all; when none is left the suggestion is dismissed. With
    ``keepSpeculationWhileTyping`` off, any non-empty text dismisses."""

    req_id: int
    text: str


class PresenceRequest(msgspec.Struct, frozen=True, tag="presence"):
    """A chat (or the web view, for its open pages) says whether someone looks at it
    (``Presence``), again whenever that changes and at least every ``PRESENCE_REFRESH_S``;
    ``client_pid``: its process. While every client that reported (and lives, and reported
    lately) says nobody looks, the service skips predicting the next prompt; with no such
    client nothing is skipped. Answered with ``OkReply``."""

    req_id: int
    state: PresenceReport
    client_pid: int


PRESENCE_REFRESH_S = 20.0
"""A chat repeats its presence this often; the service forgets a report three times as old
(a chat stopped with Ctrl-Z, say, is then no viewer: it neither skips nor keeps anything)."""


class RejectRequest(msgspec.Struct, frozen=True, tag="reject"):
    req_id: int


class ResetRequest(msgspec.Struct, frozen=True, tag="reset"):
    req_id: int


class CompactRequest(msgspec.Struct, frozen=True, tag="compact"):
    """Summarize all of the chat but its last turn now (after a running turn ends)."""

    req_id: int


class ApprovalModeRequest(msgspec.Struct, frozen=True, tag="approval_mode"):
    """Change the chat's approval mode for the turns that start from now on (a running
    turn keeps the mode it started with); ``OkReply`` says the old and the new one."""

    req_id: int
    mode: ApprovalMode


class WorkersRequest(msgspec.Struct, frozen=True, tag="workers"):
    req_id: int


class StatsRequest(msgspec.Struct, frozen=True, tag="stats"):
    req_id: int


class KillWorkerRequest(msgspec.Struct, frozen=True, tag="kill_worker"):
    """Debug: SIGKILL one worker (``pid``) or a random one (``pid`` None)."""

    req_id: int
    pid: int | None = None


class ApprovalAnswer(msgspec.Struct, frozen=True, tag="approval_answer"):
    """A person's answer to ``ApprovalNeeded``. ``remember`` (with a yes): allow this exact
    shell command, or this file tool, without asking again for the rest of the chat
    session (``ApprovalNeeded.rememberable`` says whether it may be). ``reason`` (with a
    no): the person's words, which go to the model with the refusal."""

    req_id: int
    ask_req_id: int
    call_id: str
    approved: bool
    remember: bool = False
    reason: str = ""


class CancelRequest(msgspec.Struct, frozen=True, tag="cancel"):
    """Abort the running turn of ``ask_req_id`` (Ctrl-C)."""

    req_id: int
    ask_req_id: int


class SubscribeRequest(msgspec.Struct, frozen=True, tag="subscribe"):
    """Follow the session live (the web view). The service answers with ``LiveEvent``s
    (each numbered: ``seq``) for as long as the subscriber lives, never a final reply;
    a subscriber that does not keep up gets ``LiveResync`` instead of what it missed and
    should ask for a ``LiveSnapshotRequest``. ``client_pid``: the subscribing process;
    the subscription ends when it exits (or when a send finds it gone)."""

    req_id: int
    client_pid: int | None = None


class LiveSnapshotRequest(msgspec.Struct, frozen=True, tag="live_snapshot"):
    """The whole live state at once (``LiveSnapshot``): what a fresh or resyncing
    subscriber starts from before it applies the events numbered after ``seq``."""

    req_id: int


class UndoRequest(msgspec.Struct, frozen=True, tag="undo"):
    """Take back checkpoints (``specrun undo``): the last one, or with ``turn`` every one
    of the session from that turn on. ``list_only``: change nothing, list them.
    ``conversation``: also rewind the conversation to before that turn. ``force``: apply
    the files that can be, leaving those the person changed since (without it, such a
    file means nothing is applied). Answered with ``UndoReply`` (or ``ErrorReply``)."""

    req_id: int
    turn: int | None = None
    list_only: bool = False
    conversation: bool = False
    force: bool = False


ControlRequest = (
    StatusRequest
    | StopRequest
    | AskRequest
    | SuggestionRequest
    | AcceptRequest
    | RejectRequest
    | ResetRequest
    | CompactRequest
    | WorkersRequest
    | StatsRequest
    | KillWorkerRequest
    | ApprovalAnswer
    | CancelRequest
    | TypedRequest
    | SubscribeRequest
    | LiveSnapshotRequest
    | DiffRequest
    | UndoRequest
    | ApprovalModeRequest
    | PresenceRequest
)

# --- replies (coordinator -> client) ------------------------------------------


class ErrorReply(msgspec.Struct, frozen=True, tag="error"):
    req_id: int
    code: ErrorCode
    message: str  # one sentence saying what happened and what to do


class OkReply(msgspec.Struct, frozen=True, tag="ok"):
    req_id: int
    message: str = ""


class WorkerInfo(msgspec.Struct, frozen=True):
    pid: int
    state: WorkerState
    job_id: str | None
    job_kind: JobKind | None
    overlay_dir: str | None
    age_s: float
    rss_bytes: int | None
    sandbox: WorkerSandbox
    containment: tuple[LayerStatus, ...] = ()


class WorkersReply(msgspec.Struct, frozen=True, tag="workers"):
    req_id: int
    workers: tuple[WorkerInfo, ...]


ContextWindowSource = Literal["setting", "endpoint", "default", "provider"]
"""Where the window size comes from: the ``contextWindow`` setting, what the endpoint
reports for the model, the documented default, or a provider's overflow error."""


class ContextInfo(msgspec.Struct, frozen=True):
    """How full the main chat's context window is: ``tokens`` is the estimate of the
    next request (the last reported usage plus what was added since)."""

    window: int
    window_source: ContextWindowSource
    tokens: int
    compact_at: float
    compactions: int  # in this session


class ModelWaitInfo(msgspec.Struct, frozen=True):
    """The main chat is waiting to retry a model request (a rate limit, an overloaded
    server, a dropped connection): ``text`` says why and how long, ``seconds_left``."""

    text: str
    reason: Literal["rate_limit", "server", "connect"]
    seconds_left: float
    attempt: int  # the attempt that comes after the wait
    attempts: int
    status: int | None = None


class StatusReply(msgspec.Struct, frozen=True, tag="status"):
    req_id: int
    project: str
    pid: int
    epoch: int
    uptime_s: float
    model_endpoint: str
    scripted_model: bool
    model: str
    fast_model: str
    approval_mode: ApprovalMode
    session_id: str
    sandbox: WorkerSandbox
    workers: tuple[WorkerInfo, ...]
    speculation_enabled: bool
    suggestions_enabled: bool
    pool_warm: bool = True  # as many idle workers as the pool keeps warm
    # layers of the containment profile, as the newest worker probed them
    containment: tuple[LayerStatus, ...] = ()
    context: ContextInfo | None = None
    model_wait: ModelWaitInfo | None = None  # while the main chat waits to retry


class SpeculationInfo(msgspec.Struct, frozen=True):
    id: str
    status: SpeculationStatus
    turns: int
    tool_uses: int
    files_written: tuple[str, ...]
    boundary_reason: str | None  # ``boundary.text()``: the ``code:detail`` scripts read
    elapsed_s: float
    worker_pid: int | None
    pipelined_suggestion: str | None
    boundary: BoundaryReason | None = None  # why it stopped, for a renderer


class Branch(msgspec.Struct, frozen=True):
    """One ranked alternative next prompt (``speculationBranches``) and its speculation.
    ``rank`` 0 is the top guess; ``skipped`` says why it is not speculated, or None."""

    rank: int
    text: str
    speculation: SpeculationInfo | None
    skipped: SkipReason | None = None


class SuggestionReply(msgspec.Struct, frozen=True, tag="suggestion"):
    """``text``/``speculation`` are the top live branch's (what clients before
    branches show); ``branches`` lists every live alternative in rank order, the top
    one included."""

    req_id: int
    text: str | None
    visible: bool
    suppressed_reason: SuppressReason | None
    speculation: SpeculationInfo | None
    pending: bool = False  # a suggestion is being generated right now (`--wait` waits)
    # Why the suggestion is shown without a speculation (``budget``: the speculation
    # budget is spent), or None.
    speculation_skipped: SkipReason | None = None
    branches: tuple[Branch, ...] = ()
    # The typed text (``TypedRequest``) the service last acted on for this suggestion:
    # the branches above already reflect it.
    typed: str = ""
    # With ``SuggestionRequest.transcript``: that branch's speculation so far (the
    # model's text, its tool calls and their results), as an accept would show it.
    transcript: tuple[TranscriptEntry, ...] = ()


class CountByReason(msgspec.Struct, frozen=True):
    total: int
    by_reason: dict[str, int]


class TokenCount(msgspec.Struct, frozen=True):
    """Tokens of the model requests of one purpose. ``cached_prompt`` is the part of
    ``prompt`` the provider served from its prefix cache (as it reported it)."""

    requests: int = 0
    prompt: int = 0
    cached_prompt: int = 0
    completion: int = 0


class SpeculationTokens(msgspec.Struct, frozen=True):
    """Prompt + completion tokens the speculations' workers spent (purposes
    ``speculation`` and ``pipelined``), by what became of their speculation:
    ``accepted``, ``discarded`` (aborted, rejected, replaced, failed, never accepted)
    or ``pending`` (the current suggestion, not decided yet)."""

    total: int = 0
    accepted: int = 0
    discarded: int = 0
    pending: int = 0


class BranchSpend(msgspec.Struct, frozen=True):
    """What speculations spent: prompt + completion tokens and the worker process
    tree's user + system CPU seconds (read just before the worker is killed or when its
    speculation completes)."""

    tokens: int = 0
    cpu_s: float = 0.0


class BranchCost(msgspec.Struct, frozen=True):
    """Spending of speculation branches: ``by_rank`` (every branch of that rank, kept or
    not) and ``discarded`` (branches thrown away: killed because another was accepted or
    typing diverged, rejected, replaced or failed)."""

    by_rank: dict[int, BranchSpend] = {}
    discarded: BranchSpend = BranchSpend()


class BudgetInfo(msgspec.Struct, frozen=True):
    """The ``speculationBudget`` setting and what is spent of it in its window."""

    tokens: int
    window: BudgetWindow
    spent: int
    exhausted: bool


class StatsReply(msgspec.Struct, frozen=True, tag="stats"):
    req_id: int
    suggestions_shown: int
    suggestions_accepted: int
    accepted_by_method: dict[AcceptMethod, int]
    suggestions_ignored: int
    suggestions_suppressed: CountByReason
    speculations_completed: int
    speculations_boundary: CountByReason
    speculations_aborted: int
    speculations_failed: int
    time_saved_s: tuple[float, ...]
    time_saved_median_s: float
    time_saved_total_s: float
    # Cost (all with defaults, so a client built before them still decodes the reply).
    tokens: dict[str, TokenCount] = {}  # by purpose: main suggestion speculation pipelined recall
    speculation_tokens: SpeculationTokens = SpeculationTokens()
    # Seconds saved by accepted speculations per 1,000 speculation tokens (all of them,
    # discarded included); None before any speculation token was spent.
    time_saved_per_1k_tokens_s: float | None = None
    speculations_skipped: CountByReason = CountByReason(0, {})
    speculation_budget: BudgetInfo | None = None  # None: no budget set
    # Branches (``speculationBranches``) and typing (all with defaults as well).
    accepted_by_rank: dict[int, int] = {}  # accepts by the accepted branch's rank
    accepted_by_typing: dict[TypingAccept, int] = {}  # prefix_kept, exact_match
    branch_cost: BranchCost = BranchCost()
    # Predictions skipped while nobody looked (``unfocused`` / ``away``) and made when
    # someone came back before anything else was sent (counted in the skips as well).
    suggestions_made_on_return: int = 0


# Turn events, streamed while a query or an accept runs.


class TextChunk(msgspec.Struct, frozen=True, tag="text"):
    req_id: int
    text: str


class ToolShown(msgspec.Struct, frozen=True, tag="tool"):
    """A tool call as the user sees it: first ``running``, then its final status."""

    req_id: int
    call_id: str
    name: str
    args: str  # `key: value` pairs, each cut to 80 chars
    status: ToolStatus
    result: str = ""  # cut to 500 chars
    # a shell command's exit status (``status`` is ``error`` when it is not 0); None for
    # other tools and for a command with none (timed out)
    exit_code: int | None = None
    # an ``edit`` or ``write_file`` call's change as diff lines (``protocol.text.call_diff``)
    # and the file it names; '' for other tools
    diff: str = ""
    path: str = ""


class ApprovalNeeded(msgspec.Struct, frozen=True, tag="approval_needed"):
    req_id: int
    call: ToolCall
    reason: str
    #: a yes may be remembered for the session (``ApprovalAnswer.remember``): this exact
    #: command, or this file tool; never a call that touches a hidden name
    rememberable: bool = False


class Notice(msgspec.Struct, frozen=True, tag="notice"):
    req_id: int
    text: str


class TranscriptEntry(msgspec.Struct, frozen=True):
    kind: Literal["user", "model", "tool"]
    text: str = ""
    tool: str = ""
    args: str = ""
    status: Literal[ToolStatus, ""] = ""  # a tool entry's; "" for the others
    exit_code: int | None = None  # a shell command's exit status (see ``ToolShown``)
    diff: str = ""  # a file tool call's change as diff lines (see ``ToolShown``)
    path: str = ""


ChangeStatus = Literal["created", "modified", "deleted", "mode"]


class FileChange(msgspec.Struct, frozen=True):
    """One file Tab changed (or, in a preview, would change), as the coordinator found it in
    the real tree and the overlay, never as a worker claimed it.

    ``mode``: the permission bits that change, chmod style (``+x``, ``g-w``; '' if none).
    ``runs_later``: something runs it later without a key press (an ``.envrc``, a CI
    workflow, a hook, a build file, anything made executable). ``ignored``: the project's
    git ignores it (caches, build output). ``conflict``: how the real file changed since the
    speculation read it ('' if it did not): Tab refuses such a file, or skips it when git
    ignores it. ``link``: Tab leaves a symlink with this target at ``path`` ('' for a file),
    shown as ``path -> link``.
    """

    path: str
    status: ChangeStatus
    mode: str = ""
    runs_later: bool = False
    ignored: bool = False
    conflict: str = ""
    link: str = ""

    @property
    def summarized(self) -> bool:
        """Counted on the ignored-files line instead of listed with its diff: a file git
        ignores, unless it runs later. A repository's ``.gitignore`` names ``.env``,
        ``.envrc``, ``.vscode/`` or ``.idea/`` as often as caches, and what such a file
        will run is what a person must be able to read before Tab."""
        return self.ignored and not self.runs_later


class Transcript(msgspec.Struct, frozen=True, tag="transcript"):
    """An accepted speculation, rendered: user text, model text and tool groups.

    ``files``: the paths Tab changed. ``changes``: each of them with what was done, and
    ``ignored_skipped`` files git ignores that were left alone because the real ones had
    changed meanwhile (see ``FileChange``)."""

    req_id: int
    entries: tuple[TranscriptEntry, ...]
    files: tuple[str, ...]
    time_saved_s: float
    changes: tuple[FileChange, ...] = ()
    ignored_skipped: int = 0
    # files git ignores that its commands wrote (build output, caches), not applied: how
    # many, and where (first path components, ``target/``)
    ignored_held: int = 0
    ignored_held_in: tuple[str, ...] = ()
    # symlinks its commands made that Tab did not create (``name -> target: why``)
    links_held: tuple[str, ...] = ()


class FileDiff(msgspec.Struct, frozen=True):
    """One file of a preview: what Tab would do (``change``) and the unified diff of the
    real file against the speculation's (``""`` with ``--stat``, for a binary file, and
    for files git ignores). ``added``/``removed``: changed lines (0 for a binary file)."""

    change: FileChange
    diff: str = ""
    binary: bool = False
    added: int = 0
    removed: int = 0
    too_large: bool = False  # over the preview's size or time bound: counted, not shown
    #: With ``too_large``: the speculation's file's size in bytes and its sha256 (what Tab
    #: would write, named though not shown); -1 and '' when it is not a plain file.
    size: int = -1
    sha256: str = ""
    #: Lines of ``diff`` left out of a live view (the web page bounds what it is sent);
    #: ``specrun diff`` always has every line (0).
    cut_lines: int = 0


class DiffReply(msgspec.Struct, frozen=True, tag="diff"):
    """What Tab would do now with a branch's speculation, computed by the coordinator as
    accept computes its listing. A running speculation shows what it wrote so far.
    ``refused``: the sentence saying why Tab would apply nothing (a report the coordinator
    refuses), '' otherwise."""

    req_id: int
    rank: int
    suggestion: str
    status: SpeculationStatus
    files: tuple[FileDiff, ...] = ()
    refused: str = ""
    # symlinks its commands made that Tab would not create (``name -> target: why``)
    links_held: tuple[str, ...] = ()


class TurnEnded(msgspec.Struct, frozen=True, tag="turn_ended"):
    req_id: int
    reason: TurnEndReason
    message: str = ""
    speculated: bool = False
    elapsed_s: float = 0.0


# --- the live view (``SubscribeRequest``) ------------------------------------------
# Everything below the project's own status is untrusted text (model output, file names,
# file contents): a client renders it as text, never as markup.

class LiveActivity(msgspec.Struct, frozen=True):
    """One step of a speculation as it streams: model text, or a tool call (first
    ``running``, then its final status, under the same ``call_id``)."""

    kind: Literal["text", "tool"]
    text: str = ""
    call_id: str = ""
    tool: str = ""
    args: str = ""
    status: Literal[ToolStatus, ""] = ""
    exit_code: int | None = None  # a shell command's exit status (see ``ToolShown``)
    # the speculation's model turn it came from: a turn has one text, so a text step sent
    # again (a snapshot, then the event) replaces the one a view has instead of doubling it
    turn: int = 0
    # an ``edit`` or ``write_file`` call's change as diff lines and its file (see
    # ``ToolShown``); '' for other steps
    diff: str = ""
    path: str = ""


class LiveWorker(msgspec.Struct, frozen=True):
    info: WorkerInfo
    cpu_percent: float | None = None  # of one core, over the last sampling interval
    overlay_bytes: int | None = None


class LivePrompt(msgspec.Struct, frozen=True, tag="prompt"):
    """A prompt was submitted (``turn`` numbers the session's turns as the view saw them)."""

    turn: int
    text: str


class LiveTurnEvent(msgspec.Struct, frozen=True, tag="turn_event"):
    """What the client that asked saw of a turn (streamed text, tool calls, the end)."""

    turn: int
    event: TextChunk | ToolShown | ApprovalNeeded | Notice | Transcript | TurnEnded


class LiveSuggestion(msgspec.Struct, frozen=True, tag="suggestion"):
    suggestion: SuggestionReply


class LiveSpeculationStep(msgspec.Struct, frozen=True, tag="speculation_step"):
    speculation_id: str
    step: LiveActivity


class LiveDiff(msgspec.Struct, frozen=True, tag="diff"):
    """What Tab would do now with a speculation's files, as ``specrun diff`` shows it (the
    same computation accept uses); ``refused``: why Tab would apply nothing, or ''."""

    speculation_id: str
    files: tuple[FileDiff, ...]
    refused: str = ""
    # symlinks its commands made that Tab would not create (``name -> target: why``)
    links_held: tuple[str, ...] = ()


class LiveWorkers(msgspec.Struct, frozen=True, tag="workers"):
    workers: tuple[LiveWorker, ...]
    containment: tuple[LayerStatus, ...] = ()


class LiveStats(msgspec.Struct, frozen=True, tag="stats"):
    stats: StatsReply
    speculated_by_rank: dict[int, int] = {}  # speculations started per branch rank


class LiveReset(msgspec.Struct, frozen=True, tag="reset"):
    """A new chat session began: the conversation so far is gone."""

    session_id: str


LiveChange = (
    LivePrompt
    | LiveTurnEvent
    | LiveSuggestion
    | LiveSpeculationStep
    | LiveDiff
    | LiveWorkers
    | LiveStats
    | LiveReset
)


class LiveEvent(msgspec.Struct, frozen=True, tag="live_event"):
    req_id: int
    seq: int
    change: LiveChange


class LiveResync(msgspec.Struct, frozen=True, tag="live_resync"):
    """The subscriber fell behind: events up to ``seq`` were dropped for it. It should
    take a new snapshot; the events after it keep coming."""

    req_id: int
    seq: int


class LiveSnapshot(msgspec.Struct, frozen=True, tag="live_snapshot"):
    """The live state as of event ``seq``: the status, the conversation so far, the
    suggestion with each live speculation's steps and diff, the workers and the stats."""

    req_id: int
    seq: int
    status: StatusReply
    conversation: tuple[TranscriptEntry, ...]
    suggestion: SuggestionReply
    steps: dict[str, tuple[LiveActivity, ...]]
    diffs: dict[str, LiveDiff]
    workers: LiveWorkers
    stats: LiveStats


UndoAction = Literal["restore", "remove", "recreate", "kept", "already"]
"""What an undo does to a file: ``restore`` its earlier content or mode, ``remove`` a file
the checkpoint created, ``recreate`` one it deleted; ``kept``: left as it is (the person
changed it since, or its earlier content was not kept: ``why``); ``already``: it is as it
was before."""


class UndoFile(msgspec.Struct, frozen=True):
    path: str
    action: UndoAction
    why: str = ""


class CheckpointInfo(msgspec.Struct, frozen=True):
    """One checkpoint: ``turn`` (the N-th prompt of the session, what ``specrun undo N``
    takes), ``kind`` (``accept``: a suggestion taken; ``turn``: a prompt the main chat
    ran), its prompt, when (Unix seconds), and what undoing it would do to each file now."""

    turn: int
    kind: Literal["accept", "turn"]
    prompt: str
    created: float
    files: tuple[UndoFile, ...]


class UndoReply(msgspec.Struct, frozen=True, tag="undo"):
    """``checkpoints``: with ``list_only`` all of the session's, oldest first; otherwise
    the ones taken back (or that would have been). ``files``: what the undo did (or, when
    ``undone`` is False, would do) to each file. ``undone``: the files were applied and
    the checkpoints dropped; False when a file was changed since and ``force`` was not
    given (``files`` names it), or with ``list_only``. ``conversation_rewound``: the
    conversation now ends before ``turn``. ``store_bytes``: earlier contents kept."""

    req_id: int
    checkpoints: tuple[CheckpointInfo, ...]
    files: tuple[UndoFile, ...] = ()
    undone: bool = False
    conversation_rewound: bool = False
    message: str = ""
    store_bytes: int = 0


ControlReply = (
    ErrorReply
    | OkReply
    | WorkersReply
    | StatusReply
    | SuggestionReply
    | StatsReply
    | TextChunk
    | ToolShown
    | ApprovalNeeded
    | Notice
    | Transcript
    | TurnEnded
    | LiveEvent
    | LiveResync
    | LiveSnapshot
    | DiffReply
    | UndoReply
)

_STREAMING = (TextChunk, ToolShown, ApprovalNeeded, Notice, Transcript, LiveEvent, LiveResync)


def is_final(reply: ControlReply) -> bool:
    """True for the last reply a request gets."""
    return not isinstance(reply, _STREAMING)
