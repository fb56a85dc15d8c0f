"""The applied set: what Tab does to each file of the real tree, computed by the coordinator.

One computation serves the accept listing (from what the apply actually did), ``specrun diff``
(what Tab would do now) and any other view of a speculation's files. The worker's report is
only a list of candidates: every entry is checked here before anything is read or applied
(:class:`SpeculationFiles`), and each change is classified from the real tree and the overlay
itself (``overlay.changes``), never from what the worker said.

Per file: ``created`` / ``modified`` / ``deleted`` / ``mode`` (with the bits that change);
files whose content and mode did not change are left out. Flags: ``runs_later`` (see
``protocol.rules.runs_later``), ``ignored`` (the project's git ignores it: see "caches" below) and
``conflict`` (the real file changed since the speculation copied it: Tab refuses the whole
accept, except for ignored files).

Caches: a file git ignores never makes an accept fail. It is applied when the real file is
still what the speculation saw; when the real one changed meanwhile (the person ran the same
tests in another terminal) it is skipped, the real file wins, and the listing counts it
instead of refusing.

Build output: what sandboxed commands did to files git ignores is held back, not applied,
unless ``applyIgnoredOutput`` is on: the files they wrote (``by_command``: a ``target/``,
``build/``, ``node_modules/.cache``, ``.pytest_cache``) and the ones they deleted (only
commands delete). No diff shows such a file, it is often what the person runs next (a test
binary, a transpiled module, a compiled extension), and a hostile command writes it as
easily as the build does; and half of a change laid over the person's own is no build
either (tox in a speculation deleted its previous run's package and logs and wrote new
ones: the deletions alone leave ``.tox/`` as neither run left it). A file the model wrote
with a file tool is applied like any other, ignored or not (a ``.env`` it was asked for).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import overlay
from coordinator.memory.store import project_memory_dir
from coordinator.service.speculation.git_ignored import git_ignored
from coordinator.settings import Settings
from coordinator.user_state import journal_dir
from overlay.changes import FileChange as OverlayChange
from overlay.errors import describe_paths
from overlay.kernel.beneath import open_beneath
from overlay.paths import is_inside, real_root
from protocol.rules.links import link_problem
from protocol.rules.protected import path_problem, protected_reason
from protocol.rules.runs_later import runs_later
from protocol.text.inert_text import quote_name
from protocol.wire.control import FileChange
from protocol.wire.work import WrittenFile


@dataclass(frozen=True)
class AppliedSet:
    """What Tab did (after an apply) or would do (a preview), file by file.

    ``changes`` holds every changed file in the order the speculation wrote them, files git
    ignores included (flagged). ``ignored_skipped``: ignored files left alone because the
    real ones changed meanwhile (only after an apply; a preview flags them as conflicts).
    """

    changes: tuple[FileChange, ...]
    ignored_skipped: int = 0
    # files git ignores that commands wrote, held back (``applyIgnoredOutput`` off)
    held: tuple[str, ...] = ()
    # symlinks commands made that Tab does not create (``protocol.rules.links``), each as
    # ``name -> target: why``
    links_held: tuple[str, ...] = ()

    @property
    def listed(self) -> tuple[FileChange, ...]:
        """The changes a listing names one by one (ignored files are summarized)."""
        return tuple(c for c in self.changes if not c.ignored)

    @property
    def ignored(self) -> tuple[FileChange, ...]:
        return tuple(c for c in self.changes if c.ignored)

    @property
    def runs_later(self) -> tuple[FileChange, ...]:
        return tuple(c for c in self.changes if c.runs_later)

    @property
    def conflicts(self) -> tuple[FileChange, ...]:
        """Changes Tab would refuse (an ignored file's conflict only skips that file)."""
        return tuple(c for c in self.changes if c.conflict and not c.ignored)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(c.path for c in self.changes)


class RefusedReport(overlay.OverlayError):
    """A worker reported files the coordinator will not apply; nothing was applied."""

    def __init__(self, refused: Mapping[str, str]) -> None:
        self.refused = dict(refused)
        detail = describe_paths(f"{quote_name(path)}: {why}" for path, why in self.refused.items())
        count = len(self.refused)
        noun = "a file" if count == 1 else f"{count} files"
        #: The reason in a few words, for a sentence of the caller's own.
        self.reason = f"the speculation reported {noun} it may not change ({detail})"
        super().__init__(f"Nothing was applied because {self.reason}.")


class SpeculationFiles:
    """A speculation's files as the coordinator accepts them: the worker's report checked
    entry by entry (``RefusedReport`` names every refused one), the overlay rebuilt from it,
    and the files git ignores looked up once.

    Checked for every entry: a plain relative path with no control character in it; not a
    protected path (``protocol.rules.protected``, the ``protectedPaths`` setting, the memory
    directory); its real target reached through real directories only (a symlinked directory
    in the real tree would redirect the write); its overlay file, if any, a regular file
    below the overlay directory reached without any symlink (no file copied from elsewhere).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        overlay_dir: str,
        written: Mapping[str, WrittenFile],
        settings: Settings,
    ) -> None:
        self.root = real_root(root)
        self.settings = settings
        refused = check_report(self.root, overlay_dir, written, settings)
        if refused:
            raise RefusedReport(refused)
        self.ignored = git_ignored(self.root, written)
        self.held = held_output(written, self.ignored, settings)
        self.links_held = held_links(self.root, written, settings)
        held = {*self.held, *(rel for rel, _line in self.links_held)}
        kept = {rel: entry for rel, entry in written.items() if rel not in held}
        try:
            self.overlay = overlay.Overlay.from_record(self.root, overlay_dir, record_of(kept))
        except overlay.OverlayError as exc:
            raise RefusedReport({"(report)": str(exc)}) from None

    def preview(self) -> AppliedSet:
        """What Tab would do now (conflicts flagged, nothing changed)."""
        changes = describe(self.overlay.preview(), self.ignored, self.settings)
        return AppliedSet(changes, held=self.held, links_held=self._links_held_lines())

    def apply(self, *, durable: bool = True) -> AppliedSet:
        """Apply (all-or-nothing; ignored files that conflict are skipped) and say what was
        done. Raises ``overlay.ConflictError`` / ``overlay.ApplyError`` as the overlay does."""
        result = self.overlay.apply_to_real(
            durable=durable, yielding=self.ignored, journal_dir=str(journal_dir(Path(self.root)))
        )
        changes = describe(result.changes, self.ignored, self.settings)
        return AppliedSet(
            changes,
            ignored_skipped=len(result.yielded),
            held=self.held,
            links_held=self._links_held_lines(),
        )

    def _links_held_lines(self) -> tuple[str, ...]:
        return tuple(line for _rel, line in self.links_held)


def held_links(
    root: str, written: Mapping[str, WrittenFile], settings: Settings
) -> tuple[tuple[str, str], ...]:
    """The symlinks Tab does not create, as (path, ``name -> target: why``): those
    ``protocol.rules.links`` holds back (a target outside the project, absolute, protected,
    or running later). Held, not refused: the rest of the speculation still applies."""
    protected = protected_patterns(root, settings)
    found: list[tuple[str, str]] = []
    for rel, entry in written.items():
        if entry.link is None or entry.deleted:
            continue
        why = link_problem(rel, entry.link, protected, settings.runs_later_paths)
        if why is not None:
            found.append((rel, f"{quote_name(rel)} -> {quote_name(entry.link)}: {why}"))
    return tuple(found)


def held_output(
    written: Mapping[str, WrittenFile], ignored: frozenset[str], settings: Settings
) -> tuple[str, ...]:
    """The files Tab holds back: git ignores them and a sandboxed command wrote or deleted
    them, or left a symlink there (only commands make links; see the module's note). A
    worker that claims a command's file as its tool's only gets it applied and summed up
    like any other write."""
    if settings.apply_ignored_output:
        return ()
    return tuple(
        rel for rel, e in written.items()
        if (e.by_command or e.deleted or e.link is not None) and rel in ignored
    )


def held_summary(held: tuple[str, ...], limit: int = 4) -> tuple[str, ...]:
    """Where the held-back files are, by their first path component (``target/``,
    ``Cargo.lock``), most files first, at most ``limit`` names."""
    counts: dict[str, int] = {}
    for rel in held:
        head, sep, _ = rel.partition("/")
        name = head + ("/" if sep else "")
        counts[name] = counts.get(name, 0) + 1
    return tuple(sorted(counts, key=lambda n: (-counts[n], n))[:limit])


def describe(
    changes: list[OverlayChange], ignored: frozenset[str], settings: Settings
) -> tuple[FileChange, ...]:
    """The overlay's view of each change, with the flags the coordinator adds."""
    extra = settings.runs_later_paths
    return tuple(
        FileChange(
            path=c.rel,
            status=c.kind,
            mode=c.mode_change,
            runs_later=c.kind != "deleted" and runs_later(c.rel, extra, executable=c.gains_exec),
            ignored=c.rel in ignored,
            conflict=c.conflict or "",
            link=c.link or "",
        )
        for c in changes
    )


def protected_patterns(root: str, settings: Settings) -> tuple[str, ...]:
    """The ``protectedPaths`` setting plus the memory directory when it is in the project."""
    patterns = tuple(settings.protected_paths)
    memory = str(project_memory_dir(root, settings.memory_dir or None))
    if memory != root and is_inside(memory, root):
        patterns += (f"/{Path(memory).relative_to(root).as_posix()}/",)
    return patterns


def check_report(
    root: str, overlay_dir: str, written: Mapping[str, WrittenFile], settings: Settings
) -> dict[str, str]:
    """Every reported entry the coordinator refuses, with why (empty: all may be applied)."""
    patterns = protected_patterns(root, settings)
    refused: dict[str, str] = {}
    for rel, entry in written.items():
        why = path_problem(rel)
        if why is None and protected_reason(rel, patterns) is not None:
            why = "a protected path"
        if why is None and entry.overlay_path != os.path.join(overlay_dir, rel):
            why = "its overlay copy is not where the speculation's files are"
        if why is None:
            why = _real_target_problem(root, rel)
        if why is None and not entry.deleted and entry.link is None:
            why = _source_problem(overlay_dir, rel)
        if why is not None:
            refused[rel] = why
    return refused


def _real_target_problem(root: str, rel: str) -> str | None:
    """The target's existing directories must be real directories (no symlink on the way)."""
    parent = os.path.dirname(rel)
    path = root
    for name in parent.split("/") if parent else ():
        path = os.path.join(path, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None  # created by the apply, below a checked directory
        if stat.S_ISLNK(st.st_mode):
            return "a directory on its way in the project is a symlink"
        if not stat.S_ISDIR(st.st_mode):
            return "a directory on its way in the project is a file"
    return None


def _source_problem(overlay_dir: str, rel: str) -> str | None:
    try:
        fd = open_beneath(overlay_dir, rel)
    except FileNotFoundError:
        return None  # registered, never written: nothing to apply
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
            return "its overlay copy is a symlink or lies behind one"
        return f"its overlay copy cannot be read ({exc.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "its overlay copy is not a regular file"
    finally:
        os.close(fd)
    return None


def record_of(written_files: Mapping[str, WrittenFile]) -> dict[str, overlay.RecordEntry]:
    """A worker's report of the files it wrote, in the record format that
    ``overlay.Overlay.from_record`` checks and rebuilds the overlay from."""
    record: dict[str, overlay.RecordEntry] = {}
    for rel, written in written_files.items():
        fp = written.original
        record[rel] = overlay.RecordEntry(
            overlay_path=written.overlay_path,
            size=fp.size if fp else None,
            mtime_ns=fp.mtime_ns if fp else None,
            sha256=fp.sha256 if fp else None,
            deleted=written.deleted,
            by_command=written.by_command,
        )
        if written.link is not None:
            record[rel]["link"] = written.link
    return record
