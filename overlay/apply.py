"""All-or-nothing, conflict-checked apply of overlay files onto the real tree, and recovery.

Protocol (one apply, under an exclusive ``flock`` on the project root directory):

1. Plan (``overlay.changes.classify``, the same per-file answer ``preview`` gives): skip
   entries whose overlay file was never written and entries whose overlay content and mode
   equal the original; check every other real file against its copy-up fingerprint (and its
   parent directories against symlink swaps). Any mismatch raises ConflictError before anything
   is touched, except for entries that may yield (files git ignores): those are left out.
   With a source root, overlay files are opened below it with no symlink followed anywhere
   (``overlay.kernel.beneath``).
2. Write the journal ``<journal dir>/<id>.json`` in state ``intent`` (tmp file +
   rename, so it is never seen half-written). It names every stage file, backup name and
   directory the apply may create, so a crash during staging can be cleaned up.
3. Stage: create missing parent directories, then copy each overlay file to
   ``.<name>.specrun-stage-<id>`` in its target's own directory (a symlink entry is made
   there as a symlink with its target: from here on it is a stage file like any other).
4. Rewrite the journal in state ``commit``: from here on, every stage file is complete.
5. For each file: hard-link the original to ``.<name>.specrun-backup-<id>`` (or rename it there
   where hard links are unsupported), then rename the stage file over the target. A deletion
   stages nothing: after its backup is made, the target is unlinked (rolled forward by
   unlinking again, rolled back from the backup).
6. Delete the backups, then the journal.

Recovery reads a left-over journal: ``intent`` means nothing was renamed yet, so it only removes
stage files and created directories. ``commit`` is rolled forward when every stage file, or the
target it was already renamed to, is present; otherwise it is rolled back from the backups.
Before a committed apply is rolled back (by the apply itself after an error, or by recovery), its
journal is renamed to ``<id>.rollback``, so that a crash during the rollback is not later taken
for a roll-forward. Every step is idempotent, so a crash during recovery is handled by the next
recovery. A lone ``<id>.json.tmp`` is a journal write that never completed: nothing was staged
under it, or (next to an ``intent`` journal) nothing was renamed yet; it is removed.

Durability (``durable=True``, the default). A process crash (SIGKILL, OOM kill) needs no fsync
at all: every completed system call stays visible to the next process through the page cache, in
order, so the protocol above is enough. Power loss or a kernel crash can lose or reorder
unflushed writes, so the apply waits for stable storage only where an order must hold on disk:

- barrier 1, after staging: stage contents, stage names and new directories before the
  ``commit`` record (else recovery could take a lost stage file for a completed rename);
- barrier 2, the ``commit`` record itself (fsync of the tmp file and of the journal dir) before
  the first rename;
- barrier 3, after the renames and backup removals: before the journal is deleted (until then a
  crash is rolled forward from the journal, which needs no backup).

The ``intent`` record gets no barrier of its own: it only serves to find stage files after a
crash, and barrier 1 makes it durable with them. Barriers 1 and 3 are one ``syncfs`` per file
system (Linux): one journal commit for the whole batch instead of one fsync per file, which
dominates the cost (about 1 ms per fsync on these disks against 0.05 ms for copying 10 KB).
The price is that syncfs also flushes other dirty data on that file system. Without syncfs each
stage file is fsynced and each barrier fsyncs the touched directories. ``durable=False`` skips
all of it: still all-or-nothing against process crashes, not against power loss.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from overlay.changes import APPLIED_BITS, Classified, FileChange, OpenSource, classify
from overlay.errors import ApplyError, ConflictError, RecoveryError
from overlay.fingerprint import Fingerprint
from overlay.kernel import fs
from overlay.kernel.beneath import open_beneath
from overlay.paths import real_root

JOURNAL_VERSION = 1
STAGE_MARK = ".specrun-stage-"
BACKUP_MARK = ".specrun-backup-"
ROLLBACK_SUFFIX = ".rollback"

_MAX_NAME_BYTES = 160
_CUT_NAME_BYTES = 100

Hook = Callable[[str], None]
"""Called at each checkpoint of an apply or a recovery with the step's name (``intent``,
``stage``, ``commit``, ``backup``, ``rename``...): a test pauses there or kills the process
there to land a crash inside the protocol."""


@dataclass(frozen=True, slots=True)
class ApplyItem:
    """One overlay entry to apply: relative posix path, overlay file, copy-up fingerprint.

    ``deleted``: the speculation removed the file (``overlay_path`` is not read); the real
    file is removed at apply. ``yields``: a conflict on this entry skips it (the real file
    wins) instead of refusing the whole apply (files git ignores, such as caches).
    ``mode``: the permission bits the applied file gets, when its source cannot carry them
    (an undo's content-addressed copy, shared by files of any mode); None: the source's.
    ``keep_time``: the real file gets the overlay file's modification time, not the time
    of the apply (what a sandboxed command wrote: make compares these times, so a build
    output keeps its place relative to its sources and to the other outputs).
    ``link``: the entry is a symlink with this target, not a file (``overlay_path`` is not
    read): it is staged as a symlink and renamed into place like a file. Whether the target
    may be created at all is the caller's rule (``protocol.rules.links``): the apply itself
    never follows a link, so it needs none.
    """

    rel: str
    overlay_path: str
    fingerprint: Fingerprint | None
    deleted: bool = False
    yields: bool = False
    mode: int | None = None
    keep_time: bool = False
    link: str | None = None


@dataclass(frozen=True)
class ApplyResult:
    """Outcome of a successful apply.

    ``applied``: files changed in the real tree (written or deleted). ``changes``: the same,
    each with what was done (:class:`FileChange`). ``skipped``: registered entries whose
    overlay file was never written. ``unchanged``: entries whose overlay content still equals
    the original, so there was nothing to apply. ``yielded``: entries that may yield
    (``ApplyItem.yields``) and were left alone because the real file changed meanwhile.
    ``elapsed_s``: wall time of the whole apply.
    """

    applied: list[str]
    skipped: list[str]
    unchanged: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    changes: list[FileChange] = field(default_factory=list)
    yielded: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RecoveryResult:
    """What :func:`recover` did: relative paths rolled forward (now the applied state) or rolled
    back (now the original state), the apply ids it handled, and removed stray journal tmps."""

    rolled_forward: list[str]
    rolled_back: list[str]
    apply_ids: list[str]
    removed_temp_files: list[str] = field(default_factory=list)

    @property
    def action(self) -> str:
        """``rolled_forward``, ``rolled_back``, ``mixed`` or ``cleaned`` (tmp files only)."""
        if self.rolled_forward and self.rolled_back:
            return "mixed"
        if self.rolled_forward:
            return "rolled_forward"
        if self.rolled_back:
            return "rolled_back"
        return "cleaned"


@dataclass(slots=True)
class _Step:
    rel: str
    target: str
    stage: str  # "" for a deletion: nothing is staged, the target is renamed to its backup
    backup: str | None  # None: the target did not exist before the apply
    source: str = ""  # overlay file (not journaled: not needed for recovery)
    deleted: bool = False
    mode: int | None = None  # the staged file's bits (None: the source's); not journaled
    keep_time: bool = False  # the stage file gets the overlay file's times (not journaled)
    # a symlink's target: the stage is that symlink (not journaled: recovery only renames)
    link: str | None = None


@dataclass(slots=True)
class _Journal:
    apply_id: str
    root: str
    steps: list[_Step]
    dirs: list[str]  # directories the apply creates, parents first
    # Where the journal lives: always the caller's directory outside the project
    # (specrun's service: its per-user state directory), never one a repository can ship.
    journal_dir: str
    state: str = "intent"

    @property
    def jdir(self) -> str:
        return self.journal_dir

    @property
    def path(self) -> str:
        return os.path.join(self.jdir, self.apply_id + ".json")

    @property
    def rollback_path(self) -> str:
        """The journal's name once a rollback was decided (see :func:`_mark_rollback`)."""
        return os.path.join(self.jdir, self.apply_id + ROLLBACK_SUFFIX)

    def remove(self) -> None:
        for path in (self.path + ".tmp", self.rollback_path, self.path):
            fs.unlink_quiet(path)

    def to_json(self) -> bytes:
        def rel(path: str) -> str:
            return os.path.relpath(path, self.root)

        data = {
            "version": JOURNAL_VERSION,
            "id": self.apply_id,
            "state": self.state,
            "pid": os.getpid(),
            "steps": [
                {
                    "rel": s.rel,
                    "stage": rel(s.stage) if s.stage else None,
                    "backup": rel(s.backup) if s.backup else None,
                    **({"deleted": True} if s.deleted else {}),
                }
                for s in self.steps
            ],
            "dirs": [rel(d) for d in self.dirs],
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogateescape"
        )

    @classmethod
    def load(cls, root: str, path: str) -> _Journal:
        """The journal at ``path`` (in its journal directory, which it records as its own)."""
        with open(path, "rb") as fh:
            raw = fh.read()
        data = json.loads(raw.decode("utf-8", "surrogateescape"))
        if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
            raise ValueError("unknown journal format")
        state = data.get("state")
        if state not in ("intent", "commit"):
            raise ValueError("unknown journal state")
        steps = []
        for item in data["steps"]:
            rel = _checked_rel(item["rel"])
            _no_link_on_the_way(root, rel)
            target = os.path.join(root, rel)
            deleted = item.get("deleted") is True
            if deleted and not item.get("backup"):
                raise ValueError("a journaled deletion has no backup")
            stage = "" if deleted else os.path.join(root, _checked_rel(item["stage"]))
            backup = item.get("backup")
            backup_path = os.path.join(root, _checked_rel(backup)) if backup else None
            # Recovery only ever touches our own stage/backup names next to their target.
            sides = ((stage or None, STAGE_MARK), (backup_path, BACKUP_MARK))
            for extra, mark in sides:
                if extra is not None and (
                    os.path.dirname(extra) != os.path.dirname(target)
                    or mark not in os.path.basename(extra)
                ):
                    raise ValueError("journal names a file that is not a stage or backup file")
            steps.append(
                _Step(rel=rel, target=target, stage=stage, backup=backup_path, deleted=deleted)
            )
        dirs = [os.path.join(root, _checked_rel(d)) for d in data["dirs"]]
        for directory in dirs:
            _no_link_on_the_way(root, os.path.relpath(directory, root) + "/.")
        apply_id = str(data["id"])
        return cls(apply_id=apply_id, root=root, steps=steps, dirs=dirs,
                   journal_dir=os.path.dirname(path), state=state)


def _no_link_on_the_way(root: str, rel: str) -> None:
    """Refuse a journal path whose directories below ``root`` are not all real directories.

    A journal is a file in the project, so a repository can ship one, with a symlink
    beside it (``lnk -> $HOME``): recovery at the next start deleted ``lnk/.bashrc``. Every
    directory an apply's paths went through was a real one (accept checks that first), so
    a link there means the journal is not ours. A directory that does not exist is no way
    out (nothing below it exists either)."""
    path = root
    for part in rel.split("/")[:-1]:
        path = os.path.join(path, part)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode):
            raise ValueError(f"the journal goes through {rel.split('/')[0]!r}, not a directory")


def _checked_rel(value: Any) -> str:
    """A journal path must be relative and must not climb out of the root."""
    if not isinstance(value, str) or not value or os.path.isabs(value) or "\x00" in value:
        raise ValueError("bad path in journal")
    if ".." in value.split(os.sep):
        raise ValueError("bad path in journal")
    return value


# --------------------------------------------------------------------------- checkpoints

_PROCESS_CHECKPOINT: list[Hook] = []


def set_process_checkpoint(hook: Hook | None) -> None:
    """Give every apply and recovery of this process that gets no ``checkpoint`` of its own
    this one (None: none again). For a process that a test or ``scripts/chaos.py`` built
    around the service (its own entry point calls this before the service starts), where
    the apply runs deep inside the service; nothing in specrun calls it, and no setting,
    variable or message reaches it."""
    _PROCESS_CHECKPOINT.clear()
    if hook is not None:
        _PROCESS_CHECKPOINT.append(hook)


def _process_checkpoint() -> Hook | None:
    return _PROCESS_CHECKPOINT[0] if _PROCESS_CHECKPOINT else None


# --------------------------------------------------------------------------- locking


@contextlib.contextmanager
def _root_lock(root: str) -> Iterator[None]:
    """Exclusive advisory lock on the project root directory for one apply or recovery.

    The root is never removed by us, so the lock cannot end up on a deleted inode, and the
    kernel drops it when the holder dies, so a crashed apply never blocks recovery.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


# --------------------------------------------------------------------------- durability


class _Sync:
    """Where the apply waits for stable storage (see "Durability" in the module docstring).

    ``batch``: one ``syncfs`` per file system at each barrier (Linux). Otherwise every staged
    file is fsynced and each barrier fsyncs the touched directories.
    """

    def __init__(self, durable: bool) -> None:
        self.durable = durable
        self.batch = durable and fs.has_syncfs()

    def file(self, fd: int) -> None:
        """A staged file was written (its content must reach the disk before the commit)."""
        if self.durable and not self.batch:
            os.fsync(fd)

    def barrier(self, dirs: Iterable[str]) -> None:
        """Everything done so far in ``dirs`` (and, for files, their content) is durable."""
        if not self.durable:
            return
        existing = [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]
        if self.batch:
            fs.syncfs_dirs(existing)
        else:
            fs.fsync_dirs(existing)


# --------------------------------------------------------------------------- names


def _side_name(name: str, mark: str, apply_id: str, index: int) -> str:
    """``.<name><mark><id>``; over-long names are cut (and made unique by their index)."""
    encoded = os.fsencode(name)
    if len(encoded) > _MAX_NAME_BYTES:
        short = os.fsdecode(encoded[:_CUT_NAME_BYTES])
        name = f"{short}~{index}"
    return f".{name}{mark}{apply_id}"


def _check_journal_dir(journal_dir: str) -> None:
    """The caller's journal directory must exist and be a real directory (not a link)."""
    if not os.path.isdir(journal_dir) or os.path.islink(journal_dir):
        raise OSError(f"{journal_dir} is not a directory of specrun's")


def _write_journal(journal: _Journal, durable: bool) -> None:
    """Atomically (tmp + rename) write the journal in its current state; ``durable``: and
    wait until both its content and its name are on stable storage."""
    final = journal.path
    tmp = final + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        fs.write_all(fd, journal.to_json())
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
    if durable:
        fs.fsync_dir(os.path.dirname(final))


# --------------------------------------------------------------------------- planning


@dataclass
class _Plan:
    steps: list[_Step]
    dirs: list[str]
    skipped: list[str]
    unchanged: list[str]
    changes: list[FileChange]
    yielded: list[str]


def source_opener(source_root: str | int | None) -> OpenSource:
    """How overlay files are opened: below ``source_root`` (a path or directory fd) with no
    symlink followed in any component (``open_beneath``), or, without a source root, by
    path with only the last component kept from being a symlink."""
    if source_root is None:
        return lambda _rel, path: os.open(path, fs.READ_FLAGS)
    return lambda rel, _path: open_beneath(source_root, rel)


def preview(
    root: str, items: Sequence[ApplyItem], *, source_root: str | int | None = None
) -> list[FileChange]:
    """What :func:`apply_items` would do now, file by file (conflicts included, unchanged and
    never-written entries left out), without changing anything. Takes no lock: a preview is
    a moment's answer. Raises OSError for an overlay file that cannot be read as a file."""
    root = real_root(root)
    opener = source_opener(source_root)
    changes: list[FileChange] = []
    known: dict[str, bool] = {root: True}
    for item in items:
        found = _classify(root, item, opener)
        if found.change is None:
            continue
        change = found.change
        if change.conflict is None:
            parent = os.path.dirname(os.path.join(root, item.rel))
            problem = _check_parent(root, parent, known, [])
            if problem:
                change = dataclasses.replace(change, conflict=problem)
        changes.append(change)
    return changes


def _classify(root: str, item: ApplyItem, opener: OpenSource) -> Classified:
    return classify(
        item.rel,
        os.path.join(root, item.rel),
        item.fingerprint,
        deleted=item.deleted,
        source=item.overlay_path,
        open_source=opener,
        mode=item.mode,
        link=item.link,
    )


def _plan(
    root: str, items: Sequence[ApplyItem], apply_id: str, opener: OpenSource
) -> _Plan:
    skipped: list[str] = []
    unchanged: list[str] = []
    yielded: list[str] = []
    conflicts: dict[str, str] = {}
    todo: list[tuple[ApplyItem, FileChange]] = []
    for item in items:
        try:
            found = _classify(root, item, opener)
        except OSError as exc:
            raise ApplyError([item.rel], exc, failed_path=item.rel) from exc
        if found.never_written:
            skipped.append(item.rel)
        elif found.change is None:
            unchanged.append(item.rel)
        elif found.change.conflict is not None:
            if item.yields:
                yielded.append(item.rel)
            else:
                conflicts[item.rel] = found.change.conflict
        else:
            todo.append((item, found.change))

    # Parent directories: must still be the real directories (no symlink swapped in, no file
    # in the way); missing ones are created by the apply.
    dirs: list[str] = []
    known: dict[str, bool] = {root: True}
    kept: list[tuple[ApplyItem, FileChange]] = []
    for item, change in todo:
        parent = os.path.dirname(os.path.join(root, item.rel))
        missing: list[str] = []
        problem = _check_parent(root, parent, known, missing)
        if problem and item.yields:
            yielded.append(item.rel)
            continue
        if problem:
            conflicts[item.rel] = problem
            continue
        dirs.extend(missing)
        kept.append((item, change))
    if conflicts:
        raise ConflictError(conflicts)

    steps = []
    for index, (item, change) in enumerate(kept):
        target = os.path.join(root, item.rel)
        parent, name = os.path.split(target)
        stage = (
            "" if item.deleted
            else os.path.join(parent, _side_name(name, STAGE_MARK, apply_id, index))
        )
        backup = (
            os.path.join(parent, _side_name(name, BACKUP_MARK, apply_id, index))
            if _replaces_something(item, change)
            else None
        )
        steps.append(
            _Step(
                rel=item.rel,
                target=target,
                stage=stage,
                backup=backup,
                source=item.overlay_path,
                deleted=item.deleted,
                mode=item.mode,
                keep_time=item.keep_time,
                link=item.link,
            )
        )
    return _Plan(
        steps=steps,
        dirs=dirs,
        skipped=skipped,
        unchanged=unchanged,
        changes=[c for _i, c in kept],
        yielded=yielded,
    )


def _replaces_something(item: ApplyItem, change: FileChange) -> bool:
    """Whether the apply puts something aside at the target (kept as the backup): a real
    file, a deletion's, or a link that was there (what an undo expects where an accept
    left one)."""
    link_there = item.fingerprint is not None and item.fingerprint.link is not None
    return change.mode_before is not None or item.deleted or link_there


def _check_parent(root: str, parent: str, known: dict[str, bool], missing: list[str]) -> str:
    """Classify ``parent`` (cached in ``known``); append missing dirs to ``missing``."""
    chain: list[str] = []
    path = parent
    while path not in known:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            chain.append(path)
            path = os.path.dirname(path)
            continue
        # A real directory, reached without passing through a symlink (lstat alone would
        # follow a symlinked ancestor).
        known[path] = stat.S_ISDIR(st.st_mode) and os.path.realpath(path) == path
        break
    if not known[path]:
        for p in chain:
            known[p] = False
        return "a parent directory was replaced by a file or symlink"
    for p in reversed(chain):
        known[p] = True
        missing.append(p)
    return ""


# --------------------------------------------------------------------------- apply


def apply_items(
    root: str,
    items: Sequence[ApplyItem],
    *,
    durable: bool = True,
    source_root: str | int | None = None,
    checkpoint: Hook | None = None,
    journal_dir: str,
) -> ApplyResult:
    """Apply overlay files to ``root`` all-or-nothing; see the module docstring.

    ``source_root`` (the overlay directory, as a path or an open fd): every overlay file is
    then opened below it as ``<source_root>/<rel>`` with no symlink followed anywhere on the
    way (``ApplyItem.overlay_path`` must be that path). Raises ConflictError (nothing
    changed) or ApplyError (rolled back, unless its ``rolled_back`` is False, in which case
    the journal is left for :func:`recover`). ``checkpoint``: see :data:`Hook`; without
    one, the process's own (:func:`set_process_checkpoint`), if any. ``journal_dir``: where
    the journal is written, an existing directory outside the project (there is no default:
    a journal in the project could be shipped by a repository and replayed);
    :func:`recover` must be given the same.
    """
    started = time.perf_counter()
    root = real_root(root)
    hook = checkpoint or _process_checkpoint()
    apply_id = f"{os.getpid()}-{secrets.token_hex(4)}"
    opener = source_opener(source_root)
    with _root_lock(root):
        try:
            plan = _plan(root, items, apply_id, opener)
        except OSError as exc:  # e.g. a file vanished while being checked: nothing was changed
            raise ApplyError([i.rel for i in items], exc) from exc
        if plan.steps:
            journal = _Journal(apply_id=apply_id, root=root, steps=plan.steps,
                               dirs=list(plan.dirs), journal_dir=journal_dir)
            _run(journal, plan, durable, hook, opener)
    return ApplyResult(
        applied=[s.rel for s in plan.steps],
        skipped=plan.skipped,
        unchanged=plan.unchanged,
        elapsed_s=time.perf_counter() - started,
        changes=plan.changes,
        yielded=plan.yielded,
    )


def _run(
    journal: _Journal, plan: _Plan, durable: bool, hook: Hook | None, opener: OpenSource
) -> None:
    sync = _Sync(durable)
    root = journal.root
    steps = plan.steps
    paths = [s.rel for s in steps]
    try:
        _check_journal_dir(journal.journal_dir)
        # With syncfs it is not flushed on its own: it only serves to find stage files after a
        # crash, and the first barrier makes it durable together with them.
        _write_journal(journal, durable=sync.durable and not sync.batch)
    except Exception as exc:
        with contextlib.suppress(OSError):
            journal.remove()
        raise ApplyError(paths, exc) from exc
    if hook is not None:
        hook("intent")

    current = ""
    try:
        for d in plan.dirs:
            current = os.path.relpath(d, root)
            os.mkdir(d)
        for step in steps:
            if step.deleted:
                continue
            current = step.rel
            _stage(step, sync, opener)
            if hook is not None:
                hook("stage")
        current = ""
        # Barrier 1: staged contents and names (and new directories) before the commit record.
        sync.barrier(
            os.path.dirname(p) for p in (*plan.dirs, *(s.target for s in steps), journal.jdir)
        )
        journal.state = "commit"
        # Barrier 2: the commit record before the first rename.
        _write_journal(journal, durable)
        if hook is not None:
            hook("commit")

        for step in steps:
            current = step.rel
            if step.backup is not None:
                _make_backup(step.target, step.backup)
                if hook is not None:
                    hook("backup")
            if step.deleted:
                fs.unlink_quiet(step.target)  # the backup keeps it until the apply is done
            else:
                os.replace(step.stage, step.target)
            if hook is not None:
                hook("rename")
        current = ""
    except BaseException as exc:
        try:
            if journal.state == "commit":
                with contextlib.suppress(OSError):
                    _mark_rollback(journal, durable)
            _rollback(journal, sync, None)
            journal.remove()
        except Exception as rollback_exc:
            if isinstance(exc, Exception):
                raise ApplyError(
                    paths, exc, failed_path=current or None, rolled_back=False
                ) from rollback_exc
            raise
        if isinstance(exc, Exception):
            raise ApplyError(paths, exc, failed_path=current or None) from exc
        raise

    # Every target now has its new content: the apply has happened. What is left is tidying,
    # which recovery redoes if we are interrupted, so errors here are not the caller's problem.
    with contextlib.suppress(OSError):
        _finish(journal, sync, hook)


def _stage(step: _Step, sync: _Sync, opener: OpenSource) -> None:
    if step.link is not None:
        # A name only: made in the target's own directory, renamed over it like a file (a
        # rename replaces the name, never writes through what was there). Its directory
        # entry is made durable by barrier 1 with the other stage names.
        os.symlink(step.link, step.stage)
        return
    src = opener(step.rel, step.source)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"the overlay copy {step.source} is not a regular file")
        dst = os.open(step.stage, fs.CREATE_FLAGS, 0o600)
        try:
            fs.copy_fd(src, dst)
            bits = stat.S_IMODE(st.st_mode) if step.mode is None else step.mode
            os.fchmod(dst, bits & APPLIED_BITS)
            if step.keep_time:
                os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
            sync.file(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _make_backup(target: str, backup: str) -> None:
    """Keep the original under the backup name; the target itself stays in place if we can."""
    try:
        os.link(target, backup, follow_symlinks=False)
    except FileNotFoundError:
        raise
    except OSError:
        # No hard links here (e.g. EPERM on vfat): move the original aside instead. Recovery
        # handles the moment in between, when the target is missing and the backup exists.
        os.replace(target, backup)


def _finish(journal: _Journal, sync: _Sync, hook: Hook | None) -> None:
    """Drop the backups and then the journal of an apply whose renames are all done."""
    for step in journal.steps:
        if step.backup is not None:
            fs.unlink_quiet(step.backup)
            if hook is not None:
                hook("drop-backup")
    # Barrier 3: the renames (and backup removals) before the journal disappears; until then a
    # crash, even a power loss, is rolled forward from the journal.
    sync.barrier(os.path.dirname(s.target) for s in journal.steps)
    journal.remove()
    if hook is not None:
        hook("drop-journal")


def _mark_rollback(journal: _Journal, durable: bool) -> None:
    """Record, before undoing anything, that a committed apply is being rolled back.

    Without it a crash half-way through a rollback could leave a journal that still allows a
    roll-forward, which would then skip the files already restored: a mixed tree. It is a
    rename, so it needs no free space (the usual reason to roll back is a full disk).
    """
    os.replace(journal.path, journal.rollback_path)
    if durable:
        fs.fsync_dir(os.path.dirname(journal.path))


def _rollback(journal: _Journal, sync: _Sync, hook: Hook | None) -> None:
    """Put every target back to its original state and remove what the apply created."""
    committed = journal.state == "commit"
    touched: list[str] = []
    for step in reversed(journal.steps):
        staged = bool(step.stage) and os.path.lexists(step.stage)
        if committed and not staged and not step.deleted:
            # The stage file was renamed over the target: restore the original.
            if step.backup is not None:
                if os.path.lexists(step.backup):
                    os.replace(step.backup, step.target)
            else:
                fs.unlink_quiet(step.target)
        else:
            if staged:
                fs.unlink_quiet(step.stage)
            if step.backup is not None and os.path.lexists(step.backup):
                if os.path.lexists(step.target):
                    fs.unlink_quiet(step.backup)  # a hard link of the untouched target
                else:
                    os.replace(step.backup, step.target)  # renamed away, not yet replaced
        touched.append(os.path.dirname(step.target))
        if hook is not None:
            hook("undo")
    for d in reversed(journal.dirs):
        fs.rmdir_quiet(d)
    sync.barrier((*touched, *(os.path.dirname(d) for d in journal.dirs)))


def _roll_forward(journal: _Journal, sync: _Sync, hook: Hook | None) -> None:
    for step in journal.steps:
        if step.deleted:
            fs.unlink_quiet(step.target)
        elif os.path.lexists(step.stage):
            os.replace(step.stage, step.target)
        if hook is not None:
            hook("redo")
    _finish(journal, sync, hook)


def _can_roll_forward(journal: _Journal) -> bool:
    if journal.state != "commit":
        return False
    return all(
        s.deleted or os.path.lexists(s.stage) or os.path.lexists(s.target) for s in journal.steps
    )


# --------------------------------------------------------------------------- recovery


def recover(
    root: str | os.PathLike[str],
    *,
    durable: bool = True,
    checkpoint: Hook | None = None,
    journal_dir: str,
) -> RecoveryResult | None:
    """Finish or undo an apply that a crash interrupted; None if there was nothing to do.
    ``journal_dir``: where the applies wrote their journals (see :func:`apply_items`); a
    journal anywhere else, in the project's ``.specrun/journal`` say, is not read.

    Afterwards each interrupted apply has either fully happened or not at all, and no stage,
    backup or journal file is left. Safe to call at any time: it waits for an apply running in
    another process or thread to end first. ``checkpoint`` as for :func:`apply_items`.
    """
    rroot = real_root(root)
    jdir = journal_dir
    if not os.path.isdir(jdir):
        return None
    hook = checkpoint or _process_checkpoint()
    sync = _Sync(durable)
    forward: list[str] = []
    back: list[str] = []
    ids: list[str] = []
    removed: list[str] = []
    with _root_lock(rroot):
        try:
            names = sorted(os.listdir(jdir))
        except FileNotFoundError:
            return None
        finals = {n[: -len(".json")] for n in names if n.endswith(".json")}
        undos = {n[: -len(ROLLBACK_SUFFIX)] for n in names if n.endswith(ROLLBACK_SUFFIX)}
        for apply_id in sorted(finals | undos):
            undoing = apply_id in undos
            path = os.path.join(jdir, apply_id + (ROLLBACK_SUFFIX if undoing else ".json"))
            try:
                journal = _Journal.load(rroot, path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise RecoveryError(path, exc) from exc
            try:
                if not undoing and _can_roll_forward(journal):
                    _roll_forward(journal, sync, hook)
                    forward.extend(s.rel for s in journal.steps)
                else:
                    if not undoing and journal.state == "commit":
                        _mark_rollback(journal, durable)
                        if hook is not None:
                            hook("mark-rollback")
                    _rollback(journal, sync, hook)
                    back.extend(s.rel for s in journal.steps)
                journal.remove()
            except OSError as exc:
                raise RecoveryError(path, exc) from exc
            ids.append(apply_id)
        known = finals | undos
        for name in names:
            # A journal write that never completed: nothing was staged under it.
            orphan = name.endswith(".json.tmp") and name[: -len(".json.tmp")] not in known
            if orphan and fs.unlink_quiet(os.path.join(jdir, name)):
                removed.append(name)
    if not (ids or removed):
        return None
    return RecoveryResult(
        rolled_forward=forward, rolled_back=back, apply_ids=ids, removed_temp_files=removed
    )


