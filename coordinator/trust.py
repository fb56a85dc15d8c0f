"""Workspace trust: whether what a project ships for specrun may act.

A cloned repository (or an unpacked tarball, or a checkout someone else owns) can carry
files that change what specrun does: ``.specrun/settings.json`` (which tool calls run
without a yes, where the code is sent), ``.specrun/memory/`` (text the main model reads as
the person's own notes), anything else under ``.specrun/``, and a memory directory the
project's settings place elsewhere in the project. None of it applies until the person
trusted the project: ``specrun trust``, or yes to the one-time question ``start`` and
``chat`` ask on a terminal.

The decision is recorded in specrun's per-user state directory (``coordinator.user_state``),
never in the project, with a hash of those files: a change to them (a ``git pull`` that
edits the shipped settings) makes the project untrusted again until the person says so.
specrun's own writes into them (a memory the chat saves) record the new hash when the
project was trusted before. The decision asks nothing of git: a tarball is untrusted like a
clone, and a repository git refuses to read ("dubious ownership") is no exception.

A project that ships none of these files has nothing to trust: it runs as if trusted
(there is nothing that could act) and nobody is asked.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from coordinator.durable import atomic_write
from coordinator.user_state import UserStateError, project_state_dir, project_state_path

TRUST_RECORD = "trust.json"
#: The project's files for specrun, relative to the project root.
PROJECT_STATE = ".specrun"
#: Entries hashed at most: a project that ships more under .specrun/ hashes as "too many",
#: which no trust record matches (so it stays untrusted), instead of a start that reads
#: a million files.
MAX_ENTRIES = 5000
MAX_BYTES = 64 << 20

TRUST_HINT = (
    "Run `specrun trust` in it if you trust what it ships for specrun (its settings and "
    "project memory), then start again."
)


class TrustState(enum.Enum):
    TRUSTED = "trusted"  # recorded, and the files are as they were
    NOTHING_SHIPPED = "nothing-shipped"  # no file for specrun in the project
    NEVER = "never"  # files for specrun, no decision recorded
    CHANGED = "changed"  # trusted once, the files changed since
    REVOKED = "revoked"  # `specrun trust --revoke`

    @property
    def applies(self) -> bool:
        """Whether the project's own files for specrun apply."""
        return self in (TrustState.TRUSTED, TrustState.NOTHING_SHIPPED)


@dataclass(frozen=True)
class Trust:
    state: TrustState
    digest: str
    files: tuple[str, ...]  # what the hash covers, relative to the project (for messages)

    @property
    def applies(self) -> bool:
        return self.state.applies

    def sentence(self, project_root: Path) -> str:
        """One sentence for an untrusted project ('' when it is trusted)."""
        if self.applies:
            return ""
        shown = ", ".join(self.files[:3]) + (f" and {len(self.files) - 3} more"
                                             if len(self.files) > 3 else "")
        why = {
            TrustState.NEVER: "is not trusted yet",
            TrustState.CHANGED: "changed its files for specrun since you trusted it",
            TrustState.REVOKED: "is not trusted (you said no, or `specrun trust --revoke`)",
        }[self.state]
        return (
            f"This project {why}, so specrun applies nothing it ships ({shown}): default "
            "settings and yours, no project memory; `specrun trust` trusts it."
        )


def _trust_inputs(project_root: Path, memory_dir: str = "") -> list[Path]:
    """The directories whose contents are trust-relevant: ``.specrun`` and a project memory
    directory the settings place elsewhere inside the project."""
    root = Path(os.path.realpath(project_root))
    out = [root / PROJECT_STATE]
    if memory_dir:
        extra = Path(os.path.normpath(root / Path(memory_dir).expanduser()))
        if extra != root and root in extra.parents and PROJECT_STATE not in extra.parts:
            out.append(extra)
    return out


def project_files_digest(project_root: Path, memory_dir: str = "") -> tuple[str, tuple[str, ...]]:
    """A hash of every trust-relevant entry (name, kind, mode, content or link target), read
    without following any link, and the entries' names. ('', ()) when there are none."""
    root = Path(os.path.realpath(project_root))
    sha = hashlib.sha256()
    names: list[str] = []
    budget = MAX_BYTES
    for top in _trust_inputs(root, memory_dir):
        entries: list[Path] = []
        try:
            info = os.lstat(top)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
                dirnames.sort()
                entries.extend(Path(dirpath, n) for n in sorted(dirnames + filenames))
                if len(entries) > MAX_ENTRIES:
                    break
        entries.insert(0, top)
        for path in entries:
            rel = path.relative_to(root).as_posix()
            if rel == f"{PROJECT_STATE}/.gitignore":
                continue  # specrun's own, written when it makes the directory: inert
            if len(names) >= MAX_ENTRIES:
                sha.update(b"\0too-many\0")
                return "too-many:" + sha.hexdigest(), tuple(names)
            try:
                entry = os.lstat(path)
            except OSError:
                continue
            mode = entry.st_mode
            sha.update(f"{rel}\0{stat.S_IFMT(mode):o}\0{stat.S_IMODE(mode):o}\0".encode(
                "utf-8", "surrogateescape"))
            if path != top and not stat.S_ISDIR(mode):
                names.append(rel)
            if stat.S_ISLNK(mode):
                sha.update(os.fsencode(os.readlink(path)))
            elif stat.S_ISREG(mode):
                budget -= entry.st_size
                if budget < 0:
                    sha.update(b"\0too-large\0")
                    return "too-large:" + sha.hexdigest(), tuple(names)
                sha.update(_file_digest(path))
            sha.update(b"\n")
    if not names:
        return "", ()
    return sha.hexdigest(), tuple(names)


def _file_digest(path: Path) -> bytes:
    # overlay.fingerprint.hash_regular_file reads a file the same way; it is not used here
    # because importing overlay loads its C library handle, on every CLI call that trusts.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b"unreadable"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b"not-regular"
        sha = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            sha.update(chunk)
        return sha.digest()
    finally:
        os.close(fd)


def _read_record(project_root: Path) -> dict[str, object]:
    path = project_state_path(project_root, TRUST_RECORD)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as fh:
        try:
            raw = json.loads(fh.read(1 << 16))
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def trust_of(project_root: Path, memory_dir: str = "") -> Trust:
    """Whether the project's files for specrun apply now."""
    digest, files = project_files_digest(project_root, memory_dir)
    if not files:
        return Trust(TrustState.NOTHING_SHIPPED, digest, files)
    try:
        record = _read_record(project_root)
    except UserStateError:
        record = {}
    if record.get("trusted") is False:
        # A no holds for the files it was said to; changed files are asked about again.
        same = record.get("digest") == digest
        return Trust(TrustState.REVOKED if same else TrustState.NEVER, digest, files)
    if record.get("trusted") is not True:
        return Trust(TrustState.NEVER, digest, files)
    if record.get("digest") != digest or digest.startswith(("too-many:", "too-large:")):
        return Trust(TrustState.CHANGED, digest, files)
    return Trust(TrustState.TRUSTED, digest, files)


def record_trust(project_root: Path, trusted: bool, memory_dir: str = "") -> Trust:
    """Record the person's decision for the project as its files are now."""
    digest, _ = project_files_digest(project_root, memory_dir)
    record = {"trusted": trusted, "digest": digest, "at": time.time(),
              "project": os.path.realpath(project_root)}
    path = project_state_dir(project_root) / TRUST_RECORD
    atomic_write(path, (json.dumps(record) + "\n").encode())
    return trust_of(project_root, memory_dir)


def after_own_write(project_root: Path, was: Trust, memory_dir: str = "") -> None:
    """specrun wrote into the project's files for specrun (a memory the person or the chat
    saved): a project that applied before keeps applying, with the new hash recorded."""
    if not was.applies:
        return
    with contextlib.suppress(OSError, UserStateError):
        record_trust(project_root, True, memory_dir)
