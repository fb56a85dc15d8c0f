"""Copying what a sandboxed command wrote into the speculation's overlay.

The command ran on an overlayfs view whose upper directory caught every write. Regular
files found there become overlay writes (so accept applies them like any other
speculative write, all-or-nothing and conflict-checked). Deletions (overlayfs
whiteouts), symlinks and paths the overlay refuses cannot be represented and are
reported instead of applied. A write to a protected path, a name holding a control,
bidi or invisible character (``bad_path``: such a name would show as something else),
or one that takes the speculation over its overlay quota, stops the speculation
(``ToolStop``) before anything of this command is kept; set-uid, set-gid and sticky
bits never come out.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from overlay import Overlay, OverlayError
from protocol.work import Containment
from worker.gate import bad_path_reason, protected_reason
from worker.tools.errors import ToolStop


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


def _regular_files(upper: Path) -> tuple[list[tuple[str, Path, os.stat_result]], list[str]]:
    files: list[tuple[str, Path, os.stat_result]] = []
    skipped: list[str] = []
    for dirpath, dirnames, filenames in os.walk(upper):
        dirnames.sort()
        for name in (*dirnames, *filenames):  # any entry: a directory's name is shown too
            reason = bad_path_reason((Path(dirpath) / name).relative_to(upper).as_posix())
            if reason is not None:
                raise ToolStop(reason, "the command created a file name with a control, "
                                       "bidi or invisible character")
        for name in sorted(filenames):
            source = Path(dirpath) / name
            rel = source.relative_to(upper).as_posix()
            info = source.lstat()
            if stat.S_ISCHR(info.st_mode):  # a whiteout: the command deleted it
                skipped.append(f"{rel} (deleted)")
            elif not stat.S_ISREG(info.st_mode):
                skipped.append(f"{rel} (not a regular file)")
            else:
                files.append((rel, source, info))
    return files, skipped


def _check_bounds(
    files: list[tuple[str, Path, os.stat_result]], overlay: Overlay, containment: Containment
) -> None:
    for rel, _source, _info in files:
        reason = protected_reason(rel, containment.protected_paths)
        if reason is not None:
            raise ToolStop(reason, f"the command wrote the protected path {rel}")
    written = overlay.written_files()
    new = {rel for rel, _s, _i in files}
    kept = {rel: p for rel, p in written.items() if rel not in new}
    if len(kept) + len(new) > containment.overlay_quota_files:
        raise ToolStop("quota:overlay_files", "the command wrote more files than the quota")
    used = sum(p.stat().st_size for p in kept.values() if p.exists())
    if used + sum(info.st_size for _r, _s, info in files) > containment.overlay_quota_bytes:
        raise ToolStop("quota:overlay_bytes", "the command wrote more bytes than the quota")


def import_capture(
    upper: Path, overlay: Overlay, containment: Containment | None = None
) -> CaptureReport:
    report = CaptureReport()
    if not upper.is_dir():
        return report
    files, report.skipped = _regular_files(upper)
    _check_bounds(files, overlay, containment or Containment())
    for rel, source, info in files:
        try:
            target = overlay.redirect_write(rel)
        except (OverlayError, ValueError, OSError) as exc:
            report.skipped.append(f"{rel} ({exc})")
            continue
        shutil.copyfile(source, target)
        os.chmod(target, stat.S_IMODE(info.st_mode) & 0o777)  # no set-uid/gid, no sticky
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
