"""run_shell_command through the real runner (read-only and full modes) and its formatting."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from protocol.wire.chat import ToolCall, ToolResult
from worker.tools import DirectAccess, ShellMode, ToolContext, execute
from worker.tools.run_shell_command import format_shell_output


def call(ctx: ToolContext, **args: Any) -> ToolResult:
    return asyncio.run(execute(ToolCall("s1", "run_shell_command", json.dumps(args)), ctx))


def ok(ctx: ToolContext, **args: Any) -> str:
    result = call(ctx, **args)
    assert result.error is None, result.error
    assert result.output is not None
    return result.output


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "data.txt").write_text("one\ntwo\nthree\n")
    return tmp_path


def test_format_shell_output() -> None:
    assert format_shell_output(0, "out\n", "", timed_out=False, truncated=False, timeout_s=5) == (
        "Exit code: 0\nStdout:\nout\nStderr: (empty)"
    )
    text = format_shell_output(
        -9, "", "partial err\n", timed_out=True, truncated=True, timeout_s=2.5
    )
    assert text == (
        "Exit code: -9 (killed by SIGKILL)\nStdout: (empty)\nStderr:\npartial err\n"
        "[The command timed out after 2.5 s and was killed.]\n[Output was truncated.]"
    )
    marked = "abc\n[output truncated: 10 bytes omitted]"
    text = format_shell_output(0, marked, "", timed_out=False, truncated=True, timeout_s=1)
    assert text == f"Exit code: 0\nStdout:\n{marked}\nStderr: (empty)"
    assert format_shell_output(None, "", "", timed_out=False, truncated=False, timeout_s=1) == (
        "Exit code: none\nStdout: (empty)\nStderr: (empty)"
    )


@pytest.mark.parametrize("mode", ["read_only", "full"])
def test_runs_in_the_project_root(root: Path, mode: ShellMode) -> None:
    ctx = ToolContext(access=DirectAccess(root), shell_mode=mode)
    out = ok(ctx, command="wc -l data.txt && pwd", description="count lines")
    lines = out.splitlines()
    assert lines[0] == "Exit code: 0"
    assert lines[1] == "Stdout:"
    assert lines[2].split() == ["3", "data.txt"]
    assert Path(lines[3]).resolve() == root.resolve()
    assert lines[4] == "Stderr: (empty)"


def test_exit_code_and_stderr(root: Path) -> None:
    ctx = ToolContext(access=DirectAccess(root), shell_mode="full")
    out = ok(ctx, command="echo oops >&2; exit 3")
    assert out == "Exit code: 3\nStdout: (empty)\nStderr:\noops"


def test_full_mode_can_write(root: Path) -> None:
    ctx = ToolContext(access=DirectAccess(root), shell_mode="full")
    ok(ctx, command="echo made > made.txt")
    assert (root / "made.txt").read_text() == "made\n"


def test_timeout_is_reported(root: Path) -> None:
    ctx = ToolContext(access=DirectAccess(root), shell_mode="full")
    started = time.monotonic()
    out = ok(ctx, command="sleep 5", timeout=1)
    assert time.monotonic() - started < 4
    assert "[The command timed out after 1 s and was killed.]" in out


def test_timeout_is_clamped_to_the_context_maximum(root: Path) -> None:
    ctx = ToolContext(access=DirectAccess(root), shell_mode="full", shell_max_timeout_s=1)
    started = time.monotonic()
    out = ok(ctx, command="sleep 5", timeout=600)
    assert time.monotonic() - started < 4
    assert "timed out after 1 s" in out


def test_read_only_mode_refuses_writes(root: Path) -> None:
    ctx = ToolContext(access=DirectAccess(root), shell_mode="read_only")
    result = call(ctx, command="echo x > out.txt")
    assert result.error is not None and "not read-only" in result.error
    assert not (root / "out.txt").exists()


def test_read_only_mode_has_a_clean_environment(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECRUN_TEST_SECRET", "leak")
    ctx = ToolContext(access=DirectAccess(root), shell_mode="read_only")
    assert "leak" not in ok(ctx, command="echo ${SPECRUN_TEST_SECRET:-clean}")
    full = ToolContext(
        access=DirectAccess(root), shell_mode="full", shell_env={"PATH": "/usr/bin:/bin", "X": "1"}
    )
    assert "Stdout:\n1" in ok(full, command="echo $X")


def test_output_is_capped(root: Path) -> None:
    ctx = ToolContext(access=DirectAccess(root), shell_mode="full", output_cap=1000)
    out = ok(ctx, command="seq 1 5000; seq 1 5000 >&2")
    assert len(out) < 1300
    assert out.count("truncated") == 2  # each stream says it was cut


def test_cwd_override(root: Path) -> None:
    (root / "sub").mkdir()
    ctx = ToolContext(access=DirectAccess(root), shell_mode="full", cwd=root / "sub")
    assert Path(ok(ctx, command="pwd").splitlines()[2]).resolve() == (root / "sub").resolve()


def test_argument_errors(root: Path) -> None:
    ctx = ToolContext(access=DirectAccess(root))
    assert call(ctx).error == "Invalid arguments for run_shell_command: 'command' is required"
    assert call(ctx, command="  ").error == "command is empty"
    assert call(ctx, command="ls", timeout=0).error == (
        "Invalid arguments for run_shell_command: 'timeout' must be at least 1"
    )
