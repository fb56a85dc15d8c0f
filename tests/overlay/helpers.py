"""Shared helpers for the overlay tests: tree snapshots, stray-file checks, records."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from overlay import ApplyResult, Overlay, RecordEntry
from overlay.apply import BACKUP_MARK, STAGE_MARK

Snapshot = dict[str, tuple[object, ...]]


def snapshot(root: Path) -> Snapshot:
    """Every path below ``root`` -> (kind, content/target, mode): an exact picture of a tree."""
    out: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode)
            else:
                out[rel] = ("file", path.read_bytes(), mode)
    return out


def journal_of(root: str | os.PathLike[str] | Overlay) -> str:
    """The apply journal directory of a test's project, beside it (as specrun's state
    directory is outside the project: a journal is never written into the project)."""
    path = Path(os.path.realpath(root.root if isinstance(root, Overlay) else root))
    journals = path.parent / f"{path.name}.journal"
    journals.mkdir(mode=0o700, exist_ok=True)
    return str(journals)


def applied(overlay: Overlay, **options: Any) -> ApplyResult:
    """``overlay.apply_to_real`` with the test project's journal directory."""
    return overlay.apply_to_real(journal_dir=journal_of(overlay), **options)


def strays(root: Path) -> list[str]:
    """Stage and backup files left anywhere below ``root``, a journal in the project (there
    must never be one), and journal files left in its journal directory."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            rel = Path(dirpath, name).relative_to(root).as_posix()
            if STAGE_MARK in name or BACKUP_MARK in name or rel.startswith(".specrun/journal"):
                found.append(rel)
    journals = Path(os.path.realpath(root)).parent / f"{Path(os.path.realpath(root)).name}.journal"
    if journals.is_dir():
        found += [f"journal/{name}" for name in sorted(os.listdir(journals))]
    return found


def make_tree(root: Path, files: dict[str, bytes | str], mode: int | None = None) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        path.write_bytes(data)
        if mode is not None:
            path.chmod(mode)


# A record of an overlay is made the way production makes it: the speculation's worker
# reports its written files in its ``Completed`` event (worker.speculation.outcome), and
# the coordinator turns that report into the record ``Overlay.from_record`` takes
# (coordinator.service.speculation.applied_set.record_of). Imported where used: most overlay
# tests need neither side.


def worker_report(ov: Overlay) -> bytes:
    """The ``Completed`` frame a worker sends for a speculation that wrote through ``ov``."""
    from protocol.wire import codec
    from protocol.wire.work import Completed
    from worker.boundary import SpeculatedConversation
    from worker.speculation import LoopEnd, outcome

    end = LoopEnd("completed", "answered", SpeculatedConversation("the suggestion"))
    return codec.worker_to_coordinator().encode(Completed("spec-1", 1, outcome(end, ov)))


def record_from_report(frame: bytes) -> dict[str, RecordEntry]:
    """The coordinator's side: the record of the overlay a worker's frame reports."""
    from coordinator.service.speculation.applied_set import record_of
    from protocol.wire import codec
    from protocol.wire.work import Completed

    event = codec.worker_to_coordinator().decode(frame)
    assert isinstance(event, Completed)
    return record_of(event.outcome.written_files)


def reported_record(ov: Overlay) -> dict[str, RecordEntry]:
    return record_from_report(worker_report(ov))
