"""Several predicted prompts speculated at once (``speculationBranches``), end to end: a
real service, real workers in their own overlays, the scripted model over HTTP answering
the ranked-guesses request with "run the tests" / "add a test for negative numbers" /
"show me the diff" (coordinator/scenarios/demo.yaml)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import overlay
from protocol.wire.control import (
    AcceptRequest,
    ControlReply,
    ErrorReply,
    Notice,
    RejectRequest,
    StatsRequest,
    SuggestionReply,
    Transcript,
    TypedRequest,
    WorkersRequest,
)
from tests.coordinator.e2e import DIFF, FIX, NEG, Driver, scenario_variant, start_playing
from tests.coordinator.e2e import turn_ended as _ended
from tests.support import Specrun, wait_until

TESTS = "run the tests"
RANKED = (TESTS, NEG, DIFF)
SLOW_MS = 1500  # each branch's first model answer: long enough to see all three running


def _slow_first_answers(extra: Callable[[list[Any]], None] | None = None) -> Any:
    """Each branch's speculation waits ``SLOW_MS`` for its first model answer (so the
    three are seen running at once); ``extra`` edits the rules further."""

    def edit(rules: list[Any]) -> None:
        firsts = ("tests, run pytest", "negative test, read the tests", "diff, run git")
        for rule in rules:
            if rule.get("name") in firsts:
                rule["reply"]["latency_ms"] = SLOW_MS
        if extra is not None:
            extra(rules)

    return edit


def _start(
    specrun: Specrun,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    edit: Any,
    **settings: Any,
) -> Driver:
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(specrun.env.runtime))
    start_playing(specrun, scenario_variant(tmp_path, edit), **settings)
    return Driver(specrun.project)


@pytest.fixture
def stop_after(specrun: Specrun) -> Iterator[list[Driver]]:
    drivers: list[Driver] = []
    yield drivers
    for driver in drivers:
        driver.close()
    specrun.run("stop")


def _accept(driver: Driver, index: int) -> list[ControlReply]:
    return driver.stream(AcceptRequest(req_id=driver.client.next_id(), method="tab", index=index))


def _typed(driver: Driver, text: str) -> SuggestionReply:
    reply = driver.client.request(TypedRequest(req_id=driver.client.next_id(), text=text))
    assert isinstance(reply, SuggestionReply), reply
    return reply


def _statuses(reply: SuggestionReply) -> dict[str, str | None]:
    return {b.text: b.speculation.status if b.speculation else None for b in reply.branches}


def _wait_branches(driver: Driver, done: Callable[[SuggestionReply], bool]) -> SuggestionReply:
    deadline = time.monotonic() + 30
    last = driver.suggestion()
    while time.monotonic() < deadline:
        last = driver.suggestion()
        if done(last):
            return last
        time.sleep(0.02)
    raise AssertionError(f"the branches never got there: {last}")


def _all_running(reply: SuggestionReply) -> bool:
    return tuple(b.text for b in reply.branches) == RANKED and all(
        b.speculation is not None and b.speculation.status == "running" for b in reply.branches
    )


def _overlay(pid: int | None, spec_id: str) -> Path:
    assert pid is not None
    return overlay.overlay_dir_for(pid, spec_id)


def test_three_branches_run_at_once_the_second_is_accepted_and_the_others_killed(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stop_after: list[Driver]
) -> None:
    def diff_stays_running(rules: list[Any]) -> None:
        # The third guess is still working when the second is taken, so it is killed.
        for rule in rules:
            if rule.get("name") == "diff, explain":
                rule["reply"]["latency_ms"] = 30_000

    driver = _start(
        specrun,
        monkeypatch,
        tmp_path,
        _slow_first_answers(diff_stays_running),
        speculationBranches=3,
    )
    stop_after.append(driver)
    assert _ended(driver.ask(FIX)).reason == "completed"

    # All three speculate at once, each in its own worker and overlay.
    running = _wait_branches(driver, _all_running)
    assert [b.rank for b in running.branches] == [0, 1, 2]
    specs = [b.speculation for b in running.branches]
    pids = {s.worker_pid for s in specs if s is not None}
    assert len(pids) == 3 and None not in pids
    # the reply's top-level fields stay the top branch's, for clients before branches
    assert running.text == TESTS and running.speculation is not None
    assert running.speculation.id == running.branches[0].speculation.id  # type: ignore[union-attr]
    # the branches beyond the first run at a lower priority
    nice = {b.rank: psutil.Process(b.speculation.worker_pid).nice() for b in running.branches}  # type: ignore[union-attr,arg-type]
    assert nice[0] == 0 and nice[1] > 0 and nice[2] > 0, nice

    # The first guess stops at the shell boundary, the second completes, the third works on
    # (and has had a model reply: its cost is asserted below; at nice +10 beside a busy
    # machine it can still be waiting for its first).
    ready = _wait_branches(
        driver,
        lambda r: _statuses(r) == {TESTS: "boundary", NEG: "completed", DIFF: "running"}
        and all(
            b.speculation is not None and (b.speculation.turns or b.speculation.tool_uses)
            for b in r.branches
        ),
    )
    by_rank = {b.rank: b.speculation for b in ready.branches}
    assert by_rank[1] is not None and by_rank[1].files_written == ("tests/test_calc_negative.py",)
    others = [(s.worker_pid, s.id) for rank, s in by_rank.items() if rank != 1 and s is not None]
    third_pid = by_rank[2].worker_pid  # type: ignore[union-attr]
    assert third_pid is not None and psutil.pid_exists(third_pid)
    assert _overlay(third_pid, by_rank[2].id).exists()  # type: ignore[union-attr]

    replies = _accept(driver, 1)
    assert _ended(replies).reason == "accepted"
    transcript = next(r for r in replies if isinstance(r, Transcript))
    assert transcript.entries[0].text == NEG
    assert (specrun.project / "tests/test_calc_negative.py").exists()
    # The others were killed at once: workers gone, overlays removed.
    assert wait_until(lambda: not psutil.pid_exists(third_pid), timeout=1.0)
    for pid, spec_id in others:
        assert not _overlay(pid, spec_id).exists(), spec_id

    # The pipelined suggestion is the accepted branch's ("show me the diff" after NEG).
    assert wait_until(lambda: driver.suggestion().text == DIFF, timeout=10)
    nxt = driver.suggestion()
    assert [b.text for b in nxt.branches] == [DIFF]

    stats = specrun.query(StatsRequest)
    assert stats["accepted_by_rank"] == {"1": 1}
    assert stats["accepted_by_method"] == {"tab": 1}
    assert stats["speculations_aborted"] >= 1  # the third, killed while running
    cost = stats["branch_cost"]
    assert set(cost["by_rank"]) >= {"0", "1", "2"}
    for rank in ("0", "1", "2"):
        assert cost["by_rank"][rank]["tokens"] > 0, cost
    # CPU time is counted in clock ticks (10 ms): one short branch may round to 0.0,
    # the three together do not.
    assert sum(cost["by_rank"][rank]["cpu_s"] for rank in ("0", "1", "2")) > 0, cost
    discarded = cost["discarded"]
    thrown = cost["by_rank"]["0"]["tokens"] + cost["by_rank"]["2"]["tokens"]
    assert discarded["tokens"] >= thrown > 0 and discarded["cpu_s"] > 0


def test_typing_keeps_only_the_branches_it_still_leads_to(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stop_after: list[Driver]
) -> None:
    driver = _start(specrun, monkeypatch, tmp_path, _slow_first_answers(), speculationBranches=3)
    stop_after.append(driver)
    assert _ended(driver.ask(FIX)).reason == "completed"
    running = _wait_branches(driver, _all_running)
    specs = {b.text: b.speculation for b in running.branches}

    # Nothing typed yet (or blank) keeps all three.
    assert [b.text for b in _typed(driver, "  ").branches] == list(RANKED)
    # "Show" leads only to "show me the diff": the other two are killed at once.
    kept = _typed(driver, "Show")
    assert [b.text for b in kept.branches] == [DIFF] and kept.text == DIFF
    assert kept.branches[0].rank == 2
    for text in (TESTS, NEG):
        spec = specs[text]
        assert spec is not None and spec.worker_pid is not None
        assert wait_until(lambda pid=spec.worker_pid: not psutil.pid_exists(pid), timeout=1.0)
        assert not _overlay(spec.worker_pid, spec.id).exists()
    diff = specs[DIFF]
    assert diff is not None and diff.worker_pid is not None and psutil.pid_exists(diff.worker_pid)
    # A rank that is gone is not found, with one sentence saying what is live.
    missing = _accept(driver, 0)
    assert isinstance(missing[-1], ErrorReply) and missing[-1].code == "not_found"
    assert "live branches: 3" in missing[-1].message

    _wait_branches(driver, lambda r: _statuses(r) == {DIFF: "completed"})
    assert _ended(_accept(driver, 2)).reason == "accepted"
    stats = specrun.query(StatsRequest)
    assert stats["accepted_by_rank"] == {"2": 1}
    assert stats["accepted_by_typing"] == {"prefix_kept": 1}


def test_the_budget_bounds_the_branches(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stop_after: list[Driver]
) -> None:
    # One token per session: the first suggestion's branches start (nothing is spent
    # yet) and spend it; the next suggestion's branches are all shown, none speculated.
    driver = _start(
        specrun,
        monkeypatch,
        tmp_path,
        lambda rules: None,
        speculationBranches=3,
        speculationBudget=1,
        speculationBudgetWindow="session",
    )
    stop_after.append(driver)
    assert _ended(driver.ask(FIX)).reason == "completed"
    first = _wait_branches(
        driver,
        lambda r: (
            len(r.branches) == 3
            and all(
                b.speculation is not None and b.speculation.status != "running" for b in r.branches
            )
        ),
    )
    assert all(b.skipped is None for b in first.branches)
    workers_before = {w["pid"] for w in specrun.query(WorkersRequest)["workers"]}

    assert specrun.query(RejectRequest)["message"] == "dismissed"
    assert _ended(driver.ask(FIX)).reason == "completed"  # the same suggestion again
    second = _wait_branches(driver, lambda r: len(r.branches) == 3)
    assert [b.text for b in second.branches] == list(RANKED)
    assert all(b.skipped == "budget" and b.speculation is None for b in second.branches)
    assert second.speculation_skipped == "budget"
    busy = [
        w
        for w in specrun.query(WorkersRequest)["workers"]
        if w["job_kind"] == "speculation" and w["pid"] not in workers_before
    ]
    assert busy == []
    stats = specrun.query(StatsRequest)
    assert stats["speculations_skipped"] == {"total": 3, "by_reason": {"budget": 3}}
    assert stats["speculation_budget"]["exhausted"]


def test_a_notice_says_when_a_typed_prompt_used_a_branch(
    specrun: Specrun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stop_after: list[Driver]
) -> None:
    driver = _start(specrun, monkeypatch, tmp_path, _slow_first_answers(), speculationBranches=3)
    stop_after.append(driver)
    assert _ended(driver.ask(FIX)).reason == "completed"
    _wait_branches(driver, _all_running)
    # The second guess typed out while it still runs: used, waiting for it.
    replies = driver.ask("  Add a test for NEGATIVE numbers. ")
    notices = [r.text for r in replies if isinstance(r, Notice)]
    assert notices[0] == (
        "You typed a predicted prompt: using its speculation (still running, waiting for it "
        "to finish)."
    )
    assert _ended(replies).reason == "accepted"
    assert (specrun.project / "tests/test_calc_negative.py").exists()
    stats = specrun.query(StatsRequest)
    assert stats["accepted_by_method"] == {"typed": 1}
    assert stats["accepted_by_typing"] == {"exact_match": 1}
    assert stats["accepted_by_rank"] == {"1": 1}
