"""The README's "Using it" walkthrough, run verbatim as a new user would: from the
repository root, in a fresh HOME, with bash."""

from __future__ import annotations

import re
import subprocess

from tests.support import REPO, ended_or_killed, isolated_env, processes_with_env


def _walkthrough() -> str:
    text = (REPO / "README.md").read_text()
    found = re.search(r"<!-- walkthrough -->\n```sh\n(.*?)```\n<!-- /walkthrough -->", text, re.S)
    assert found, "README lost its walkthrough block"
    return found.group(1)


def test_the_readme_walkthrough_works_verbatim() -> None:
    script = _walkthrough()
    # a person's git knows who they are; the fresh HOME's does not
    who = {f"GIT_{role}_{what}": value for role in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "A Person"), ("EMAIL", "person@example.com"))}
    with isolated_env(COLUMNS="200", **who) as env:
        try:
            proc = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=REPO, env=env.vars, capture_output=True, text=True, timeout=240,
            )
            out = " ".join(proc.stdout.split())
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert "add a test for negative numbers" in out  # the first suggestion
            assert "accepted in" in out and "tests/test_calc_negative.py" in out
            assert "show me the diff" in out  # the pipelined one, speculated meanwhile
            assert "stopped the speculation of “show me the diff”" in out
            assert "specrun stopped" in out
            calc = env.home / "calc"
            assert "return a + b" in (calc / "src" / "calc.py").read_text()
            # `specrun undo` took the accepted file back; the fix's turn stays.
            assert "Undid turn 2" in out and "removed tests/test_calc_negative.py" in out
            assert not (calc / "tests" / "test_calc_negative.py").exists()
            log = subprocess.run(["git", "log", "--oneline"], cwd=calc, capture_output=True,
                                 text=True, check=True).stdout
            assert "the sample" in log  # the walkthrough's copy is a git repository
        finally:
            if processes_with_env(env.runtime):
                subprocess.run([str(REPO / ".venv" / "bin" / "specrun"), "--project",
                                str(env.home / "calc"), "stop"], env=env.vars,
                               capture_output=True, timeout=60)
            assert ended_or_killed(env.runtime)  # killed if not: e.g. a service for another dir
