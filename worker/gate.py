"""Tool gate for speculative tool calls (design §4).

Every tool call a speculation wants to make is decided here before it runs:

* ``allow``    — run it (read tools, with path arguments resolved through the overlay, and
  shell commands proven read-only);
* ``redirect`` — run it with its path argument rewritten into the overlay (file edits, when the
  approval mode lets edits run without asking);
* ``boundary`` — stop the speculation here, with a reason.

The gate never raises: an overlay that refuses a path (escape, bad target) or any other error
while rewriting becomes a boundary.

Beyond the tool table (design §4, §11): a read tool aimed outside the project is a boundary
(``read_outside_project:<tool>``: a speculation must not send files the user never pointed
at to the model provider), so is one aimed at specrun's own state (``read_private:<tool>``:
``.specrun/`` and the memory directories; see ``worker.tools.reach``), and so is any write
to a protected path (``protected_path:<path>``: ``.git/**``, ``.gitattributes``,
``.gitmodules``, ``.specrun/**`` at any depth, plus the ``protectedPaths`` setting; the rule
lives in ``protocol.rules.protected``), which could make the user's next ``git status`` run a
program or switch specrun's own settings. A write whose path holds a control, bidi or
invisible character (``protocol.text.inert_text.find_hidden``) is a boundary too
(``bad_path:<the name, quoted>``): such a name would show as something else in every
listing, so no speculation creates one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from overlay.paths import real_root, resolve_relative
from protocol.rules.protected import protected_reason
from protocol.rules.runs_later import runs_later_reason
from protocol.rules.tools import READ_TOOLS, SHELL_TOOL, WRITE_TOOLS
from protocol.text.inert_text import find_hidden, quote_name
from protocol.wire.approval import ApprovalMode
from protocol.wire.boundary import BoundaryReason
from protocol.wire.seams import NO_SEAMS, WorkerSeams
from protocol.wire.work import ToolDecision
from worker.shell.classifier import ShellVerdict, classify
from worker.shell.git_config import git_config_hazard
from worker.tools import declared_paths
from worker.tools.args import PathArg
from worker.tools.reach import read_boundary

GateAction = Literal[ToolDecision, "boundary"]

DENIED_TOOLS = frozenset(
    {
        "agent",
        "skill",
        "todo_write",
        "save_memory",
        "ask_user_question",
        "exit_plan_mode",
        "web_fetch",
        "web_search",
    }
)
SHELL_REASON_CHARS = 200


def read_only_verdict(command: str, seams: WorkerSeams = NO_SEAMS) -> ShellVerdict:
    """The classifier's verdict, except in a worker a test built with the classifier
    bypassed (``WorkerSeams.bypass_classifier``), where every command counts as read-only
    so that tests show the containment holding on its own."""
    if seams.bypass_classifier:
        return ShellVerdict(read_only=True, reason="test-only: classifier bypassed")
    return classify(command)


def bad_path_reason(rel: str) -> BoundaryReason | None:
    """``bad_path:<rel, quoted>`` if ``rel`` holds a character that a terminal would obey
    or hide (a control, newline and tab included, a bidi or an invisible format
    character, an undecodable byte), else None."""
    if find_hidden(rel) is None:
        return None
    return BoundaryReason("bad_path", quote_name(rel))


def shell_reason(command: str) -> BoundaryReason:
    """``shell:<command>``, cut at a word boundary with an ellipsis when it is long."""
    text = " ".join(command.split())
    if len(text) > SHELL_REASON_CHARS:
        cut = text[:SHELL_REASON_CHARS].rsplit(" ", 1)[0] or text[:SHELL_REASON_CHARS]
        text = f"{cut} …"
    return BoundaryReason("shell", text)


class OverlayLike(Protocol):
    """What the gate needs from an overlay (``overlay.Overlay`` satisfies it)."""

    @property
    def root(self) -> os.PathLike[str]: ...

    def redirect_write(self, path: str) -> str | os.PathLike[str]: ...

    def resolve_read(self, path: str) -> str | os.PathLike[str]: ...


@dataclass(frozen=True)
class GateDecision:
    """The gate's answer. ``args`` is a new dict (rewritten paths for allow/redirect).
    ``reason``: a boundary's :class:`BoundaryReason`, else why the call may run (a note
    for the log)."""

    action: GateAction
    reason: BoundaryReason | str
    args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.action == "boundary") != isinstance(self.reason, BoundaryReason):
            raise TypeError(f"a {self.action} decision with the reason {self.reason!r}")


PathDeclarations = Callable[[str], Mapping[str, PathArg]]
"""A tool's name → its declared path arguments."""


def evaluate(
    tool_name: str,
    args: dict[str, Any],
    approval_mode: ApprovalMode | str,
    overlay: OverlayLike,
    *,
    sandboxed_shell: bool = False,
    protected_paths: Sequence[str] = (),
    private_paths: Sequence[str] = (),
    runs_later_paths: Sequence[str] | None = None,
    paths: PathDeclarations = declared_paths,
    seams: WorkerSeams = NO_SEAMS,
) -> GateDecision:
    """Decide one speculative tool call. Never raises.

    The path arguments checked and rewritten are those the tool's argument struct declares
    (``paths``; a key that merely looks like a path is an ordinary argument).

    ``sandboxed_shell`` (the opt-in ``speculateShell``): a shell command that is not
    read-only is ``sandbox`` (run in a writable overlayfs view without network, its
    writes kept in the overlay) instead of a boundary. ``runs_later_paths`` (the
    ``runsLaterBoundary`` setting on, with the ``runsLaterPaths`` patterns): a write to a
    file that runs later without a key press is a boundary ``runs_later:<path>``."""
    try:
        return _evaluate(
            tool_name,
            dict(args) if isinstance(args, dict) else {},
            approval_mode,
            overlay,
            sandboxed_shell,
            tuple(protected_paths),
            tuple(private_paths),
            None if runs_later_paths is None else tuple(runs_later_paths),
            paths(tool_name),
            seams,
        )
    except Exception as exc:  # fail closed
        return GateDecision("boundary", BoundaryReason("gate_error", f"{tool_name}: {exc}"), {})


def _evaluate(
    name: str,
    args: dict[str, Any],
    approval_mode: ApprovalMode | str,
    overlay: OverlayLike,
    sandboxed_shell: bool,
    protected_paths: tuple[str, ...],
    private_paths: tuple[str, ...],
    runs_later_paths: tuple[str, ...] | None,
    paths: Mapping[str, PathArg],
    seams: WorkerSeams,
) -> GateDecision:
    writes = {key: args.get(key) for key, mark in paths.items() if mark.use == "write"}
    if writes and name not in WRITE_TOOLS:
        # Fail closed: only a write tool's paths may be redirected into the overlay.
        mixed = BoundaryReason("gate_error", f"{name}: a write path in a read tool")
        return GateDecision("boundary", mixed, args)
    if name in READ_TOOLS:
        read_reason = read_boundary(name, args, paths, overlay.root, private_paths)
        if read_reason is not None:
            return GateDecision("boundary", read_reason, args)
        return _rewrite(name, args, paths, overlay, "allow", f"read_tool:{name}")
    if name in WRITE_TOOLS:
        if not _edits_allowed(approval_mode):
            return GateDecision("boundary", BoundaryReason("write_tool_no_auto", name), args)
        targets = [value for value in writes.values() if isinstance(value, str)]
        if not targets:
            failed = BoundaryReason("path_rewrite_failed", f"{name}: no path argument")
            return GateDecision("boundary", failed, args)
        for target in targets:
            reason = _write_reason(overlay, target, protected_paths, runs_later_paths)
            if reason is not None:
                return GateDecision("boundary", reason, args)
        # A read path beside the write path (none today) is held to the read rule too.
        read_reason = read_boundary(name, args, paths, overlay.root, private_paths)
        if read_reason is not None:
            return GateDecision("boundary", read_reason, args)
        return _rewrite(name, args, paths, overlay, "redirect", f"write_tool:{name}")
    if name == SHELL_TOOL:
        return _shell(args, overlay, sandboxed_shell, seams)
    if name in DENIED_TOOLS:
        return GateDecision("boundary", BoundaryReason("denied_tool", name), args)
    return GateDecision("boundary", BoundaryReason("unknown_tool", name), args)


def _write_reason(
    overlay: OverlayLike,
    target: str,
    protected_paths: tuple[str, ...],
    runs_later_paths: tuple[str, ...] | None,
) -> BoundaryReason | None:
    """Why a write to ``target`` is a boundary: a hidden character in its name, a
    protected path, a file that runs later; or ``None``."""
    bad = bad_path_reason(target)
    if bad is not None:
        return bad
    for rel in _relative_spellings(overlay, target):
        reason = protected_reason(rel, protected_paths)
        if reason is None and runs_later_paths is not None:
            reason = runs_later_reason(rel, runs_later_paths)
        if reason is not None:
            return reason
    return None


def _shell(
    args: dict[str, Any], overlay: OverlayLike, sandboxed_shell: bool, seams: WorkerSeams
) -> GateDecision:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return GateDecision("boundary", BoundaryReason("shell", "empty"), args)
    verdict = read_only_verdict(command, seams)
    if verdict.read_only and verdict.uses_git:
        hazard = git_config_hazard(os.fspath(overlay.root), _overlay_dir(overlay))
        if hazard is not None:
            return GateDecision("boundary", BoundaryReason("git_config", hazard), args)
    if verdict.read_only:
        return GateDecision("allow", "shell_read_only", args)
    if sandboxed_shell:
        return GateDecision("sandbox", f"shell_sandboxed:{verdict.reason}", args)
    return GateDecision("boundary", shell_reason(command), args)


def _overlay_dir(overlay: OverlayLike) -> str | None:
    directory = getattr(overlay, "overlay_dir", None)
    return None if directory is None else os.fspath(directory)


def _relative_spellings(overlay: OverlayLike, path: Any) -> list[str]:
    """The project-relative forms of a write target: as written (lexically) and with
    symlinks resolved (a link in the tree may point into ``.git``)."""
    if not isinstance(path, str):
        return []
    root = real_root(overlay.root)
    joined = os.path.normpath(os.path.join(root, path))
    spellings = []
    if joined.startswith(root + os.sep):
        spellings.append(os.path.relpath(joined, root).replace(os.sep, "/"))
    resolved = resolve_relative(root, path)
    if resolved is not None:
        spellings.append(resolved)
    return spellings


def _edits_allowed(mode: ApprovalMode | str) -> bool:
    try:
        return ApprovalMode(mode).allows_unconfirmed_edits
    except ValueError:
        return False


def _rewrite(
    name: str,
    args: dict[str, Any],
    paths: Mapping[str, PathArg],
    overlay: OverlayLike,
    action: GateAction,
    reason: str,
) -> GateDecision:
    """``args`` with each declared path that holds a string resolved through the overlay:
    a read to the file it reads now, a write to its overlay copy. A glob pattern stays as
    it is (relative to the path it searches)."""
    for key, mark in paths.items():
        value = args.get(key)
        if mark.glob or not isinstance(value, str):
            continue
        resolve = overlay.redirect_write if mark.use == "write" else overlay.resolve_read
        try:
            args[key] = os.fspath(resolve(value))
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            failed = BoundaryReason("path_rewrite_failed", f"{name}: {message}")
            return GateDecision("boundary", failed, args)
    return GateDecision(action, reason, args)
