"""Which main-chat shell commands write a protected or runs-later path, read from the parse
tree (``worker.shell.write_targets``): every way of naming the path asks, reads and
commands naming no such path do not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from protocol.wire.work import WriteGuard
from worker.shell.write_targets import UNREADABLE, protected_write_reason

ASKS = {
    "git config core.fsmonitor 'sh -c x'": "git config",
    "git -c core.pager=x log": "git -c",
    "git --config-env=core.pager=X log": "git -c",
    "git remote add origin https://example.com/x": "git remote add",
    "echo x > .git/hooks/pre-commit": ".git/hooks/pre-commit",
    "printf 'a' >> .envrc": ".envrc",
    "cp x .specrun/settings.json": ".specrun/settings.json",
    "echo on | tee .github/workflows/ci.yml": ".github/workflows/ci.yml",
    "cd sub && echo > ../.envrc": ".envrc",
    "cd sub/deeper && cp x ../../.git/config": ".git/config",
    "echo > sub/../.git/info/attributes": ".git/info/attributes",
    "for f in a; do echo > .git/config; done": ".git/config",
    "cat <<EOF > .envrc\nhi\nEOF": ".envrc",
    "sh -c 'echo > .git/config'": ".git/config",
    "bash -c \"cp x .vscode/tasks.json\"": ".vscode/tasks.json",
    "eval 'echo > .envrc'": ".envrc",
    "echo $(echo x > .envrc)": ".envrc",
    "(echo x) > .envrc": ".envrc",
    "install -D --target-directory=.git/hooks x": ".git/hooks",
    "echo x > .git/hooks/$name": ".git/hooks",
    "cp x .git/hoo*": ".git/hoo*",
    "git config --add core.hooksPath x": "git config",
    "git config set core.pager x": "git config",
    "cd \"$DIR\" && cp x y": "only known at run time",
    "if true; then": UNREADABLE,
}
RUNS = [
    "git commit -m x", "git status", "cat .git/config", "git config --get user.name",
    "git config --list", "git config user.name",
    "make", "pytest", "ls > out.txt", "echo hi # > .envrc", "grep -r x . 2>/dev/null",
    "cp a b", "cd sub && make",
]


@pytest.fixture
def guard(tmp_path: Path) -> WriteGuard:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    return WriteGuard(os.path.realpath(tmp_path))


@pytest.mark.parametrize("command", sorted(ASKS))
def test_a_command_writing_a_protected_path_asks_naming_it(guard: WriteGuard,
                                                           command: str) -> None:
    why = protected_write_reason(command, guard)
    assert why is not None and ASKS[command] in why, why


@pytest.mark.parametrize("command", RUNS)
def test_reads_and_ordinary_writes_do_not_ask(guard: WriteGuard, command: str) -> None:
    assert protected_write_reason(command, guard) is None


def test_a_link_to_git_is_git(guard: WriteGuard) -> None:
    os.symlink(os.path.join(guard.root, ".git"), os.path.join(guard.root, "meta"))
    why = protected_write_reason("echo x > meta/config", guard)
    assert why is not None and "git's own configuration" in why


def test_specrun_state_outside_the_project_is_protected(tmp_path: Path,
                                                        guard: WriteGuard) -> None:
    state = tmp_path.parent / "state-dir"
    with_state = WriteGuard(guard.root, private=(str(state),))
    why = protected_write_reason(f"cp x {state}/settings.json", with_state)
    assert why is not None and "specrun's own state" in why
