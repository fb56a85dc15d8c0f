"""Undo checkpoints on disk, in specrun's state directory (never in the project, never git).

A checkpoint is what one accept or one main-chat turn wrote: for exactly the files it
wrote, their content and mode before (or that they did not exist) and after. The earlier
contents are kept content-addressed (``objects/<2 hex>/<sha256>``: a file saved by ten
turns is kept once); the checkpoints are small JSON records (``checkpoints/<id>.json``)::

    <state>/projects/<project key>/undo/      (coordinator.user_state, 0700)
        checkpoints/00000007.json
        objects/3f/3f2a…                      (0600; the mode is in the record)
        undoing.json                          (only while an undo runs: ``undoing``)

A record is written *open* before its files change (an accept) or before the first file
changes (a turn), naming each file with its state before; it is *closed* when the accept
or turn is over, with each file's state after, and files it left as they were dropped. An
open record found at the next start (the service was killed) is closed the same way from
what is on disk then, so a crash loses no checkpoint and keeps none of a change that did
not happen. The size cap (``undoStoreMb``) prunes whole checkpoints, oldest first, then the
contents no checkpoint refers to.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from protocol.rules.protected import path_problem

log = logging.getLogger("specrun.undo")

CheckpointKind = Literal["accept", "turn"]
RECORD_FORMAT = 1
_CHUNK = 1 << 20


class FileState(msgspec.Struct, frozen=True):
    """A regular file's content (its sha256 and size) and permission bits; or, with
    ``link``, a symlink an accept left (its target; sha256 and size of the target's bytes,
    mode 0)."""

    sha256: str
    size: int
    mode: int
    link: str = ""

    def same(self, other: FileState | None) -> bool:
        return other is not None and (self.sha256, self.size, self.mode, self.link) == (
            other.sha256, other.size, other.mode, other.link
        )


def same_state(a: FileState | None, b: FileState | None) -> bool:
    """Both absent, or the same content and mode."""
    return b is None if a is None else a.same(b)


class CheckpointFile(msgspec.Struct, frozen=True):
    """One file a checkpoint took: its state before (None: it did not exist) and after
    (None: removed; unknown while the checkpoint is open). ``kept``: the content before is
    in the store (False: it was larger than the whole cap, so undo cannot bring it back)."""

    path: str
    before: FileState | None
    after: FileState | None = None
    kept: bool = True


class Checkpoint(msgspec.Struct):
    """One accept or one main-chat turn that wrote files. ``turn``: its number in the
    session (the N-th prompt), ``prompt``: the prompt's text."""

    id: int
    session_id: str
    turn: int
    kind: CheckpointKind
    prompt: str
    created: float
    files: list[CheckpointFile]
    open: bool = True
    format: int = RECORD_FORMAT

    def file(self, rel: str) -> CheckpointFile | None:
        return next((f for f in self.files if f.path == rel), None)


#: Never checkpointed, never restored: git's own files (its index and objects are the
#: person's, and an undo that wrote them would be the ghost commits' mistake again) and
#: specrun's own state in the project.
NEVER_TOUCHED = (".git", ".specrun")


def restorable(rel: str) -> bool:
    """``rel`` is a plain path in the project that undo may write."""
    return path_problem(rel) is None and rel.split("/")[0] not in NEVER_TOUCHED


class NotAFile(Exception):
    """The path holds something other than a regular file (a directory, a link, a
    device): no write tool writes one, and undo never restores one."""


def read_state(path: str | os.PathLike[str]) -> FileState | None:
    """The state of the regular file at ``path`` now (None: nothing there), or of the
    symlink there (its target, never followed: an accept may leave one). Anything else is
    ``NotAFile``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            target = os.readlink(path)
            raw = os.fsencode(target)
            return FileState(hashlib.sha256(raw).hexdigest(), len(raw), 0, link=target)
        raise NotAFile(str(path)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAFile(str(path))
        digest = hashlib.sha256()
        size = 0
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
            size += len(chunk)
        return FileState(digest.hexdigest(), size, stat.S_IMODE(info.st_mode) & 0o777)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Usage:
    checkpoints: int
    content_bytes: int


class CheckpointStore:
    """The checkpoints and kept contents of one project (see the module docstring).

    Every method does file I/O: the service calls them off its event loop. A lock keeps
    a record's read-modify-write and the pruning from crossing each other."""

    def __init__(self, directory: Path, cap_bytes: int) -> None:
        self.directory = directory
        self.cap_bytes = cap_bytes
        self.records = directory / "checkpoints"
        self.objects = directory / "objects"
        for sub in (self.records, self.objects):
            sub.mkdir(mode=0o700, exist_ok=True)
        self._lock = threading.RLock()
        self._last_id: int | None = None  # the newest checkpoint's id, once read
        self._bytes: int | None = None  # what the kept contents take, once counted

    # -- records ---------------------------------------------------------------

    def _record_path(self, checkpoint_id: int) -> Path:
        return self.records / f"{checkpoint_id:08d}.json"

    def save(self, checkpoint: Checkpoint) -> None:
        """Write the record whole (a temp file renamed over it). Not fsynced: a killed
        process loses nothing that way, and Tab waits for no disk flush of its own; the
        apply's flush of the project (on the same disk, as a rule) takes it along. A
        record lost to a power cut only means that accept or turn cannot be undone."""
        path = self._record_path(checkpoint.id)
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        with self._lock:
            tmp.write_bytes(msgspec.json.encode(checkpoint))
            os.replace(tmp, path)

    def drop(self, checkpoint_ids: Iterable[int]) -> None:
        """Forget checkpoints, then the contents no other one refers to."""
        with self._lock:
            for checkpoint_id in checkpoint_ids:
                with contextlib.suppress(FileNotFoundError):
                    self._record_path(checkpoint_id).unlink()
            self._collect()

    def all(self) -> list[Checkpoint]:
        """Every checkpoint on disk, oldest first; an unreadable record is skipped."""
        found: list[Checkpoint] = []
        with self._lock:
            for path in sorted(self.records.glob("*.json")):
                try:
                    found.append(msgspec.json.decode(path.read_bytes(), type=Checkpoint))
                except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                    log.warning("skipping an unreadable undo checkpoint %s (%s)", path.name, exc)
        return sorted(found, key=lambda c: c.id)

    def begin(self, kind: CheckpointKind, session_id: str, turn: int, prompt: str) -> Checkpoint:
        """A new open checkpoint with no file yet (written when its first file comes)."""
        with self._lock:
            if self._last_id is None:
                names = (p.stem for p in self.records.glob("*.json"))
                self._last_id = max((int(n) for n in names if n.isdigit()), default=0)
            self._last_id += 1
            return Checkpoint(self._last_id, session_id, turn, kind, prompt, time.time(), [])

    # -- contents --------------------------------------------------------------

    def object_path(self, sha256: str) -> Path:
        return self.objects / sha256[:2] / sha256

    def has_content(self, state: FileState, *, verify: bool = False) -> bool:
        """The content of ``state`` is kept (``verify``: and reads back as its digest,
        which a content cut short or lost to a power cut does not)."""
        path = self.object_path(state.sha256)
        if not verify:
            try:
                return path.stat().st_size == state.size
            except OSError:
                return False
        try:
            found = read_state(path)
        except NotAFile:
            return False
        return found is not None and (found.sha256, found.size) == (state.sha256, state.size)

    def take(self, checkpoint: Checkpoint, target: str, rel: str, *, save: bool = True) -> bool:
        """Add ``rel`` (at ``target``) to the open ``checkpoint`` with its state now, its
        content kept, and save the record (``save``; else the caller saves it once for
        many files), before anything writes it. A file already in the checkpoint keeps
        its first state. False when ``target`` is not a regular file (nothing taken)."""
        with self._lock:
            if checkpoint.file(rel) is not None:
                return True
            try:
                state, kept = self._keep(target)
            except NotAFile:
                return False
            checkpoint.files.append(CheckpointFile(rel, state, kept=kept))
            if save:
                self.save(checkpoint)
            return True

    def _keep(self, target: str) -> tuple[FileState | None, bool]:
        """Copy the file into the store while hashing it: (its state, kept)."""
        try:
            src = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None, True
        except OSError as exc:
            raise NotAFile(target) from exc
        tmp = self.objects / f".tmp-{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
        try:
            info = os.fstat(src)
            if not stat.S_ISREG(info.st_mode):
                raise NotAFile(target)
            mode = stat.S_IMODE(info.st_mode) & 0o777
            keep = info.st_size <= self.cap_bytes
            digest = hashlib.sha256()
            size = 0
            dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600) \
                if keep else -1
            try:
                while chunk := os.read(src, _CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                    if dst >= 0:
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(dst, view):]
            finally:
                if dst >= 0:
                    os.close(dst)
            state = FileState(digest.hexdigest(), size, mode)
            if keep and size <= self.cap_bytes:
                final = self.object_path(state.sha256)
                final.parent.mkdir(mode=0o700, exist_ok=True)
                if self.has_content(state):
                    tmp.unlink()
                else:
                    # No fsync: the record that names it is written after it, and a
                    # content lost to a power cut is found short (``has_content``).
                    os.replace(tmp, final)
                    if self._bytes is not None:
                        self._bytes += size
                return state, True
            return state, False
        finally:
            os.close(src)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    # -- closing ---------------------------------------------------------------

    def close(self, checkpoint: Checkpoint, root: Path) -> Checkpoint | None:
        """Record each file's state after; files left as they were are dropped. Returns the
        closed checkpoint, or None when no file changed (then nothing is kept)."""
        with self._lock:
            files = []
            for entry in checkpoint.files:
                try:
                    after = read_state(os.path.join(root, entry.path))
                except NotAFile:
                    continue  # something other than a file is there now: not ours to undo
                if not same_state(entry.before, after):
                    files.append(msgspec.structs.replace(entry, after=after))
            checkpoint.files = files
            checkpoint.open = False
            if not files:
                self.drop([checkpoint.id])
                return None
            self.save(checkpoint)
            self.prune()
            return checkpoint

    def close_open(self, root: Path) -> list[Checkpoint]:
        """At start: close every checkpoint a killed service left open."""
        closed = []
        with self._lock:
            for checkpoint in self.all():
                if checkpoint.open:
                    done = self.close(checkpoint, root)
                    if done is not None:
                        closed.append(done)
        return closed

    # -- the size cap ----------------------------------------------------------

    def _contents(self) -> Iterator[tuple[Path, int]]:
        for folder in self.objects.iterdir():
            if folder.is_dir():
                for path in folder.iterdir():
                    with contextlib.suppress(OSError):
                        yield path, path.stat().st_size

    def content_bytes(self) -> int:
        """What the kept contents take (counted once, then kept up to date)."""
        with self._lock:
            if self._bytes is None:
                self._bytes = sum(size for _p, size in self._contents())
            return self._bytes

    def usage(self) -> Usage:
        with self._lock:
            return Usage(len(self.all()), self.content_bytes())

    def prune(self) -> list[int]:
        """Drop the oldest closed checkpoints until the kept contents fit the cap; the ids
        dropped. The newest checkpoint is kept whatever its size (its contents were each
        under the cap when taken)."""
        dropped: list[int] = []
        with self._lock:
            total = self.content_bytes()
            if total <= self.cap_bytes:
                return dropped
            closed = [c for c in self.all() if not c.open]
            for checkpoint in closed[:-1]:
                if total <= self.cap_bytes:
                    break
                dropped.append(checkpoint.id)
                with contextlib.suppress(FileNotFoundError):
                    self._record_path(checkpoint.id).unlink()
                total = self._collect()
            if dropped:
                log.info("undo: pruned checkpoints %s to keep under %d bytes", dropped,
                         self.cap_bytes)
        return dropped

    def _collect(self) -> int:
        """Remove contents no checkpoint refers to; the bytes left."""
        wanted = {
            f.before.sha256
            for c in self.all()
            for f in c.files
            if f.before is not None and f.kept
        }
        total = 0
        for path, size in list(self._contents()):
            if path.name in wanted:
                total += size
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        self._bytes = total
        return total
