"""Issue 17 from the command line: with `speculationBranches` 3 the suggestion lists its
ranked alternatives (JSON and human), `accept --branch N` takes one and the others'
workers go (branches are numbered from 1 wherever a person reads or types one; the JSON
keeps the wire's 0-based `rank`; an old `--index` gets one sentence), `suggestion --typed
TEXT` keeps the alternatives the text leads to, and `stats` shows what was taken and what
the branches cost. A real service, the scripted model's demo scenario (its ranked answer
after the fix) in a copy of the sample project."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.wire.control import SuggestionRequest
from tests.support import Env, Specrun, make_sample_project, running_service, wait_until

FIX = "fix the failing test in tests/test_calc.py"
NEG = "add a test for negative numbers"
RANKED = ["run the tests", NEG, "show me the diff"]
SETTLED = ("completed", "boundary", "failed")


def _with_branches(project: Path) -> Any:
    def write(env: Env) -> None:
        env.own_settings(project).write_text(json.dumps({"speculationBranches": 3}))

    return write


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Specrun]:
    project = make_sample_project(tmp_path / "proj")
    with running_service(project, "--approval-mode", "auto-edit",
                         before_start=_with_branches(project)) as runner:
        yield runner


def _settled_branches(service: Specrun) -> dict[str, Any]:
    """The suggestion once all three alternatives are there and none is running."""
    found: dict[str, Any] = {}

    def settled() -> bool:
        found.clear()
        found.update(service.query(SuggestionRequest))
        branches = found.get("branches") or []
        return [b["text"] for b in branches] == RANKED and all(
            (b["speculation"] or {}).get("status") in SETTLED for b in branches)

    assert wait_until(settled, timeout=30), found
    return found


def test_suggestion_lists_the_alternatives_and_accept_branch_takes_one(service: Specrun) -> None:
    service.run("ask", FIX, check=True)
    reply = _settled_branches(service)
    as_json = service.json("suggestion")
    assert as_json["text"] == "run the tests"  # the top one, as before branches
    assert [(b["rank"], b["text"]) for b in as_json["branches"]] == list(enumerate(RANKED))
    statuses = [b["speculation"]["status"] for b in as_json["branches"]]
    assert statuses == ["boundary", "completed", "completed"]  # pytest is not read-only
    pids = [b["speculation"]["worker_pid"] for b in reply["branches"]]
    assert len(set(pids)) == 3  # each in its own worker

    human = " ".join(service.run("suggestion", check=True).stdout.split())
    for shown in ("❯ run the tests (branch 1)", "stopped before the shell command",
                  "2 more guesses (↓ in `specrun chat`, or `specrun accept --branch N`):",
                  f"❯ {NEG} (branch 2) speculation ✓ completed",
                  "❯ show me the diff (branch 3) speculation ✓ completed"):
        assert shown in human, human
    assert human.index("run the tests") < human.index(NEG) < human.index("show me the diff")
    assert "rank" not in human and "--index" not in human

    # the old 0-based option: one sentence naming the branch it meant, nothing taken
    for old, meant in (("0", "`--index 0` is `--branch 1`"), ("1", "`--index 1` is `--branch 2`")):
        for command in ("accept", "diff"):
            retired = service.run(command, "--index", old)
            assert retired.returncode == 2 and "Traceback" not in retired.stderr
            said = " ".join(retired.stderr.split())
            assert "--index (counted from 0) is retired" in said and meant in said, said
    assert not (service.project / "tests/test_calc_negative.py").exists()
    assert "--index" not in service.run("accept", "--help", check=True).stdout

    diff = " ".join(service.run("diff", "--stat", "--branch", "2", check=True).stdout.split())
    assert f"“{NEG}” (branch 2; completed" in diff, diff

    accepted = service.run("accept", "--branch", "2", "--json")
    assert accepted.returncode == 0, accepted.stderr
    events = [json.loads(line) for line in accepted.stdout.splitlines()]
    transcript = next(e for e in events if e["type"] == "transcript")
    assert transcript["entries"][0]["text"] == NEG
    assert transcript["files"] == ["tests/test_calc_negative.py"]
    assert events[-1]["reason"] == "accepted"
    assert (service.project / "tests/test_calc_negative.py").exists()

    stats = service.json("stats")
    assert stats["accepted_by_rank"] == {"1": 1} and stats["accepted_by_method"] == {"cli": 1}
    assert set(stats["branch_cost"]["by_rank"]) == {"0", "1", "2"}
    assert stats["branch_cost"]["discarded"]["tokens"] > 0
    shown = " ".join(service.run("stats", check=True).stdout.split())
    assert "by branch branch 2: 1" in shown, shown
    assert "speculation branches branch 1 (top): " in shown and "thrown away" in shown
    # a boundary's code in words (the code stays in --json)
    assert "stopped at a boundary 1 (shell command 1)" in shown, shown
    assert stats["speculations_boundary"]["by_reason"] == {"shell": 1}

    # a branch that is not there: one sentence, exit 1
    missing = service.run("accept", "--branch", "4")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert "There is no branch 4 to accept right now" in " ".join(missing.stderr.split())
    for below in ("0", "-1"):  # branches count from 1: one sentence, nothing taken
        for command in ("accept", "diff"):
            usage = service.run(command, "--branch", below)
            said = " ".join(usage.stderr.split())
            assert usage.returncode == 2 and "Traceback" not in usage.stderr
            assert (f"--branch {below} names no branch: branches are numbered from 1, the top "
                    "guess is --branch 1.") in said, said


def test_suggestion_typed_keeps_the_alternatives_it_leads_to(service: Specrun) -> None:
    service.run("ask", FIX, check=True)
    reply = _settled_branches(service)
    ids = {b["text"]: b["speculation"]["id"] for b in reply["branches"]}

    kept = service.json("suggestion", "--typed", "Add  a")  # case and spaces aside
    assert kept["text"] == NEG and [b["text"] for b in kept["branches"]] == [NEG]
    branch = kept["branches"][0]
    assert branch["rank"] == 1 and branch["speculation"]["id"] == ids[NEG]
    assert branch["speculation"]["status"] == "completed"
    assert service.json("stats")["branch_cost"]["discarded"]["tokens"] > 0
    human = " ".join(service.run("suggestion", check=True).stdout.split())
    assert f"❯ {NEG} (branch 2)" in human and "more guess" not in human  # one left

    # the top guess is gone: branch 1 is refused naming the branches left, and a plain
    # accept takes what is shown, the best-ranked branch still live
    top = service.run("accept", "--branch", "1")
    said = " ".join(top.stderr.split())
    assert top.returncode == 1 and "Traceback" not in top.stderr
    assert "There is no branch 1 to accept right now (live branches: 2)" in said, said
    accepted = service.run("accept", "--json")
    assert accepted.returncode == 0, accepted.stderr
    assert (service.project / "tests/test_calc_negative.py").exists()

    # the pipelined suggestion; text it does not begin with dismisses it
    assert wait_until(lambda: service.query(SuggestionRequest)["text"] == "show me the diff",
                      timeout=20)
    gone = service.json("suggestion", "--typed", "show me the tests")
    assert gone["text"] is None and gone["branches"] == []
    assert service.run("accept").returncode == 1  # nothing left to take
