"""Boundary reasons in plain words, for people.

The worker reports why a speculation stopped as a :class:`BoundaryReason` (code and
detail: ``shell`` ``git commit -m "fix"``, ``write_tool_no_auto`` ``edit``, ``limit``
``memory`` …). Scripts get its ``code:detail`` text (``--json``); a person gets
:func:`describe_boundary`: what it stopped before, and why, never cut in the middle of a
word.
"""

from __future__ import annotations

from protocol.wire.boundary import BoundaryReason

SHOWN_COMMAND_CHARS = 120

_LIMITS = {
    "cpu": "CPU time",
    "memory": "memory",
    "as": "memory",
    "fsize": "file size",
    "file_size": "file size",
    "nproc": "process count",
    "processes": "process count",
    "nofile": "open files",
    "open_files": "open files",
    "time": "run time",
    "wall": "run time",
}


def cut_words(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, cut only between words (an
    ellipsis says it was cut)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space > 0:
        head = head[:space]
    return head.rstrip() + " …"


def _limit_text(detail: str) -> str:
    if detail == "context_window":  # the speculation's own, not a command's
        return "stopped: its next request would not fit the model's context window"
    what = _LIMITS.get(detail.lower(), detail.replace("_", " "))
    return f"stopped: a command hit its {what} limit"


def _split(detail: str) -> tuple[str, str]:
    """``tool: message`` -> (tool, message)."""
    tool, _, message = detail.partition(":")
    return tool.strip(), message.strip()


# What a boundary's code stands for, in a few words (`specrun stats` counts them by code;
# the codes stay in --json).
_KINDS = {
    "shell": "shell command",
    "write_tool_no_auto": "file write (approval mode)",
    "denied_tool": "denied tool",
    "unknown_tool": "unknown tool",
    "git_config": "git configuration",
    "read_outside_project": "read outside the project",
    "read_private": "read of specrun's own state",
    "protected_path": "protected path",
    "runs_later": "file that runs later",
    "bad_path": "unsafe file name",
    "path_rewrite_failed": "path not redirected",
    "gate_error": "safety check undecided",
    "limit": "resource limit",
    "quota": "overlay quota",
    "toolchain_missing": "toolchain out of sight",
    "sandbox_unavailable": "sandbox layer missing",
}


def boundary_kind(code: str) -> str:
    """A boundary's code in a few plain words: ``write_tool_no_auto`` -> ``file write
    (approval mode)``; a code this does not know, with spaces for its underscores."""
    return _KINDS.get(code, code.replace("_", " "))


def describe_boundary(reason: BoundaryReason | None) -> str:
    """One sentence: which step the speculation stopped before, and why."""
    if reason is None:
        return "stopped at a boundary"
    code, detail = reason.code, reason.detail.strip()
    if code == "shell":
        if detail in ("", "empty"):
            return "stopped at an empty shell command"
        command = cut_words(detail.removesuffix("…").removesuffix("..."), SHOWN_COMMAND_CHARS)
        if detail.endswith(("…", "...")) and not command.endswith("…"):
            command += " …"
        return (
            f"stopped before the shell command `{command}`: it is not proven read-only, "
            "so it waits for you"
        )
    if code == "write_tool_no_auto":
        return (
            f"stopped before {detail or 'a file write'}: writing files ahead of you needs "
            "approval mode auto-edit or yolo"
        )
    if code == "denied_tool":
        return f"stopped before {detail}: this tool never runs ahead of you"
    if code == "unknown_tool":
        return f"stopped before {detail}: a tool specrun does not know never runs ahead of you"
    if code == "git_config":
        return (
            f"stopped before a git command: the repository's git configuration names a "
            f"program git could run ({cut_words(detail, SHOWN_COMMAND_CHARS)})"
        )
    if code == "refusal":
        return "stopped: the model refused the speculated prompt"
    if code == "read_outside_project":
        return f"stopped before {detail}: it reads outside the project"
    if code == "read_private":
        return (
            f"stopped before {detail}: it reads specrun's own state (.specrun/ or the "
            "memory directory)"
        )
    if code == "protected_path":
        return (
            f"stopped before writing {cut_words(detail, SHOWN_COMMAND_CHARS)}: a protected "
            "path (git metadata, .specrun/ or the protectedPaths setting)"
        )
    if code == "runs_later":
        return (
            f"stopped before writing {cut_words(detail, SHOWN_COMMAND_CHARS)}: it runs later "
            "without a key press and runsLaterBoundary is on"
        )
    if code == "bad_path":
        return (
            f"stopped before creating {cut_words(detail, SHOWN_COMMAND_CHARS)}: a file name "
            "with a control, bidi or invisible character is never created ahead of you"
        )
    if code == "path_rewrite_failed":
        tool, message = _split(detail)
        why = f" ({cut_words(message, SHOWN_COMMAND_CHARS)})" if message else ""
        return f"stopped before {tool}: its path could not be redirected into the overlay{why}"
    if code == "gate_error":
        tool, message = _split(detail)
        why = f" ({cut_words(message, SHOWN_COMMAND_CHARS)})" if message else ""
        return f"stopped before {tool}: the safety check could not decide{why}"
    if code == "limit":
        return _limit_text(detail)
    if code == "quota":
        what = detail.replace("_", " ")
        return f"stopped: the speculation's overlay reached its {what} quota"
    if code == "toolchain_missing":
        return (
            f"stopped: `{cut_words(detail, SHOWN_COMMAND_CHARS)}` is on this machine but "
            "outside what a speculation's shell can see (add its directory to the "
            "toolchainPaths setting), so Tab runs the prompt for real"
        )
    if code == "sandbox_unavailable":
        return (
            f"stopped: the {detail.replace('_', ' ')} sandbox layer is not available here, "
            "so the step could not run contained"
        )
    return f"stopped: {cut_words(reason.text(), SHOWN_COMMAND_CHARS)}"
