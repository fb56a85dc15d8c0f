"""Shell runners: timeouts kill the whole group, clean environment, caps, no stdin."""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from worker.shell import ShellNotReadOnlyError, ShellResult, run_read_only, run_shell
from worker.shell.git_config import HARDENED_GIT_ENV
from worker.shell.runner import READ_ONLY_PATH, read_only_environment

_counter = itertools.count(1)


def _marker() -> str:
    """A number nobody else passes to sleep: identifies our processes in the process table."""
    return f"{600 + next(_counter)}.{os.getpid()}"


def _alive(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if marker in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _assert_none_left(marker: str) -> None:
    deadline = time.monotonic() + 3.0
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _alive(marker) == []


def _live_children() -> set[int]:
    """Pids of live (non-zombie) descendants of this test process."""
    kids = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                kids.add(child.pid)
        except psutil.Error:
            continue
    return kids


@pytest.fixture()
def no_new_children() -> Iterator[None]:
    """Fails the test if it leaves a live descendant that was not there before it."""
    before = _live_children()
    yield None
    assert _live_children() - before == set()


# -- basics ------------------------------------------------------------------------------------


def test_read_only_run_basics(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("one\ntwo\n")
    result = run_read_only("cat f.txt | wc -l; pwd", tmp_path, 10, 1000)
    assert isinstance(result, ShellResult)
    assert result.exit_code == 0
    assert result.stdout.split() == ["2", str(tmp_path)]
    assert result.stderr == ""
    assert not result.timed_out and not result.truncated
    assert 0 <= result.duration < 10


def test_exit_code_and_stderr(tmp_path: Path) -> None:
    result = run_read_only("ls does-not-exist", tmp_path, 10, 1000)
    assert result.exit_code != 0
    assert "does-not-exist" in result.stderr


def test_refuses_commands_not_proven_read_only(tmp_path: Path) -> None:
    with pytest.raises(ShellNotReadOnlyError) as info:
        run_read_only("touch made.txt", tmp_path, 10, 1000)
    assert info.value.verdict.reason == "command:touch"
    assert not (tmp_path / "made.txt").exists()


@pytest.mark.parametrize(("timeout", "cap"), [(0, 10), (-1, 10), (1, -1)])
def test_bad_limits(tmp_path: Path, timeout: float, cap: int) -> None:
    with pytest.raises(ValueError):
        run_shell("true", tmp_path, timeout, cap)


# -- timeouts and process leaks ----------------------------------------------------------------


@pytest.mark.usefixtures("no_new_children")
def test_timeout_kills_children_and_grandchildren(tmp_path: Path) -> None:
    marker = _marker()
    command = f"sh -c 'sleep {marker} & sleep {marker}' & sleep {marker}; echo never"
    started = time.monotonic()
    result = run_shell(command, tmp_path, 0.5, 1000)
    assert time.monotonic() - started < 2.5
    assert result.timed_out
    assert result.exit_code < 0
    assert "never" not in result.stdout
    _assert_none_left(marker)


@pytest.mark.usefixtures("no_new_children")
def test_read_only_timeout_kills_the_pipeline(tmp_path: Path) -> None:
    marker = f"follow-{_marker()}.log"
    (tmp_path / marker).write_text("x\n")
    result = run_read_only(f"tail -f {marker} | cat | cat", tmp_path, 0.5, 1000)
    assert result.timed_out
    assert result.stdout.startswith("x")
    _assert_none_left(marker)


@pytest.mark.usefixtures("no_new_children")
def test_background_leftovers_are_killed_after_exit(tmp_path: Path) -> None:
    marker = _marker()
    started = time.monotonic()
    result = run_shell(f"sleep {marker} & echo quick", tmp_path, 20, 1000)
    assert time.monotonic() - started < 5
    assert result.stdout == "quick\n"
    assert result.exit_code == 0
    assert not result.timed_out
    _assert_none_left(marker)


def test_detached_background_output_is_collected(tmp_path: Path) -> None:
    result = run_read_only("ls & echo first", tmp_path, 10, 1000)
    assert "first" in result.stdout


def test_no_children_left_after_normal_runs(tmp_path: Path) -> None:
    before = _live_children()
    for _ in range(3):
        run_read_only("ls | cat | wc -c", tmp_path, 10, 1000)
    assert _live_children() - before == set()


# -- environment, stdin ------------------------------------------------------------------------


def test_read_only_environment_is_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGER", "evil-pager")
    monkeypatch.setenv("GIT_DIR", "/tmp/evil-git-dir")
    monkeypatch.setenv("LD_PRELOAD", "/nonexistent/evil.so")
    monkeypatch.setenv("LESSOPEN", "|evil %s")
    monkeypatch.setenv("BASH_ENV", "/tmp/evil-bash-env")
    monkeypatch.setenv("SPECRUN_TEST_SECRET", "s3cret")
    result = run_read_only("printenv", tmp_path, 10, 10_000)
    env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    for name in ("GIT_DIR", "LD_PRELOAD", "LESSOPEN", "BASH_ENV", "SPECRUN_TEST_SECRET"):
        assert name not in env
    assert env["PAGER"] == "cat"  # never the caller's pager
    assert env["PATH"] == READ_ONLY_PATH
    assert env["TERM"] == "dumb"
    assert env["LC_ALL"] == "C.UTF-8"
    # git's variables are exactly the hardened ones (no system/global config, no pager...)
    assert {k: v for k, v in env.items() if k.startswith("GIT_")} == {
        k: v for k, v in HARDENED_GIT_ENV.items() if k.startswith("GIT_")
    }
    assert result.stderr == ""


def test_read_only_environment_shape() -> None:
    env = read_only_environment()
    assert set(env) == {
        "PATH", "HOME", "LANG", "LC_ALL", "TERM", "BASH_FUNC_git%%", *HARDENED_GIT_ENV
    }


def test_full_shell_uses_the_given_environment(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "SPECRUN_GREETING": "hello"}
    result = run_shell("echo $SPECRUN_GREETING", tmp_path, 10, 1000, env=env)
    assert result.stdout == "hello\n"


def test_full_shell_inherits_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECRUN_INHERITED", "yes")
    assert run_shell("echo $SPECRUN_INHERITED", tmp_path, 10, 1000).stdout == "yes\n"


def test_no_stdin(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_read_only("cat", tmp_path, 5, 1000)
    assert result.stdout == "" and result.exit_code == 0 and not result.timed_out
    assert time.monotonic() - started < 3
    shell = run_shell("read line; echo rc=$?", tmp_path, 5, 1000)
    assert shell.stdout == "rc=1\n"


# -- output ------------------------------------------------------------------------------------


def test_output_cap(tmp_path: Path) -> None:
    result = run_read_only("head -c 100000 /dev/zero | tr '\\0' a", tmp_path, 10, 1000)
    assert result.truncated
    head, note, tail = result.stdout.split("\n")
    assert head == "a" * 500 and tail == "a" * 500  # no line break to start the end at
    assert note == "[output truncated: 99000 bytes omitted]"
    assert result.exit_code == 0


def test_a_long_output_keeps_its_end(tmp_path: Path) -> None:
    """A suite's summary and failures come last: the cut is in the middle."""
    command = "seq 1 100000; echo '== 3 failed, 99997 passed =='"
    result = run_shell(command, tmp_path, 10, 1000)
    assert result.truncated
    assert result.stdout.startswith("1\n2\n3\n")
    assert result.stdout.endswith("99999\n100000\n== 3 failed, 99997 passed ==\n")
    lines = result.stdout.splitlines()
    [note] = [line for line in lines if "truncated" in line]
    total = len("".join(f"{i}\n" for i in range(1, 100001))) + 29
    assert total - 1000 <= int(note.split()[2]) < total - 500
    # the end part starts at a whole line
    after = lines[lines.index(note) + 1]
    assert after.isdigit() and f"\n{int(after) - 1}\n" not in result.stdout


def test_stderr_cap_is_separate(tmp_path: Path) -> None:
    result = run_shell("seq 1 20000 >&2; echo out", tmp_path, 10, 500)
    assert result.stdout == "out\n"
    assert result.truncated
    assert "[output truncated:" in result.stderr


def test_large_output_on_both_streams_does_not_block(tmp_path: Path) -> None:
    result = run_shell("seq 1 200000; seq 1 200000 >&2", tmp_path, 10, 10**7)
    assert not result.timed_out
    assert result.stdout.count("\n") == 200000
    assert result.stderr.count("\n") == 200000


def test_undecodable_bytes_are_replaced(tmp_path: Path) -> None:
    result = run_read_only("printf 'ok\\377\\376'", tmp_path, 10, 1000)
    assert result.stdout.startswith("ok")
    assert "\ufffd" in result.stdout


# -- git is made inert -------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def test_git_runs_through_the_wrapper(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "f.txt").write_text("a\n")
    (repo / "g.bin").write_text("x\n")
    (repo / ".gitattributes").write_text("*.bin diff=evil\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    (repo / "f.txt").write_text("a\nb\n")
    (repo / "g.bin").write_text("x\ny\n")
    pwned = tmp_path / "PWNED"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {pwned}\necho EVIL\n")
    script.chmod(0o755)
    _git(repo, "config", "diff.external", str(script))
    _git(repo, "config", "diff.evil.textconv", str(script))
    _git(repo, "config", "core.pager", str(script))

    assert "git is a function" in run_read_only("type git", repo, 10, 1000).stdout
    for command in (
        "git diff",
        "git log -p -1",
        "git show HEAD",
        "git blame g.bin",
        "git -C . --no-pager diff --stat",
        "git status --short",
    ):
        result = run_read_only(command, repo, 10, 10_000)
        assert result.exit_code == 0, (command, result)
        assert "EVIL" not in result.stdout, command
    assert "+b" in run_read_only("git diff", repo, 10, 10_000).stdout
    assert run_read_only("git --version", repo, 10, 1000).stdout.startswith("git version")
    assert not pwned.exists()


@pytest.mark.usefixtures("no_new_children")
def test_works_without_pidfd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError("pidfd_open not available")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    assert run_read_only("echo hi", tmp_path, 10, 1000).stdout == "hi\n"
    marker = _marker()
    result = run_shell(f"sleep {marker}", tmp_path, 0.3, 1000)
    assert result.timed_out
    _assert_none_left(marker)
