"""Tool gate for speculative tool calls (SPEC §4).

Every tool call a speculation wants to make is decided here before it runs:

* ``allow``    — run it (read tools, with path arguments resolved through the overlay, and
  shell commands proven read-only);
* ``redirect`` — run it with its path argument rewritten into the overlay (file edits, when the
  approval mode lets edits run without asking);
* ``boundary`` — stop the speculation here, with a reason.

The gate never raises: an overlay that refuses a path (escape, bad target) or any other error
while rewriting becomes a boundary.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from protocol.approval import ApprovalMode
from worker.shell.classifier import classify

GateAction = Literal["allow", "redirect", "sandbox", "boundary"]

READ_TOOLS = frozenset({"read_file", "grep_search", "glob", "list_directory", "lsp"})
WRITE_TOOLS = frozenset({"edit", "write_file"})
SHELL_TOOL = "run_shell_command"
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
PATH_KEYS = ("file_path", "filePath", "path", "notebook_path")
SHELL_REASON_CHARS = 50


class OverlayLike(Protocol):
    """What the gate needs from an overlay (``overlay.Overlay`` satisfies it)."""

    def redirect_write(self, path: str) -> str | os.PathLike[str]: ...

    def resolve_read(self, path: str) -> str | os.PathLike[str]: ...


@dataclass(frozen=True)
class GateDecision:
    """The gate's answer. ``args`` is a new dict (rewritten paths for allow/redirect)."""

    action: GateAction
    reason: str
    args: dict[str, Any] = field(default_factory=dict)


def path_key(args: dict[str, Any]) -> str | None:
    """The path argument the gate rewrites: the first of :data:`PATH_KEYS` holding a string."""
    for key in PATH_KEYS:
        if isinstance(args.get(key), str):
            return key
    return None


def evaluate(
    tool_name: str,
    args: dict[str, Any],
    approval_mode: ApprovalMode | str,
    overlay: OverlayLike,
    *,
    sandboxed_shell: bool = False,
) -> GateDecision:
    """Decide one speculative tool call. Never raises.

    ``sandboxed_shell`` (the opt-in ``speculateShell``): a shell command that is not
    read-only is ``sandbox`` (run in a writable overlayfs view without network, its
    writes kept in the overlay) instead of a boundary."""
    try:
        return _evaluate(
            tool_name,
            dict(args) if isinstance(args, dict) else {},
            approval_mode,
            overlay,
            sandboxed_shell,
        )
    except Exception as exc:  # fail closed
        return GateDecision("boundary", f"gate_error:{tool_name}: {exc}", {})


def _evaluate(
    name: str,
    args: dict[str, Any],
    approval_mode: ApprovalMode | str,
    overlay: OverlayLike,
    sandboxed_shell: bool = False,
) -> GateDecision:
    if name in READ_TOOLS:
        return _rewrite(
            name, args, overlay.resolve_read, "allow", f"read_tool:{name}", required=False
        )
    if name in WRITE_TOOLS:
        if not _edits_allowed(approval_mode):
            return GateDecision("boundary", f"write_tool_no_auto:{name}", args)
        return _rewrite(
            name, args, overlay.redirect_write, "redirect", f"write_tool:{name}", required=True
        )
    if name == SHELL_TOOL:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return GateDecision("boundary", "shell:empty", args)
        verdict = classify(command)
        if verdict.read_only:
            return GateDecision("allow", "shell_read_only", args)
        if sandboxed_shell:
            return GateDecision("sandbox", f"shell_sandboxed:{verdict.reason}", args)
        return GateDecision("boundary", f"shell:{command[:SHELL_REASON_CHARS]}", args)
    if name in DENIED_TOOLS:
        return GateDecision("boundary", f"denied_tool:{name}", args)
    return GateDecision("boundary", f"unknown_tool:{name}", args)


def _edits_allowed(mode: ApprovalMode | str) -> bool:
    try:
        return ApprovalMode(mode).allows_unconfirmed_edits
    except ValueError:
        return False


def _rewrite(
    name: str,
    args: dict[str, Any],
    resolve: Any,
    action: GateAction,
    reason: str,
    *,
    required: bool,
) -> GateDecision:
    key = path_key(args)
    if key is None:
        if required:
            return GateDecision("boundary", f"path_rewrite_failed:{name}: no path argument", args)
        return GateDecision(action, reason, args)
    try:
        args[key] = os.fspath(resolve(args[key]))
    except Exception as exc:
        message = str(exc) or type(exc).__name__
        return GateDecision("boundary", f"path_rewrite_failed:{name}: {message}", args)
    return GateDecision(action, reason, args)
