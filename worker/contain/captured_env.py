"""What a captured command (``speculateShell``) is given besides the read-only profile,
and what its tool result says about the sandbox it ran in.

Given, decided outside the sandbox once per speculation (:func:`captured_setup`):

* its toolchains, read-only, and a ``PATH`` naming them (``worker.contain.toolchains``);
* the user's git identity, ``user.name`` and ``user.email`` only, read from the user's own
  git configuration and passed as ``GIT_AUTHOR_*``/``GIT_COMMITTER_*``, so that test
  fixtures can commit; nothing else of that configuration (``GIT_CONFIG_GLOBAL`` stays
  ``/dev/null``: no aliases, hooks, signing programs or credential helpers);
* git's local transport (``GIT_ALLOW_PROTOCOL=file``: ``file://`` URLs and plain paths),
  so fixtures can clone; every other transport stays refused, and there is no network;
* ``PYTHONDONTWRITEBYTECODE=1``: bytecode is never kept (``worker.capture``), and written
  into the view it would only fill the capture space, which is the size of the quota
  left, so that a large suite would end at ``quota:overlay_files``. Python still reads the
  project's own ``__pycache__``.

Said (:func:`sandbox_notes`), so that the model and the person reading the transcript do
not mistake the sandbox for the project: a line when a command that failed or timed out
looks like it wanted the network (a test server on loopback too: there is no loopback,
and Landlock refuses TCP binds and connects with "Permission denied"), and a line when it
hit the writable view's one known gap (renaming a directory that was already in the
project: EXDEV).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from worker.contain.toolchains import ToolchainView, toolchain_view
from worker.shell.runner import ShellResult

IDENTITY_KEYS = ("user.name", "user.email")
_MAX_IDENTITY_CHARS = 200
_IDENTITY_TIMEOUT_S = 5.0

NO_NETWORK_NOTE = (
    "[ran without network access: a speculation's commands cannot reach the network, so "
    "a download or a connection fails or waits until the timeout]"
)
CROSS_DEVICE_NOTE = (
    "[sandboxed run: renaming a directory that was already in the project fails in a "
    "speculation's writable view with EXDEV (Invalid cross-device link); `mv` copies "
    "instead, new directories rename fine. A step that needs the rename must run for real.]"
)
UNIX_SOCKET_NOTE = (
    "[sandboxed run: a speculation's commands cannot create unix sockets (\"Permission "
    "denied\"), so multiprocessing's Manager and its forkserver start method (Python 3.14's "
    "default), gpg-agent (signing, key generation) and servers on a socket file fail here "
    "although they work for you. A step that needs one must run for real.]"
)
PTY_NOTE = (
    "[sandboxed run: a speculation's commands get no pseudo-terminal (no /dev/pts), so a "
    "test that drives a program through one "
    "(pexpect, pty.fork, script) fails here although it works for you. A step that needs "
    "one must run for real.]"
)
# How tools say that the network is missing (lower case): resolver, socket and HTTP
# client messages of curl, git, pip, npm, cargo and Python.
_NETWORK_SIGNS = (
    "network is unreachable",
    "temporary failure in name resolution",
    "name or service not known",
    "could not resolve host",
    "failed to resolve",
    "getaddrinfo",
    "connection refused",
    "failed to establish a new connection",
    "no route to host",
    "couldn't resolve",
    "could not connect to",
    "nodename nor servname",
    "network unreachable",
    "cannot assign requested address",
)
# The error codes of Node, libuv and libc, as words: "enotfound" is also inside Python's
# "FileNotFoundError", which a failing suite prints for reasons of its own.
_NETWORK_CODES = re.compile(r"\b(?:ENOTFOUND|EAI_AGAIN|ENETUNREACH|ECONNREFUSED|EHOSTUNREACH)\b")
# Landlock refuses a TCP bind or connect with EACCES, which reads like a file's permission
# error: counted only beside the words of a socket call.
_SOCKET_WORDS = ("socket", ".bind(", ".connect(", "create_connection", "listen(")
# Where a refused unix socket shows (lower case): Python's multiprocessing and asyncio.
_UNIX_SOCKET_SIGNS = (
    "multiprocessing/connection.py",
    "multiprocessing/managers.py",
    "multiprocessing/forkserver.py",
    "multiprocessing/resource_sharer.py",
    "af_unix",
    "create_unix_server",
    "start_unix_server",
    "create_unix_connection",
    "open_unix_connection",
)
# No pseudo-terminal: Python's os.openpty/forkpty, glibc's posix_openpt, node-pty.
_PTY_SIGNS = ("out of pty devices", "/dev/ptmx", "posix_openpt", "forkpty(3) failed")
# A refused unix socket in other words: gpg-agent cannot make its socket and exits.
_UNIX_SOCKET_WORDS = ("gpg: can't connect to the agent", "failed to start agent")
_CROSS_DEVICE = re.compile(r"Invalid cross-device link|\bEXDEV\b")


@dataclass(frozen=True)
class CapturedSetup:
    """A speculation's captured commands: host paths to show, environment to add."""

    toolchains: ToolchainView
    env: dict[str, str]
    host_path: str


def git_identity(environ: Mapping[str, str]) -> dict[str, str]:
    """The user's ``user.name`` and ``user.email`` as git's author and committer
    variables (empty when git or the values are missing). Read outside any repository,
    so a project's own configuration cannot choose them."""
    names = {"user.name": "NAME", "user.email": "EMAIL"}
    out: dict[str, str] = {}
    env = {k: v for k, v in environ.items() if not k.startswith("GIT_")}
    for key in IDENTITY_KEYS:
        try:
            proc = subprocess.run(
                ["git", "config", "--get", key],
                cwd="/",
                env=env,
                capture_output=True,
                text=True,
                timeout=_IDENTITY_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            return {}
        value = proc.stdout.strip()
        if proc.returncode != 0 or not value or len(value) > _MAX_IDENTITY_CHARS:
            continue
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            continue
        out[f"GIT_AUTHOR_{names[key]}"] = value
        out[f"GIT_COMMITTER_{names[key]}"] = value
    return out


def captured_setup(
    project: str,
    environ: Mapping[str, str],
    toolchain_paths: Sequence[str] = (),
    private: Sequence[str] = (),
) -> CapturedSetup:
    """Everything a speculation's captured commands get, from the user's environment."""
    view = toolchain_view(project, environ, toolchain_paths, private)
    env = {"PATH": view.path, **dict(view.env), **git_identity(environ)}
    env["GIT_ALLOW_PROTOCOL"] = "file"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return CapturedSetup(view, env, environ.get("PATH", ""))


def _looks_like_unix_socket(result: ShellResult) -> bool:
    text = f"{result.stdout}\n{result.stderr}".lower()
    if any(words in text for words in _UNIX_SOCKET_WORDS):
        return True
    refused = "permission denied" in text or "eacces" in text
    return refused and any(sign in text for sign in _UNIX_SOCKET_SIGNS)


def _looks_like_network(result: ShellResult, *, socket_refusals: bool = True) -> bool:
    """``socket_refusals``: count a "Permission denied" beside a socket call (off when a
    refused unix socket explains it)."""
    text = f"{result.stdout}\n{result.stderr}"
    if _NETWORK_CODES.search(text):
        return True
    text = text.lower()
    if any(sign in text for sign in _NETWORK_SIGNS):
        return True
    if not socket_refusals:
        return False
    return "permission denied" in text and any(word in text for word in _SOCKET_WORDS)


def sandbox_notes(result: ShellResult, *, captured: bool) -> tuple[str, ...]:
    """Lines for the tool result: no network (a command that timed out, or failed with
    the words of a missing network), no unix sockets (a command that failed where one was
    refused), the writable view's rename gap (captured only)."""
    notes: list[str] = []
    failed = result.exit_code != 0
    unix = failed and _looks_like_unix_socket(result)
    if result.timed_out or (failed and _looks_like_network(result, socket_refusals=not unix)):
        notes.append(NO_NETWORK_NOTE)
    if unix:
        notes.append(UNIX_SOCKET_NOTE)
    text = f"{result.stdout}\n{result.stderr}".lower()
    if failed and any(sign in text for sign in _PTY_SIGNS):
        notes.append(PTY_NOTE)
    if captured and _CROSS_DEVICE.search(f"{result.stdout}\n{result.stderr}"):
        notes.append(CROSS_DEVICE_NOTE)
    return tuple(notes)
