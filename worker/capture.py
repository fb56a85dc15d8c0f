"""Copying what a sandboxed command wrote into the speculation's overlay.

The command ran on an overlayfs view whose upper directory caught every write. Regular
files found there become overlay writes (so accept applies them like any other
speculative write, all-or-nothing and conflict-checked). Deletions become deletion entries
(applied at Tab the same way): overlayfs marks a removed name with a whiteout, a character
device 0/0 (or, where the kernel uses them, a file carrying an ``overlay.whiteout`` extended
attribute); a removed directory's whiteout stands for every file below it in the project, and
a directory removed and made again is "opaque" (an ``overlay.opaque`` attribute): the files
of the project below it that it no longer holds were deleted. Symlinks and paths the overlay
refuses cannot be represented and are reported instead of applied. A write or deletion of a
protected path, a name holding a control, bidi or invisible character (``bad_path``: such a
name would show as something else), or one that takes the speculation over its overlay
quota, stops the speculation (``ToolStop``) before anything of this command is kept;
set-uid, set-gid and sticky bits never come out.

Python bytecode (anything in a ``__pycache__`` directory, a ``.pyc`` or ``.pyo`` file) is
not kept and not counted: the interpreter writes it again from the sources, a real test
run writes one per module imported (a project's venv included: 723 files for a 300-test
pytest suite, against a quota of 2,000), and a ``.pyc`` applied at Tab is code the user's
next ``python`` runs that no diff shows.

A kept file keeps its modification time and mode (without set-uid, set-gid and sticky bits),
so a build tool that trusts times (make, ninja, cargo, tsc's incremental build) finds the next
command's sources older than what the last one built. What a file cannot carry (symlinks,
directories, deletions) the next command sees through the sandbox helper's carry layer
(``worker.contain.session``); a symlink is named in the note, since Tab does not apply it.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from overlay import Overlay, OverlayError
from protocol.rules.protected import protected_reason
from protocol.rules.runs_later import runs_later_reason
from protocol.wire.boundary import BoundaryReason
from protocol.wire.work import Containment
from worker.contain.upper_layer import is_opaque, is_whiteout
from worker.gate import bad_path_reason
from worker.tools.errors import ToolStop


@dataclass
class CaptureReport:
    copied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    bytecode: int = 0

    def note(self) -> str:
        parts = []
        if self.copied:
            parts.append(f"{len(self.copied)} file(s) it wrote are kept in the speculation")
        if self.deleted:
            parts.append(f"{len(self.deleted)} file(s) it deleted are kept as deletions")
        if self.links:
            shown = ", ".join(self.links[:10])
            parts.append(f"symlink(s) kept for the next commands, not applied at Tab: {shown}")
        if self.skipped:
            parts.append(f"not kept: {', '.join(self.skipped[:10])}")
        if self.bytecode:
            parts.append(f"{self.bytecode} Python bytecode file(s) not kept (rebuilt on import)")
        return f"[sandboxed run: {'; '.join(parts)}]" if parts else ""


@dataclass
class _Scan:
    files: list[tuple[str, Path, os.stat_result]] = field(default_factory=list)
    whiteouts: list[str] = field(default_factory=list)  # removed names (files or directories)
    opaque: list[str] = field(default_factory=list)  # directories removed and made again
    links: list[str] = field(default_factory=list)  # symlinks: the carry layer keeps them
    skipped: list[str] = field(default_factory=list)
    bytecode: int = 0  # files not kept (see the module's docstring)


def is_bytecode(rel: str) -> bool:
    """Whether a project-relative path is Python's bytecode cache."""
    *dirs, name = rel.split("/")
    return "__pycache__" in dirs or name.endswith((".pyc", ".pyo"))


def _scan(upper: Path) -> _Scan:
    found = _Scan()
    for dirpath, dirnames, filenames in os.walk(upper):
        dirnames.sort()
        for name in (*dirnames, *filenames):  # any entry: a directory's name is shown too
            reason = bad_path_reason((Path(dirpath) / name).relative_to(upper).as_posix())
            if reason is not None:
                raise ToolStop(reason, "the command created a file name with a control, "
                                       "bidi or invisible character")
        here = Path(dirpath)
        if here != upper and is_opaque(dirpath):
            found.opaque.append(here.relative_to(upper).as_posix())
        for name in sorted(filenames):
            source = here / name
            rel = source.relative_to(upper).as_posix()
            info = source.lstat()
            if is_whiteout(str(source), info):
                found.whiteouts.append(rel)
            elif stat.S_ISLNK(info.st_mode):
                found.links.append(rel)
            elif stat.S_ISCHR(info.st_mode) or not stat.S_ISREG(info.st_mode):
                found.skipped.append(f"{rel} (not a regular file)")
            elif is_bytecode(rel):
                found.bytecode += 1
            else:
                found.files.append((rel, source, info))
    return found


def _files_below(overlay: Overlay, rel: str) -> list[str]:
    """Files at or below ``rel`` as the command saw them: regular files of the project (no
    symlink followed) and files the speculation wrote, deleted ones excepted."""
    found: list[str] = []
    root = Path(os.path.realpath(overlay.root))
    start = root / rel
    try:
        info = start.lstat()
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        found.append(rel)
    elif info is not None and stat.S_ISDIR(info.st_mode):
        for dirpath, _dirnames, filenames in os.walk(start):  # never follows symlinks
            for name in filenames:
                path = Path(dirpath, name)
                if stat.S_ISREG(path.lstat().st_mode):
                    found.append(path.relative_to(root).as_posix())
    gone = set(overlay.deleted_files())
    for written in overlay.written_files():
        if written not in gone and (written == rel or written.startswith(rel + "/")):
            found.append(written)
    return sorted(set(found))


def _deletions(scan: _Scan, overlay: Overlay) -> list[str]:
    """Every file the command deleted, as project-relative paths."""
    deleted: set[str] = set()
    root = os.path.realpath(overlay.root)
    for rel in scan.whiteouts:
        if os.path.islink(os.path.join(root, rel)):
            scan.skipped.append(f"{rel} (deleted; a symlink: not applied at Tab)")
            continue
        deleted.update(_files_below(overlay, rel))
    kept = {rel for rel, _s, _i in scan.files}
    for rel in scan.opaque:
        deleted.update(p for p in _files_below(overlay, rel) if p not in kept)
    return sorted(deleted - kept)


def _check_bounds(
    files: list[tuple[str, Path, os.stat_result]],
    deleted: list[str],
    overlay: Overlay,
    containment: Containment,
) -> None:
    for rel in deleted:
        reason = protected_reason(rel, containment.protected_paths)
        if reason is not None:
            raise ToolStop(reason, f"the command deleted the protected path {rel}")
    for rel, _source, info in files:
        reason = protected_reason(rel, containment.protected_paths)
        if reason is not None:
            raise ToolStop(reason, f"the command wrote the protected path {rel}")
        if containment.runs_later_boundary:
            executable = bool(info.st_mode & 0o111) and not _was_executable(overlay, rel)
            reason = runs_later_reason(rel, containment.runs_later_paths, executable=executable)
            if reason is not None:
                raise ToolStop(reason, f"the command wrote {rel}, which runs later")
    written = overlay.written_files()
    new = {rel for rel, _s, _i in files} | set(deleted)
    kept = {rel: p for rel, p in written.items() if rel not in new}
    if len(kept) + len(new) > containment.overlay_quota_files:
        raise ToolStop(
            BoundaryReason("quota", "overlay_files"), "the command wrote more files than the quota"
        )
    used = sum(p.stat().st_size for p in kept.values() if p.exists())
    if used + sum(info.st_size for _r, _s, info in files) > containment.overlay_quota_bytes:
        raise ToolStop(
            BoundaryReason("quota", "overlay_bytes"), "the command wrote more bytes than the quota"
        )


# The capture space's room beyond the bytes left: tmpfs stores a file in whole pages, and
# directories (which the quota does not count) take inodes.
_PAGE = 4096
_SPARE_INODES = 16


def capture_space(overlay: Overlay, containment: Containment) -> tuple[int, int]:
    """The size in bytes and inodes of the file system a captured command writes to: what
    the speculation's quota has left, so the host never holds more than the quota."""
    written = overlay.written_files()
    used = sum(p.stat().st_size for p in written.values() if p.exists())
    counted = len(written) + len(overlay.deleted_files())  # as the quota counts them
    files_left = max(containment.overlay_quota_files - counted, 0)
    bytes_left = max(containment.overlay_quota_bytes - used, 0)
    return bytes_left + _PAGE * (files_left + _SPARE_INODES), 2 * files_left + _SPARE_INODES


def _was_executable(overlay: Overlay, rel: str) -> bool:
    """Whether the file the command saw (the overlay's copy, else the real one) was
    executable already."""
    path = overlay.written_files().get(rel) or Path(overlay.root, rel)
    try:
        return bool(path.lstat().st_mode & 0o111)
    except OSError:
        return False


def import_capture(
    upper: Path, overlay: Overlay, containment: Containment | None = None
) -> CaptureReport:
    report = CaptureReport()
    if not upper.is_dir():
        return report
    scan = _scan(upper)
    files, report.skipped, report.bytecode = scan.files, scan.skipped, scan.bytecode
    report.links = scan.links
    deleted = _deletions(scan, overlay)
    _check_bounds(files, deleted, overlay, containment or Containment())
    for rel in deleted:
        try:
            if overlay.record_deletion(rel):
                report.deleted.append(rel)
        except (OverlayError, ValueError, OSError) as exc:
            report.skipped.append(f"{rel} (deleted; {exc})")
    for rel, source, info in files:
        try:
            target = overlay.redirect_write(rel, by_command=True)
        except (OverlayError, ValueError, OSError) as exc:
            report.skipped.append(f"{rel} ({exc})")
            continue
        shutil.copyfile(source, target)
        os.chmod(target, stat.S_IMODE(info.st_mode) & 0o777)  # no set-uid/gid, no sticky
        # as the command left it: make and its kind compare these times
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
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
