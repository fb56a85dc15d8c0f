"""The first install's progress (scripts/_progress.sh, sourced by scripts/_venv.sh): the real
shell function on a real slow subprocess that talks like pip, in a real pseudo-terminal and
into a pipe. On a terminal one line moves every second, even while the command is silent,
and names what pip is at; in a pipe (a CI log) one line per step; the command's lines go to
the log only, and its exit status comes back."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pexpect

REPO = Path(__file__).resolve().parent.parent
PROGRESS = REPO / "scripts" / "_progress.sh"

# Like pip: plain print() (block-buffered into a pipe unless the Python is unbuffered), a
# requirement found, a long silence, then the install.
FAKE_PIP = """
import sys, time
print("Looking in indexes: https://pypi.org/simple")
print("Collecting rich>=13 (from specrun==0.1.0)")
print("  Downloading rich-15.0.0-py3-none-any.whl (240 kB)")
print("Processing /opt/wheels/prompt_toolkit-3.0.53-py3-none-any.whl (from specrun==0.1.0)")
time.sleep(2.6)
print("Installing collected packages: rich, prompt-toolkit, specrun")
time.sleep(1.2)
print("Successfully installed rich prompt-toolkit specrun")
sys.exit(int(sys.argv[1]))
"""


def _environment() -> dict[str, str]:
    """Without PYTHONUNBUFFERED, as on most machines (this one may have it set)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _step_command(tmp_path: Path, exit_code: int) -> str:
    fake = tmp_path / "fake_pip.py"
    fake.write_text(FAKE_PIP)
    log = tmp_path / "install.log"
    return (
        f"set -euo pipefail; source {shlex.quote(str(PROGRESS))}; "
        f"_specrun_step {shlex.quote(str(log))} installing "
        f"{shlex.quote(sys.executable)} {shlex.quote(str(fake))} {exit_code} "
        f"|| echo \"exit status $?\" >&2"
    )


def test_on_a_terminal_one_line_moves_every_second_and_names_what_pip_is_at(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    shell = pexpect.spawn("bash", ["-c", _step_command(tmp_path, 0)], dimensions=(24, 60),
                          encoding="utf-8", timeout=30, env=_environment())
    try:
        # found while the command still runs (its output is not held back in a buffer)
        shell.expect("2 found, the last prompt_toolkit")
        seen_at = time.monotonic() - started
        shell.expect(pexpect.EOF)
    finally:
        shell.close()
    shown = shell.before
    assert seen_at < 2.5, f"the first lines came only when the command ended ({seen_at:.1f} s)"
    redraws = [r for r in shown.split("\r") if r.strip()]
    ticks = [int(m.group(1)) for r in redraws if (m := re.search(r"^\x1b\[K +(\d+) s ", r))]
    # the silent 2.6 s are counted second by second, not one frozen line
    assert len(set(ticks)) >= 3, redraws
    assert all(len(r.removeprefix("\x1b[K").rstrip("\n")) < 60 for r in redraws), redraws
    assert any("writing 3 package(s)" in r for r in redraws), redraws
    # pip's own lines only in the log, and the line cleared at the end
    assert "Looking in indexes" not in shown and "Successfully installed" not in shown
    assert shown.endswith("\r\x1b[K"), repr(shown[-40:])
    log = (tmp_path / "install.log").read_text()
    assert log.splitlines()[0] == "Looking in indexes: https://pypi.org/simple"
    assert log.splitlines()[-1] == "Successfully installed rich prompt-toolkit specrun"


def test_in_a_log_one_line_per_step_and_the_exit_status_comes_back(tmp_path: Path) -> None:
    done = subprocess.run(["bash", "-c", _step_command(tmp_path, 3)], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL, env=_environment())
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["    0 s  installing", "exit status 3"], done.stderr
    assert "Installing collected packages" in (tmp_path / "install.log").read_text()
