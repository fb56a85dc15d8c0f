"""Boundary reasons in plain words: every gate code, unknown ones, and never a cut word."""

from __future__ import annotations

import pytest

from coordinator.boundary_text import cut_words, describe_boundary


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("shell:git add src/calc.py tests/test_calc_negative.py && git commit -m 'add test'",
         "stopped before the shell command `git add src/calc.py tests/test_calc_negative.py "
         "&& git commit -m 'add test'`: it is not proven read-only, so it waits for you"),
        ("shell:empty", "stopped at an empty shell command"),
        ("write_tool_no_auto:edit",
         "stopped before edit: writing files ahead of you needs approval mode auto-edit or yolo"),
        ("denied_tool:web_fetch", "stopped before web_fetch: this tool never runs ahead of you"),
        ("unknown_tool:mcp__db__query",
         "stopped before mcp__db__query: a tool specrun does not know never runs ahead of you"),
        ("read_outside_project:read_file",
         "stopped before read_file: it reads outside the project"),
        ("read_private:list_directory",
         "stopped before list_directory: it reads specrun's own state (.specrun/ or the memory "
         "directory)"),
        ("protected_path:.git/config",
         "stopped before writing .git/config: a protected path (git metadata, .specrun/ or the "
         "protectedPaths setting)"),
        ("runs_later:.envrc",
         "stopped before writing .envrc: it runs later without a key press and "
         "runsLaterBoundary is on"),
        ("bad_path:$'notes\\x1b[2K.md'",
         "stopped before creating $'notes\\x1b[2K.md': a file name with a control, bidi or "
         "invisible character is never created ahead of you"),
        ("path_rewrite_failed:edit: outside the project root",
         "stopped before edit: its path could not be redirected into the overlay (outside the "
         "project root)"),
        ("gate_error:glob: boom", "stopped before glob: the safety check could not decide (boom)"),
        ("limit:memory", "stopped: a command hit its memory limit"),
        ("limit:cpu", "stopped: a command hit its CPU time limit"),
        ("quota:overlay_bytes",
         "stopped: the speculation's overlay reached its overlay bytes quota"),
        ("sandbox_unavailable:landlock",
         "stopped: the landlock sandbox layer is not available here, so the step could not run "
         "contained"),
        ("toolchain_missing:.venv/bin/python",
         "stopped: `.venv/bin/python` is on this machine but outside what a speculation's "
         "shell can see (add its directory to the toolchainPaths setting), so Tab runs the "
         "prompt for real"),
        ("brand_new_code:whatever it says", "stopped: brand_new_code:whatever it says"),
        ("no colon at all", "stopped: no colon at all"),
    ],
)
def test_every_code_reads_as_a_sentence(reason: str, expected: str) -> None:
    assert describe_boundary(reason) == expected


def test_a_long_command_is_cut_between_words_with_an_ellipsis() -> None:
    command = "python -m pytest " + " ".join(f"tests/test_module_number_{i}.py" for i in range(12))
    text = describe_boundary(f"shell:{command}")
    shown = text.split("`")[1]
    assert shown.endswith(" …")
    kept = shown.removesuffix(" …").split(" ")
    assert kept == command.split(" ")[: len(kept)]  # only whole words


def test_a_detail_the_gate_already_cut_keeps_its_ellipsis() -> None:
    text = describe_boundary("shell:git add src/calc.py tests/test_calc_negative.py && git …")
    assert "`git add src/calc.py tests/test_calc_negative.py && git …`" in text


def test_cut_words() -> None:
    assert cut_words("a  b\nc", 10) == "a b c"
    assert cut_words("alpha beta gamma", 12) == "alpha beta …"
    assert cut_words("x" * 30, 10).endswith("…")
