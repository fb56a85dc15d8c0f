"""`specrun demo` plays the whole story to its end and leaves nothing behind."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import Env, processes_with_env


def _run_demo(env: Env, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    tmp.mkdir()
    return subprocess.run(
        [sys.executable, "-m", "coordinator", "demo", "--pace", "0", *args],
        env={**env.vars, "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )


def assert_in_order(text: str, steps: list[str], out: str) -> None:
    """Each of ``steps`` is in ``text``, each after the one before (``out``: the demo's whole
    output, for the failure message)."""
    position = 0
    for step in steps:
        found = text.find(step, position)
        assert found >= 0, f"missing or out of order: {step!r}\n{out}"
        position = found


def test_demo_plays_the_story(env: Env, tmp_path: Path) -> None:
    proc = _run_demo(env, tmp_path / "t")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    steps = [
        "❯ fix the failing test in tests/test_calc.py",
        "edit src/calc.py",
        "❯ add a test for negative numbers",
        "speculation ✓ completed",
        "⇥ Tab",
        "1 file applied (created tests/test_calc_negative.py)",
        "?? tests/test_calc_negative.py",
        "❯ show me the diff",
        "run_shell_command(command: git diff)",
        "❯ commit this",
        "speculation ⟳ running",
        "❯ run the tests",
        "[y/a/n/r]: y",
        "passed",
        "the speculation of 'commit this' was aborted",
        "$ specrun undo --list",
        "removes   tests/test_calc_negative.py",
        "$ specrun undo",
        "removed   tests/test_calc_negative.py",
        "Time saved by speculation",
        "The service is stopped and the temp project removed.",
    ]
    assert_in_order(out, steps, out)
    assert "killed, gone" in " ".join(out.split())
    # internals only with --verbose: no worker pid, no overlay path (issue 35, item 6)
    assert "its worker killed, gone" in " ".join(out.split())
    assert "speculating in worker" not in out and "specrun-speculation" not in out
    assert not re.search(r"worker \d+", out), out
    # issue 17: three ranked guesses (the top one stops at the shell boundary, the second
    # is taken), typing the beginning of the pipelined one keeps its speculation, and the
    # first letter of something else drops "commit this"
    flat = " ".join(out.split())
    branch_steps = [
        "❯ run the tests",
        "2 more guesses, each speculated in its own worker",
        "❯ show me the diff (branch 3)",
        "↓ Down: the top guess stopped before the shell command `python -m pytest -q`",
        "⇥ Tab (specrun accept --branch 2)",
        "1 file applied (created tests/test_calc_negative.py)",
        "❯ show me▏ the diff",
        "'show me' is how the suggestion begins: its speculation is kept (still running",
        "'r' is not how 'commit this' begins",
    ]
    assert_in_order(flat, branch_steps, out)
    assert "Traceback" not in proc.stderr
    assert not list((tmp_path / "t").glob("specrun-demo-*"))
    assert not processes_with_env(env.runtime)


def test_demo_json_summary(env: Env, tmp_path: Path) -> None:
    proc = _run_demo(env, tmp_path / "t", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    accepted = summary["accepted"]
    assert [a["suggestion"] for a in accepted] == ["add a test for negative numbers",
                                                   "show me the diff"]
    assert accepted[0]["files"] == ["tests/test_calc_negative.py"]
    for row in accepted:
        assert row["with_speculation_s"] < row["without_speculation_s"]
    rejected = summary["rejected"]
    assert rejected["suggestion"] == "commit this" and rejected["typed"] == "run the tests"
    assert rejected["speculation_status"] == "running" and rejected["worker_gone"] is True
    assert summary["stats"]["suggestions_accepted"] == 2
    assert summary["stats"]["speculations_aborted"] == 1
    branches = summary["branches"]
    assert [(b["text"], b["speculation_status"]) for b in branches["offered"]] == [
        ("run the tests", "boundary"), ("add a test for negative numbers", "completed"),
        ("show me the diff", "completed")]
    assert branches["taken_rank"] == 1
    typed = summary["typed_prefix"]
    assert (typed["suggestion"], typed["typed"]) == ("show me the diff", "show me")
    assert typed["speculation_status"] == "running" and typed["speculation_kept"] is True
    undo = summary["undo"]
    assert [(c["kind"], c["prompt"]) for c in undo["checkpoints"]] == [
        ("turn", "fix the failing test in tests/test_calc.py"),
        ("accept", "add a test for negative numbers")]
    assert undo["files"] == [{"path": "tests/test_calc_negative.py", "action": "remove"}]
    assert undo["undone"] is True
    stats = summary["stats"]
    assert stats["accepted_by_rank"] == {"0": 1, "1": 1}
    assert stats["accepted_by_typing"] == {"prefix_kept": 1}
    assert not list((tmp_path / "t").glob("specrun-demo-*"))
    assert not processes_with_env(env.runtime)


def test_ctrl_c_in_the_middle_cleans_up(env: Env, tmp_path: Path) -> None:
    tmp = tmp_path / "t"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "demo", "--pace", "0.5"],
        env={**env.vars, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "speculating in its own worker" in line:
                break
        assert processes_with_env(env.runtime)  # the service and its workers run
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1
    assert "interrupted" in err and "Traceback" not in err
    assert not list(tmp.glob("specrun-demo-*"))
    assert not processes_with_env(env.runtime)
