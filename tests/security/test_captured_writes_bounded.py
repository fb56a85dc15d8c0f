"""Captured writes are bounded while the command runs, not only after it.

With ``speculateShell`` a command that is not read-only writes into a writable view; its
writes used to land on the host's file system and the quota was checked after the
command exited (one command put ~10 GiB on the host's /tmp before ending at
``quota:overlay_bytes``). The view's upper layer now lives on a file system the size of
the quota left: while a command tries to write 1 GiB against a 16 MiB quota, the free
space of the file system under the speculation base never drops by more than the quota,
and running out ends the speculation at ``quota:*`` as before.

The free space is sampled by a thread every few milliseconds while the speculation runs.
Other processes share that file system (the machine runs other tests), so the check
allows them a margin far below the gigabyte the command tries to write.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import msgspec

from overlay import speculation_base_dir
from protocol.wire.work import Boundary, Containment
from tests.worker.conftest import Harness, call, harness, rule, spec_project

__all__ = ["harness", "spec_project"]  # the worker tests' fixtures, used here

QUOTA = 16 << 20
OTHERS = 48 << 20  # what other processes on the machine may write meanwhile


class FreeSpace:
    """Samples the free bytes of the file system holding ``path`` until stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.baseline = self._free()
        self.lowest = self.baseline
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _free(self) -> int:
        info = os.statvfs(self.path)
        return info.f_bavail * info.f_frsize

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self.lowest = min(self.lowest, self._free())
            self.samples += 1

    def __enter__(self) -> FreeSpace:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def drop(self) -> int:
        return self.baseline - self.lowest


def captured_job(h: Harness, files: int = 2000) -> Any:
    job = h.job()
    containment = Containment(overlay_quota_bytes=QUOTA, overlay_quota_files=files)
    return msgspec.structs.replace(job, speculate_shell=True, containment=containment)


def test_a_command_writing_far_past_the_quota_never_takes_more_of_the_host(
    harness: Any,
) -> None:
    # 1 GiB in files of 128 MiB (each below the per-file size limit)
    command = "for i in 1 2 3 4 5 6 7 8; do head -c 128M /dev/zero > big$i.bin || break; done"
    h: Harness = harness(
        [rule({"tool_calls": [call("run_shell_command", command=command)]}, times=1)]
    )
    speculation_base_dir().mkdir(parents=True, exist_ok=True)
    with FreeSpace(speculation_base_dir()) as space:
        out = h.run(captured_job(h))
    assert space.samples >= 10
    assert space.drop < QUOTA + OTHERS, f"free space dropped by {space.drop >> 20} MiB"
    assert [b.reason.text() for b in out.of(Boundary)] == ["quota:overlay_bytes"], out.events
    assert not list(h.project.glob("big*"))


def test_running_out_of_files_ends_at_the_file_quota(harness: Any) -> None:
    command = "mkdir many && cd many && for i in $(seq 1 500); do : > f$i || break; done"
    h: Harness = harness(
        [rule({"tool_calls": [call("run_shell_command", command=command)]}, times=1)]
    )
    out = h.run(captured_job(h, files=50))
    assert [b.reason.text() for b in out.of(Boundary)] == ["quota:overlay_files"], out.events


def test_a_command_within_the_quota_keeps_its_writes(harness: Any) -> None:
    command = "head -c 1M /dev/zero > small.bin && mkdir -p a/b && echo x > a/b/c.txt"
    h: Harness = harness(
        [
            rule({"tool_calls": [call("run_shell_command", command=command)]}, times=1),
            rule({"text": "Done."}),
        ]
    )
    out = h.run(captured_job(h))
    assert not out.of(Boundary), out.events
    sizes = {p.name: p.stat().st_size for p in Path(h.overlay_dirs[-1]).rglob("*") if p.is_file()}
    assert sizes.get("small.bin") == 1 << 20 and sizes.get("c.txt") == 2, sizes
