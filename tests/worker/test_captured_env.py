"""What a captured command is given besides the read-only profile, and the notes its
result gets (``worker.contain.captured_env``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from worker.contain.captured_env import (
    CROSS_DEVICE_NOTE,
    NO_NETWORK_NOTE,
    PTY_NOTE,
    UNIX_SOCKET_NOTE,
    captured_setup,
    git_identity,
    sandbox_notes,
)
from worker.shell.runner import ShellResult


def _environ(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "PATH": os.environ["PATH"]}


def test_the_identity_is_name_and_email_from_the_users_config_only(tmp_path: Path) -> None:
    (tmp_path / ".gitconfig").write_text(
        "[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n\tsigningkey = ABC\n"
        "[core]\n\thooksPath = /tmp/hooks\n"
    )
    environ = {**_environ(tmp_path), "GIT_CONFIG_GLOBAL": "/dev/null"}  # GIT_* is ignored
    assert git_identity(environ) == {
        "GIT_AUTHOR_NAME": "Ada Lovelace",
        "GIT_COMMITTER_NAME": "Ada Lovelace",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
    }


def test_a_project_cannot_choose_the_identity(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "config").write_text("[user]\n\tname = Mallory\n")
    home = tmp_path / "home"
    home.mkdir()
    setup = captured_setup(str(project), _environ(home))
    assert "Mallory" not in setup.env.values()
    assert setup.env["GIT_ALLOW_PROTOCOL"] == "file"


@pytest.mark.parametrize("written", ['"line\\nbreak"', "x" * 300])
def test_odd_values_are_left_out(tmp_path: Path, written: str) -> None:
    (tmp_path / ".gitconfig").write_text(f"[user]\n\tname = {written}\n")
    assert "GIT_AUTHOR_NAME" not in git_identity(_environ(tmp_path))


_MANAGER_REFUSED = """Process SyncManager-1:
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 600, in __init__
    self._socket = socket.socket(getattr(socket, family))
PermissionError: [Errno 13] Permission denied
EOFError"""


def _result(code: int, out: str = "", err: str = "", timed_out: bool = False) -> ShellResult:
    return ShellResult(code, out, err, timed_out, False, 0.1)


@pytest.mark.parametrize(
    ("result", "captured", "notes"),
    [
        (_result(-9, timed_out=True), False, (NO_NETWORK_NOTE,)),
        (_result(6, err="curl: (6) Could not resolve host: example.com"), False,
         (NO_NETWORK_NOTE,)),
        (_result(1, out="npm error code EAI_AGAIN"), True, (NO_NETWORK_NOTE,)),
        (_result(1, err="OSError: [Errno 101] Network is unreachable"), True,
         (NO_NETWORK_NOTE,)),
        (_result(1, err="    sock.bind(addr)\nPermissionError: [Errno 13] Permission denied"),
         True, (NO_NETWORK_NOTE,)),
        (_result(1, err="PermissionError: [Errno 13] Permission denied: 'out.txt'"), True, ()),
        (_result(0, out="mentions getaddrinfo but passed"), True, ()),
        (_result(1, err="AssertionError: 1 != 2"), True, ()),
        # a failing suite's own FileNotFoundError is no network error
        (_result(1, err="FileNotFoundError: [Errno 2] No such file or directory: 'x'"), True,
         ()),
        (_result(1, err="Error: getaddrinfo ENOTFOUND registry.npmjs.org"), True,
         (NO_NETWORK_NOTE,)),
        (_result(1, err="connect ECONNREFUSED 127.0.0.1:8080"), True, (NO_NETWORK_NOTE,)),
        # a refused unix socket is said as such, not as a missing network
        (_result(1, err=_MANAGER_REFUSED), True, (UNIX_SOCKET_NOTE,)),
        (_result(0, err=_MANAGER_REFUSED), True, ()),
        (_result(1, err="    pid, fd = os.forkpty()\nOSError: out of pty devices"), True,
         (PTY_NOTE,)),
        (_result(2, err="gpg: failed to start agent '/usr/bin/gpg-agent': General error\n"
                        "gpg: can't connect to the agent: General error"), True,
         (UNIX_SOCKET_NOTE,)),
        (_result(1, err="mv: Invalid cross-device link"), True, (CROSS_DEVICE_NOTE,)),
        (_result(1, err="mv: Invalid cross-device link"), False, ()),
    ],
)
def test_notes(result: ShellResult, captured: bool, notes: tuple[str, ...]) -> None:
    assert sandbox_notes(result, captured=captured) == notes
