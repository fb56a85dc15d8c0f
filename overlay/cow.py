"""The copy-on-write overlay of one speculation."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, NotRequired, TypedDict

from overlay.apply import ApplyItem, ApplyResult, Hook, apply_items, preview
from overlay.changes import FileChange
from overlay.errors import InvalidTargetError, OverlayError, describe_cause
from overlay.fingerprint import Fingerprint, copy_with_fingerprint, hash_regular_file
from overlay.kernel.beneath import open_beneath
from overlay.paths import (
    StrPath,
    check_private_dir,
    real_root,
    resolve_relative,
    resolve_target,
    speculation_base_dir,
)
from overlay.sweep import release_pid_dir


class RecordEntry(TypedDict):
    """Plain-data form of one entry, as :meth:`Overlay.from_record` reads it."""

    overlay_path: str
    size: int | None
    mtime_ns: int | None
    sha256: str | None
    deleted: NotRequired[bool]
    # a sandboxed command wrote it last: Tab keeps its modification time
    by_command: NotRequired[bool]
    # a symlink a command left at the path (its target), not a file
    link: NotRequired[str | None]


@dataclass(frozen=True, slots=True)
class _Entry:
    overlay_path: str
    fingerprint: Fingerprint | None
    deleted: bool = False  # the speculation removed the file: Tab removes the real one
    # a symlink a command left there (its target): nothing is at ``overlay_path``
    link: str | None = None


class Overlay:
    """Copy-on-write view of a project for one speculation.

    ``root`` is the real project; ``overlay_dir`` (usually
    ``<tmp>/specrun-speculation/<pid>/<speculation id>/``) is created on the first write. A
    file written in the speculation lives at ``overlay_dir/<relative path>``.
    """

    def __init__(self, root: StrPath, overlay_dir: StrPath) -> None:
        self._root_given = Path(root)
        self._root = real_root(root)
        self._dir = os.path.abspath(os.fspath(overlay_dir))
        if self._dir == self._root or self._root.startswith(self._dir + os.sep):
            raise OverlayError(
                f"The overlay directory {self._dir} contains the project root {self._root}."
            )
        self._entries: dict[str, _Entry] = {}
        self._made_dirs: set[str] = set()  # overlay directories known to exist
        self._used_as_dir: set[str] = set()  # relative dirs that hold registered entries
        # files whose content a sandboxed command wrote last (not a file tool): what git
        # ignores of them is build output and caches, held back at Tab
        self._command_output: set[str] = set()
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ properties

    @property
    def root(self) -> Path:
        """The project root as given."""
        return self._root_given

    @property
    def overlay_dir(self) -> Path:
        return Path(self._dir)

    def __repr__(self) -> str:
        return (
            f"Overlay(root={self._root!r}, overlay_dir={self._dir!r}, files={len(self._entries)})"
        )

    def __enter__(self) -> Overlay:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    # ------------------------------------------------------------------ writes and reads

    def redirect_write(self, path: StrPath, *, by_command: bool = False) -> Path:
        """Overlay path to write instead of ``path``; copies the original up on first use.
        ``by_command``: a sandboxed command writes it, not a file tool (:meth:`command_output`).

        Raises OverlayEscapeError if ``path`` resolves outside the root, InvalidTargetError if
        it cannot be a file, OverlayError if the copy-up fails. An overlay path this method
        returned before is accepted too and returned unchanged.
        """
        own = self._own_overlay_path(path)
        if own is not None:
            return own
        real, rel = resolve_target(self._root, path)
        with self._lock:
            self._command_output.discard(rel)
            entry = self._entries.get(rel)
            if entry is not None and entry.link is not None:
                # A file where the speculation had left a link: the file replaces the link,
                # and the copy-up fingerprint stays the real file's as the link found it.
                self._make_dirs(os.path.dirname(entry.overlay_path))
                with open(entry.overlay_path, "wb"):
                    pass
                entry = _Entry(entry.overlay_path, entry.fingerprint)
                self._entries[rel] = entry
            if entry is not None:
                if by_command:
                    self._command_output.add(rel)
                return Path(entry.overlay_path)
            self._check_shape(rel, path)
            target = os.path.join(self._dir, rel)
            try:
                self._make_dirs(os.path.dirname(target))
                fingerprint = self._copy_up(real, target)
            except OSError as exc:
                raise OverlayError(
                    f"Could not copy {rel} into the overlay {self._dir}: {describe_cause(exc)}."
                ) from exc
            self._register(rel, _Entry(target, fingerprint))
            if by_command:
                self._command_output.add(rel)
            return Path(target)

    def resolve_read(self, path: StrPath) -> Path:
        """The overlay copy if ``path`` was written in this speculation, else ``path`` itself
        (relative paths are taken against the root)."""
        rel = resolve_relative(self._root, path)
        if rel is not None:
            entry = self._entries.get(rel)
            if entry is not None and entry.link is None:
                return Path(entry.overlay_path)
        raw = Path(path)
        return raw if raw.is_absolute() else self._root_given / raw

    def written_files(self) -> dict[str, Path]:
        """Relative posix path -> overlay path, in the order first written (a copy); files
        the speculation deleted are not among them (see :meth:`deleted_files`)."""
        with self._lock:
            return {
                rel: Path(e.overlay_path)
                for rel, e in self._entries.items()
                if not e.deleted and e.link is None
            }

    def links(self) -> dict[str, str]:
        """Relative path -> target of each symlink the speculation left (:meth:`record_link`)."""
        with self._lock:
            return {rel: e.link for rel, e in self._entries.items() if e.link is not None}

    def forget_link(self, path: str) -> None:
        """Drop the link entry at the relative ``path``, if any (a command removed it, or
        replaced it with a link Tab does not create): the real path is left as it is."""
        with self._lock:
            entry = self._entries.get(path)
            if entry is not None and entry.link is not None:
                del self._entries[path]

    def record_link(self, path: StrPath, target: str) -> None:
        """Record that a command left a symlink ``path -> target``: Tab creates it as a link
        (the apply never follows it; which targets are allowed is the caller's rule). A file
        written there before is dropped. Raises like :meth:`redirect_write`, and
        InvalidTargetError when the real path is neither absent nor a regular file (a
        directory or a link of the project: no fingerprint can tell whether it changed)."""
        real, rel = resolve_target(self._root, path)
        if os.path.normpath(os.path.join(self._root, os.fspath(path))) != real:
            raise InvalidTargetError(os.fspath(path), "it is reached through a symlink")
        if not target or "\x00" in target:
            raise InvalidTargetError(os.fspath(path), "its target is empty")
        with self._lock:
            self._command_output.discard(rel)
            entry = self._entries.get(rel)
            if entry is not None:
                fingerprint = entry.fingerprint
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.overlay_path)
            else:
                self._check_shape(rel, path)
                try:
                    info = os.lstat(real)
                except FileNotFoundError:
                    fingerprint = None
                else:
                    found = hash_regular_file(real) if stat.S_ISREG(info.st_mode) else None
                    if found is None:
                        raise InvalidTargetError(
                            os.fspath(path), "the project holds a directory or a link there"
                        )
                    fingerprint = Fingerprint(found[0], info.st_mtime_ns, found[1])
            self._register(rel, _Entry(os.path.join(self._dir, rel), fingerprint, link=target))

    def command_output(self) -> frozenset[str]:
        """Files a sandboxed command wrote last (``redirect_write(by_command=True)``)."""
        with self._lock:
            return frozenset(self._command_output)

    def fingerprints(self) -> dict[str, Fingerprint | None]:
        """Relative path -> copy-up fingerprint (None: the file did not exist then)."""
        with self._lock:
            return {rel: e.fingerprint for rel, e in self._entries.items()}

    def deleted_files(self) -> list[str]:
        """Relative paths the speculation removed (Tab removes the real files)."""
        with self._lock:
            return [rel for rel, e in self._entries.items() if e.deleted]

    def record_deletion(self, path: StrPath) -> bool:
        """Record that the speculation removed ``path``: its overlay copy goes, and Tab will
        remove the real file if it still is what the speculation saw. Returns False (nothing
        recorded) when there is no such file, neither in the overlay nor in the real tree.
        Raises like :meth:`redirect_write` for a path that cannot be a file in the root."""
        real, rel = resolve_target(self._root, path)
        if os.path.normpath(os.path.join(self._root, os.fspath(path))) != real:
            # Removing a symlink removes the link, not its target: never record the target.
            raise InvalidTargetError(os.fspath(path), "it is reached through a symlink")
        with self._lock:
            entry = self._entries.get(rel)
            if entry is not None:
                if entry.deleted:
                    return True
                if entry.link is None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.overlay_path)
                if entry.fingerprint is None:  # created in the speculation, removed again
                    del self._entries[rel]
                    return True
                self._entries[rel] = _Entry(entry.overlay_path, entry.fingerprint, True)
                return True
            found = hash_regular_file(real)
            if found is None:
                return False
            self._check_shape(rel, path)
            st = os.lstat(real)
            fingerprint = Fingerprint(size=found[0], mtime_ns=st.st_mtime_ns, sha256=found[1])
            self._register(rel, _Entry(os.path.join(self._dir, rel), fingerprint, True))
            return True

    # ------------------------------------------------------------------ crossing processes

    @classmethod
    def from_record(
        cls, root: StrPath, overlay_dir: StrPath, entries: Mapping[str, Mapping[str, Any]]
    ) -> Overlay:
        """Rebuild an overlay from a record of its entries (``RecordEntry``: what
        :meth:`written_files` and :meth:`fingerprints` say, e.g. as another process
        reported them).

        The record is not trusted: every path must map inside ``root`` exactly as recorded
        and every overlay path must be ``overlay_dir/<relative path>``.
        """
        overlay = cls(root, overlay_dir)
        for rel, data in entries.items():
            if not isinstance(rel, str) or not isinstance(data, Mapping):
                raise OverlayError(f"Invalid overlay record entry {rel!r}.")
            _real, canonical = resolve_target(overlay._root, rel)
            if canonical != rel:
                raise OverlayError(
                    f"Invalid overlay record entry {rel!r}: it resolves to {canonical!r}."
                )
            expected = os.path.join(overlay._dir, rel)
            given = data.get("overlay_path")
            if not isinstance(given, str) or os.path.abspath(given) != expected:
                raise OverlayError(
                    f"Invalid overlay record entry {rel!r}: its overlay path {given!r} is not "
                    f"{expected}."
                )
            fp_fields = {k: data.get(k) for k in ("size", "mtime_ns", "sha256")}
            fingerprint: Fingerprint | None
            if all(v is None for v in fp_fields.values()):
                fingerprint = None
            else:
                try:
                    fingerprint = Fingerprint.from_dict(fp_fields)
                except ValueError as exc:
                    raise OverlayError(f"Invalid overlay record entry {rel!r}: {exc}.") from None
            deleted = data.get("deleted", False)
            if type(deleted) is not bool or (deleted and fingerprint is None):
                raise OverlayError(f"Invalid overlay record entry {rel!r}: a bad deletion.")
            by_command = data.get("by_command", False)
            if type(by_command) is not bool:
                raise OverlayError(f"Invalid overlay record entry {rel!r}: a bad by_command.")
            link = data.get("link")
            if link is not None and (
                not isinstance(link, str) or not link or "\x00" in link or deleted
            ):
                raise OverlayError(f"Invalid overlay record entry {rel!r}: a bad link.")
            overlay._check_shape(rel, rel)
            overlay._register(rel, _Entry(expected, fingerprint, deleted, link))
            if by_command and not deleted and link is None:
                overlay._command_output.add(rel)
        return overlay

    # ------------------------------------------------------------------ apply and cleanup

    def apply_to_real(
        self,
        *,
        durable: bool = True,
        yielding: Collection[str] = (),
        checkpoint: Hook | None = None,
        journal_dir: str,
    ) -> ApplyResult:
        """Copy the overlay files onto the real tree (and remove the files the speculation
        deleted): all-or-nothing and conflict-checked. Every overlay file is opened below the
        overlay directory with no symlink followed on the way.

        ``yielding``: entries that are skipped when the real file changed meanwhile, instead
        of refusing the whole apply (files git ignores). Raises ConflictError (nothing
        applied) or ApplyError (rolled back). ``durable=False`` skips fsync: still safe
        against a crashed process, not against power loss. ``checkpoint``: a test's pause
        or crash point (``overlay.apply.Hook``).
        """
        with self._lock, self._source_root() as source_root:
            items = self._items(yielding)
            return apply_items(
                self._root, items, durable=durable, source_root=source_root,
                checkpoint=checkpoint, journal_dir=journal_dir,
            )

    def preview(self) -> list[FileChange]:
        """What :meth:`apply_to_real` would do now, file by file, conflicts included (see
        ``overlay.apply.preview``); changes nothing."""
        with self._lock, self._source_root() as source_root:
            return preview(self._root, self._items(()), source_root=source_root)

    def _items(self, yielding: Collection[str]) -> list[ApplyItem]:
        keep = set(yielding)
        return [
            ApplyItem(
                rel, e.overlay_path, e.fingerprint, e.deleted, rel in keep,
                keep_time=rel in self._command_output, link=e.link,
            )
            for rel, e in self._entries.items()
        ]

    @contextlib.contextmanager
    def _source_root(self) -> Iterator[int | str]:
        """An fd of the overlay directory, reached without following a symlink: below the
        speculation base (itself checked private) when it lives there. A missing directory
        (nothing written yet) is given as its path: every open below it then fails as
        "never written"."""
        base = str(speculation_base_dir())
        try:
            if self._dir.startswith(base + os.sep):
                check_private_dir(base)
                rel = os.path.relpath(self._dir, base)
                fd = open_beneath(base, rel, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            else:
                fd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            yield self._dir
            return
        try:
            yield fd
        finally:
            os.close(fd)

    def cleanup(self) -> None:
        """Remove the overlay directory (and an emptied per-pid parent). Never raises."""
        with contextlib.suppress(Exception), self._lock:
            self._entries.clear()
            self._made_dirs.clear()
            self._used_as_dir.clear()
            shutil.rmtree(self._dir, ignore_errors=True)
            parent = os.path.dirname(self._dir)
            if os.path.basename(parent).isdigit():
                release_pid_dir(parent)

    # ------------------------------------------------------------------ internals

    def _own_overlay_path(self, path: StrPath) -> Path | None:
        """``path`` itself if it is the overlay copy of a registered entry."""
        try:
            raw = os.fspath(path)
            if not isinstance(raw, str) or not os.path.isabs(raw):
                return None
            absolute = os.path.normpath(raw)
        except (TypeError, ValueError):
            return None
        if not absolute.startswith(self._dir + os.sep):
            return None
        entry = self._entries.get(absolute[len(self._dir) + 1 :])
        if entry is None or entry.overlay_path != absolute or entry.link is not None:
            return None
        return Path(absolute)

    def _register(self, rel: str, entry: _Entry) -> None:
        self._entries[rel] = entry
        parent = rel.rpartition("/")[0]
        while parent and parent not in self._used_as_dir:
            self._used_as_dir.add(parent)
            parent = parent.rpartition("/")[0]

    def _check_shape(self, rel: str, shown: StrPath) -> None:
        """A path cannot be both a file and a directory within one speculation."""
        if rel in self._used_as_dir:
            raise InvalidTargetError(
                os.fspath(shown), "files below it were already written in this speculation"
            )
        parent = rel.rpartition("/")[0]
        while parent:
            if parent in self._entries:
                raise InvalidTargetError(
                    os.fspath(shown),
                    f"its parent {parent} was already written as a file in this speculation",
                )
            parent = parent.rpartition("/")[0]

    def _copy_up(self, real: str, target: str) -> Fingerprint | None:
        """Copy the original into the overlay; None when it does not exist (a new file)."""
        try:
            return copy_with_fingerprint(real, target)
        except FileNotFoundError:
            if os.path.lexists(real):
                raise
            return None

    def _make_dirs(self, path: str) -> None:
        if path in self._made_dirs:
            return
        if path == self._dir or not os.path.isdir(self._dir):
            self._make_overlay_root()
        os.makedirs(path, exist_ok=True)
        self._made_dirs.add(path)

    def _make_overlay_root(self) -> None:
        """Create ``overlay_dir`` exclusively (mode 700). Inside the speculation base, the
        base and the per-pid parent (made by the worker) must be private directories of
        this user: a planted symlink or another user's directory is refused, never used.
        Elsewhere (a caller's own location) missing parents are created."""
        parent = os.path.dirname(self._dir)
        base = str(speculation_base_dir())
        if os.path.dirname(parent) == base:
            check_private_dir(base)
            check_private_dir(parent)
        else:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            info = os.lstat(parent)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                raise PermissionError(f"{parent} is not a directory owned by this user")
        try:
            os.mkdir(self._dir, 0o700)
        except FileExistsError:
            check_private_dir(self._dir)  # ours already (a reused Overlay object)
        self._made_dirs.add(self._dir)
