"""The unified diff of two versions of a file, in bounded time.

``difflib`` is quadratic: one 0.5 MB file kept a core busy for minutes, long after the
person's ``specrun diff`` had given up. git's own diff (``git diff --no-index``: Myers
with a cost limit, near-linear on hostile input) runs in a child process with a deadline
and is killed when it passes it, so an abandoned diff stops: the file is then named with
its size and hash instead of shown. Nothing of the person's git setup is used: no system,
global or repository configuration (no external diff, textconv or attributes), and the
two versions are compared as text.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import tempfile
import time
from pathlib import Path

from protocol.rules import programs

#: Without git, difflib is used only below this many line pairs (its cost is their product).
DIFFLIB_MAX_PAIRS = 4_000_000


def unified_diff(old: bytes, new: bytes, a_name: str, b_name: str,
                 deadline: float, *, project: Path) -> str | None:
    """The unified diff (with ``--- a_name``/``+++ b_name`` headers, '' when equal), or
    None when it could not be computed before ``deadline`` (``time.monotonic``). The git
    it runs is one ``protocol.rules.programs`` allows for ``project`` (never the
    project's own, whatever ``PATH`` says)."""
    if old == new:
        return ""
    git = programs.which("git", project)
    body = _git_diff(git, old, new, deadline) if git else _difflib_diff(old, new)
    if body is None:
        return None
    return f"--- {a_name}\n+++ {b_name}\n{body}"


def _git_diff(git: str, old: bytes, new: bytes, deadline: float) -> str | None:
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    with tempfile.TemporaryDirectory(prefix="specrun-diff-") as work:
        for name, data in (("a", old), ("b", new)):
            with open(os.path.join(work, name), "wb") as fh:
                fh.write(data)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": work,
            "XDG_CONFIG_HOME": work,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
        }
        try:
            done = subprocess.run(
                [git, "-c", "core.attributesFile=" + os.devnull, "diff", "--no-index",
                 "--no-color", "--no-ext-diff", "--no-textconv", "--text", "--no-renames",
                 "-U3", "--", "a", "b"],
                cwd=work, env=env, capture_output=True, timeout=left, check=False,
            )
        except subprocess.TimeoutExpired:  # run() has killed it: the work stops here
            return None
        except OSError:
            return _difflib_diff(old, new)
    if done.returncode not in (0, 1):
        return _difflib_diff(old, new)
    out = done.stdout.decode("utf-8", errors="backslashreplace")
    start = out.find("\n@@")
    return out[start + 1:] if start >= 0 else ""


def _difflib_diff(old: bytes, new: bytes) -> str | None:
    a = _lines(old.decode("utf-8", errors="backslashreplace"))
    b = _lines(new.decode("utf-8", errors="backslashreplace"))
    if len(a) * len(b) > DIFFLIB_MAX_PAIRS:
        return None
    lines = list(difflib.unified_diff(a, b, "a", "b"))[2:]
    return "".join(_ended(line) for line in lines)


def _lines(text: str) -> list[str]:
    """``text``'s lines as git and the apply see them: cut at newlines only, each keeping
    its newline."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _ended(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
