"""Boundary reasons in plain words: every code, and never a cut word."""

from __future__ import annotations

import msgspec
import pytest

from coordinator.boundary_text import cut_words, describe_boundary
from protocol.wire.boundary import BOUNDARY_CODES, BoundaryReason


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (BoundaryReason(
            "shell", "git add src/calc.py tests/test_calc_negative.py && git commit -m 'add test'"
        ),
         "stopped before the shell command `git add src/calc.py tests/test_calc_negative.py "
         "&& git commit -m 'add test'`: it is not proven read-only, so it waits for you"),
        (BoundaryReason("shell", "empty"), "stopped at an empty shell command"),
        (BoundaryReason("write_tool_no_auto", "edit"),
         "stopped before edit: writing files ahead of you needs approval mode auto-edit or yolo"),
        (BoundaryReason("denied_tool", "web_fetch"),
         "stopped before web_fetch: this tool never runs ahead of you"),
        (BoundaryReason("unknown_tool", "mcp__db__query"),
         "stopped before mcp__db__query: a tool specrun does not know never runs ahead of you"),
        (BoundaryReason("read_outside_project", "read_file"),
         "stopped before read_file: it reads outside the project"),
        (BoundaryReason("read_private", "list_directory"),
         "stopped before list_directory: it reads specrun's own state (.specrun/ or the memory "
         "directory)"),
        (BoundaryReason("protected_path", ".git/config"),
         "stopped before writing .git/config: a protected path (git metadata, .specrun/ or the "
         "protectedPaths setting)"),
        (BoundaryReason("runs_later", ".envrc"),
         "stopped before writing .envrc: it runs later without a key press and "
         "runsLaterBoundary is on"),
        (BoundaryReason("bad_path", "$'notes\\x1b[2K.md'"),
         "stopped before creating $'notes\\x1b[2K.md': a file name with a control, bidi or "
         "invisible character is never created ahead of you"),
        (BoundaryReason("path_rewrite_failed", "edit: outside the project root"),
         "stopped before edit: its path could not be redirected into the overlay (outside the "
         "project root)"),
        (BoundaryReason("gate_error", "glob: boom"),
         "stopped before glob: the safety check could not decide (boom)"),
        (BoundaryReason("limit", "memory"), "stopped: a command hit its memory limit"),
        (BoundaryReason("limit", "cpu"), "stopped: a command hit its CPU time limit"),
        (BoundaryReason("limit", "context_window"),
         "stopped: its next request would not fit the model's context window"),
        (BoundaryReason("quota", "overlay_bytes"),
         "stopped: the speculation's overlay reached its overlay bytes quota"),
        (BoundaryReason("sandbox_unavailable", "landlock"),
         "stopped: the landlock sandbox layer is not available here, so the step could not run "
         "contained"),
        (BoundaryReason("toolchain_missing", ".venv/bin/python"),
         "stopped: `.venv/bin/python` is on this machine but outside what a speculation's "
         "shell can see (add its directory to the toolchainPaths setting), so Tab runs the "
         "prompt for real"),
        (BoundaryReason("git_config", "core.fsmonitor"),
         "stopped before a git command: the repository's git configuration names a program "
         "git could run (core.fsmonitor)"),
        (BoundaryReason("refusal"), "stopped: the model refused the speculated prompt"),
        (None, "stopped at a boundary"),
    ],
)
def test_every_code_reads_as_a_sentence(reason: BoundaryReason | None, expected: str) -> None:
    assert describe_boundary(reason) == expected


@pytest.mark.parametrize("code", BOUNDARY_CODES)
def test_no_code_falls_back_to_its_raw_text(code: str) -> None:
    reason = msgspec.convert({"code": code, "detail": "x"}, BoundaryReason)
    assert reason.text() not in describe_boundary(reason)


def test_a_long_command_is_cut_between_words_with_an_ellipsis() -> None:
    command = "python -m pytest " + " ".join(f"tests/test_module_number_{i}.py" for i in range(12))
    text = describe_boundary(BoundaryReason("shell", command))
    shown = text.split("`")[1]
    assert shown.endswith(" …")
    kept = shown.removesuffix(" …").split(" ")
    assert kept == command.split(" ")[: len(kept)]  # only whole words


def test_a_detail_the_gate_already_cut_keeps_its_ellipsis() -> None:
    text = describe_boundary(
        BoundaryReason("shell", "git add src/calc.py tests/test_calc_negative.py && git …")
    )
    assert "`git add src/calc.py tests/test_calc_negative.py && git …`" in text


def test_cut_words() -> None:
    assert cut_words("a  b\nc", 10) == "a b c"
    assert cut_words("alpha beta gamma", 12) == "alpha beta …"
    assert cut_words("x" * 30, 10).endswith("…")
