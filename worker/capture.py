"""Copying what a sandboxed command wrote into the speculation's overlay.

The command ran on an overlayfs view whose upper directory caught every write. Regular
files found there become overlay writes (so accept applies them like any other
speculative write, all-or-nothing and conflict-checked). Deletions (overlayfs
whiteouts), symlinks and paths the overlay refuses cannot be represented and are
reported instead of applied.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from overlay import Overlay, OverlayError


@dataclass
class CaptureReport:
    copied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def note(self) -> str:
        parts = []
        if self.copied:
            parts.append(f"{len(self.copied)} file(s) it wrote are kept in the speculation")
        if self.skipped:
            parts.append(f"not kept: {', '.join(self.skipped[:10])}")
        return f"[sandboxed run: {'; '.join(parts)}]" if parts else ""


def import_capture(upper: Path, overlay: Overlay) -> CaptureReport:
    report = CaptureReport()
    if not upper.is_dir():
        return report
    for dirpath, dirnames, filenames in os.walk(upper):
        dirnames.sort()
        for name in sorted(filenames):
            source = Path(dirpath) / name
            rel = source.relative_to(upper).as_posix()
            info = source.lstat()
            if stat.S_ISCHR(info.st_mode):  # a whiteout: the command deleted it
                report.skipped.append(f"{rel} (deleted)")
                continue
            if not stat.S_ISREG(info.st_mode):
                report.skipped.append(f"{rel} (not a regular file)")
                continue
            try:
                target = overlay.redirect_write(rel)
            except (OverlayError, ValueError, OSError) as exc:
                report.skipped.append(f"{rel} ({exc})")
                continue
            shutil.copyfile(source, target)
            os.chmod(target, stat.S_IMODE(info.st_mode))
            report.copied.append(rel)
    return report


def remove_capture(path: Path) -> None:
    """overlayfs leaves its work dir unreadable (mode 000): open each directory up on the
    way down (os.walk lists a directory's children before descending), then remove."""
    if not path.exists():
        return
    for dirpath, dirnames, _files in os.walk(path):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o700)
    shutil.rmtree(path, ignore_errors=True)
