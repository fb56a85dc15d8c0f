"""The main chat's kernel backstop: what a shell command computes at run time cannot get a
program run outside any sandbox through git's hooks, git's configuration, ``.envrc`` or
specrun's own settings.

The parse-tree check (``worker.shell.write_targets``) asks before a command whose command
line names a protected or runs-later path. It cannot see ``f=.git/hooks/pre-commit; echo x
> "$f"``, a Makefile recipe or a script the repository brought, ``python -c
"open('.git/config', 'a')"``, or a link in the project that leads into ``.git/hooks``. So
every main-chat command runs in a private mount namespace of its own where

- git's hooks directories (the repository's, a worktree's common directory's, those of a
  repository nested in the project; a link followed to where it leads), a worktree's
  ``.git`` file and ``commondir``, ``.specrun/``, ``.envrc`` and what the person's
  ``protectedPaths`` setting names, and specrun's own state directories, are bound
  read-only onto themselves: a write fails with "Read-only file system", a rename onto one
  or an unlink of one with "Device or resource busy", a new hook cannot be created;
- such a path that does not exist yet (a new ``.envrc``) cannot be held by a mount, so it
  is watched: when the command made it, specrun removes it right after and says so;
- each git directory and the directories above it up to the project are bound onto
  themselves, writable: as mount points they cannot be renamed, so ``mv .git old && mkdir
  -p .git/hooks`` cannot give git a hooks directory no mount holds;
- git's config files (``config``, ``config.worktree``, the common directory's) stay
  writable, because ordinary work writes them (``git push -u``, ``git checkout -b x
  origin/main``, ``git submodule update --init``, ``git remote add``): they are read
  before the command and vetted after it. An entry that is new or changed and makes git
  run a program (``worker.shell.git_config.config_entry_runs_program``: ``core.hooksPath``,
  ``core.fsmonitor``, a filter, an alias, an include…), or a file git could not read, and
  specrun puts the old bytes back and names the key;
- everything else is as before: same cwd, environment, user and files. The files that run
  later (``Makefile``, ``package.json``, CI and editor files, ``.gitattributes``…) are
  writable: ``npm install``, ``cargo add``, ``./configure`` write them every day, and
  only the parse-tree question (a command that names one) guards them.

A path the person said yes to for this command (the parse-tree question) stays writable
and is not vetted, as is everything when the question could not name a path (a command
specrun could not read). Root that may mount gets a mount namespace alone; anyone else one
inside a user namespace with our uid and gid mapped to themselves (``enter``). The command
cannot undo the mounts: ``CAP_SYS_ADMIN`` is dropped from its bounding set before it
starts. Where namespaces are not available the command runs without the binds (the
watched names and git's config are still checked after it) and the result says so once.

Not covered (docs/security.md): a program that asks another process to write for it (a
running editor, ``systemd-run --user``, tmux, docker) or writes through another process's
view (``/proc/PID/root``); a process the command leaves running that writes git's config
later; set-uid programs (``sudo``) run without their privilege inside the namespace;
``protectedPaths`` names deeper than three directories or past the first 4,000 entries,
and inside ``node_modules``, virtual environments and build output, are not bound.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import functools
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pathspec

from overlay.kernel import libc
from protocol.rules.protected import is_protected_name
from protocol.rules.protected_writes import protected_write
from protocol.text.inert_text import quote_name
from protocol.wire.work import LayerStatus, WriteGuard
from worker.contain.mounts import bind_read_only
from worker.shell.git_config import config_entry_runs_program, parse_git_config
from worker.shell.runner import ShellResult, run_shell

CAP_SYS_ADMIN = 21
_MS_BIND = 1 << 12
_MS_REC = 1 << 14
_MS_SLAVE = 1 << 19
WALK_DEPTH = 3
WALK_ENTRIES = 4000
# Directories never walked: tools write their own files there all the time, and a large
# ``node_modules`` would use up the walk's budget.
SKIPPED_DIRS = frozenset({
    "node_modules", ".venv", "venv", ".tox", ".nox", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", "target", "build", "dist", "site-packages", ".cache",
})
# Held wherever the walk meets them: specrun's own settings and direnv's file (it runs
# when the person's shell enters the directory). Watched at the root when absent.
HELD_NAMES = (".specrun", ".envrc")
_PROBE = "specrun-backstop-probe"  # a name no pattern is meant to match
_GLOB = re.compile(r"[*?\[]")
_OUTSIDE_GIT = ("it writes git's configuration, git's own configuration (its config, hooks "
                "and attributes run programs on your next git command, outside any sandbox)")
_REFUSED = ("Read-only file system", "Device or resource busy")
UNAVAILABLE = ("specrun could not keep git's hooks, .envrc and its own settings read-only "
               "for main-chat commands here ({why}): a command can still write them through "
               "a path it computes at run time")


@dataclass(frozen=True)
class Opened:
    """Paths the person said yes to writing with this command (absolute, as the parse-tree
    check saw them); ``everything``: the yes named no path (specrun could not read the
    command), so nothing is held back."""

    paths: tuple[str, ...] = ()
    everything: bool = False

    def opens(self, path: str) -> bool:
        if self.everything:
            return True
        for given in self.paths:
            for p in {os.path.normpath(given), _real(given)}:
                if p == path or _under(p, path) or _under(path, p):
                    return True
                # ``git config`` writes whichever config the repository uses (a worktree's
                # ``.git`` is a file, its config lies in the common directory)
                if (os.path.basename(p) == "config" and os.path.basename(os.path.dirname(p))
                        == ".git" and os.path.basename(path) in ("config", "config.worktree")):
                    return True
        return False


@dataclass(frozen=True)
class ConfigBefore:
    """One git config file as it was before the command: there at all, its bytes (None:
    absent, unreadable or not a regular file), mode, the link it was (None: not a link)
    and its hard link count."""

    path: str
    present: bool = False
    data: bytes | None = None
    mode: int = 0o644
    link: str | None = None
    links: int = 1


def read_config(path: str) -> ConfigBefore:
    try:
        info = os.lstat(path)
        link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
    except OSError:
        return ConfigBefore(path)
    try:
        info = os.stat(path) if link is not None else info
        # not opened unless a regular file: a fifo would block the read
        data = Path(path).read_bytes() if stat.S_ISREG(info.st_mode) else None
    except OSError:
        return ConfigBefore(path, True, link=link)
    return ConfigBefore(path, True, data, stat.S_IMODE(info.st_mode), link, info.st_nlink)


@dataclass(frozen=True)
class Guarded:
    """What one command's namespace holds back: ``read_only`` existing paths bound
    read-only, ``absent`` held names not there before (removed if the command makes
    them), ``links`` held names that are links, with their targets (put back if the
    command replaces them: a mount on a link would bind what it points to), ``configs``
    git's config files as they were (vetted after the command)."""

    guard: WriteGuard
    read_only: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    # a bound path that a link of git's leads to -> that link (its reason is the link's)
    stands_for: tuple[tuple[str, str], ...] = ()
    configs: tuple[ConfigBefore, ...] = ()
    # directories bound onto themselves writable, so that they cannot be renamed: a
    # repository's git directory and the directories above it up to the project (``mv .git
    # old && mkdir -p .git/hooks`` would make a hooks directory no mount holds)
    pins: tuple[str, ...] = ()

    @property
    def root(self) -> str:
        return self.guard.root

    def reason(self, path: str) -> str:
        """The rule's clause for ``path`` (asked only when a note names it: the plan runs
        before every command and must be cheap)."""
        path = dict(self.stands_for).get(path, path)
        return (protected_write(self.guard, path)
                or protected_write(self.guard, os.path.join(path, _PROBE))
                or protected_write(self.guard, os.path.join(path, "config"))
                or (_OUTSIDE_GIT if ".git" in Path(path).parts or "/worktrees/" in path
                    else ""))


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except OSError:
        return os.path.normpath(path)


def _under(path: str, parent: str) -> bool:
    return path.startswith(parent.rstrip("/") + "/")


def guarded_paths(guard: WriteGuard, opened: Opened = Opened()) -> Guarded:
    """What a command in ``guard``'s project may not write, less what ``opened`` opens."""
    plan = _Plan(guard)
    plan.found_in_walk()
    plan.literal_names()
    for private in guard.private:
        plan.add(private)
    read_only = tuple(p for p in dict.fromkeys(plan.read_only) if not opened.opens(p))
    absent = tuple(p for p in dict.fromkeys(plan.absent) if not opened.opens(p))
    links = tuple((p, t) for p, t in plan.links if not opened.opens(p))
    configs = tuple(read_config(p) for p in dict.fromkeys(plan.configs) if not opened.opens(p))
    pins = tuple(sorted(dict.fromkeys(plan.pins), key=lambda p: p.count("/")))
    return Guarded(guard, _outermost(read_only), absent, links, tuple(plan.stands_for.items()),
                   configs, pins)


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """Without paths inside another one (a bind of ``.specrun`` holds its files already)."""
    kept: list[str] = []
    for path in sorted(paths):
        if not any(path == k or _under(path, k) for k in kept):
            kept.append(path)
    return tuple(kept)


def _unchanged(listed: Iterable[tuple[str, int]]) -> bool:
    try:
        return all(os.stat(directory).st_mtime_ns == mtime for directory, mtime in listed)
    except OSError:
        return False


def _patterns(guard: WriteGuard) -> tuple[str, ...]:
    return (*guard.protected, *HELD_NAMES)


@functools.lru_cache(maxsize=16)
def _name_filter(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """Matches a name that some pattern's component could match (``secrets`` for
    ``secrets/*.key``): only such entries are judged by the whole rule, so a walk costs a
    regular expression per entry."""
    names = {part for pattern in patterns
             for part in pattern.strip().lstrip("!").strip("/").split("/") if part}
    return re.compile("|".join(fnmatch.translate(name) for name in sorted(names)) or "(?!)")


@functools.lru_cache(maxsize=16)
def _protected_paths(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


# What the last walk of a project found (held entries, ``.git`` entries, links with a held
# name), with the modification time of every directory it listed: while none changed, no
# entry was added, removed or renamed there, and the next command's plan skips the walk
# (what is found is still checked on disk every time).
_Walked = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, str], ...]]
_WALKS: dict[tuple[str, tuple[str, ...]], _Walked] = {}


class _Plan:
    def __init__(self, guard: WriteGuard) -> None:
        self.guard = guard
        self.names = _name_filter(_patterns(guard))
        self.read_only: list[str] = []
        self.absent: list[str] = []
        self.links: list[tuple[str, str]] = []
        self.configs: list[str] = []
        self.pins: list[str] = []
        self.found: list[tuple[str, str]] = []  # (path, "bind" | "git" | "link")
        self.stands_for: dict[str, str] = {}
        self.listed: list[tuple[str, int]] = []  # (directory, st_mtime_ns before listing)

    def found_in_walk(self) -> None:
        key = (self.guard.root, tuple(self.guard.protected))
        cached = _WALKS.get(key)
        if cached is None or not _unchanged(cached[0]):
            self.walk()
            cached = (tuple(self.listed), tuple(self.found))
            _WALKS[key] = cached
        for path, kind in cached[1]:
            if kind == "git":
                self.git(path)
            elif kind == "link":
                with contextlib.suppress(OSError):
                    self.links.append((path, os.readlink(path)))
            else:
                self.add(path)

    def add(self, path: str, *, follow: bool = False) -> None:
        """Bind ``path`` if it is a file or a directory; ``follow``: also what a link there
        leads to (git's own files: a ``hooks`` that is a link leads to the hooks git runs)."""
        try:
            info = os.stat(path) if follow else os.lstat(path)
        except OSError:
            return
        if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
            if follow and os.path.islink(path):  # the mount lands where the link leads
                self.stands_for[_real(path)] = path
                path = _real(path)
            self.read_only.append(path)

    def watch(self, path: str) -> None:
        if not os.path.lexists(path):
            self.absent.append(path)

    def walk(self) -> None:
        """Breadth first, a few levels deep and a bounded number of entries, so that a
        large tree costs a bounded time per command."""
        level = [self.guard.root]
        seen = 0
        for _depth in range(WALK_DEPTH):
            deeper: list[str] = []
            for directory in level:
                try:
                    self.listed.append((directory, os.stat(directory).st_mtime_ns))
                    with os.scandir(directory) as entries:
                        listed = list(entries)
                except OSError:
                    continue
                for entry in listed:
                    seen += 1
                    if seen > WALK_ENTRIES:
                        return
                    if self.entry(entry):
                        deeper.append(entry.path)
            level = deeper

    def entry(self, entry: os.DirEntry[str]) -> bool:
        """Judge one entry; True to walk into it."""
        name = entry.name
        protected_name = is_protected_name(name)
        is_dir = entry.is_dir(follow_symlinks=False)
        walk_into = is_dir and name not in SKIPPED_DIRS and not protected_name
        if not protected_name and not self.names.match(name):
            return walk_into
        path = entry.path
        if entry.is_symlink():
            if self.held(os.path.join(_real(os.path.dirname(path)), name), False):
                self.found.append((path, "link"))  # judged by its own name
            return False
        if name.casefold().rstrip(". ") == ".git":
            self.found.append((path, "git"))
            return False
        if self.held(path, is_dir):
            self.found.append((path, "bind"))
            return False
        return walk_into

    def held(self, path: str, is_dir: bool) -> bool:
        """``.specrun`` at any depth (any spelling a file system may open as it), ``.envrc``,
        or what a ``protectedPaths`` pattern matches (a directory pattern by a name in it)."""
        if not _under(path, self.guard.root):
            return False
        rel = os.path.relpath(path, self.guard.root).replace(os.sep, "/")
        parts = rel.split("/")
        if parts[-1] == ".envrc" or any(
                p.casefold().rstrip(". ") == ".specrun" or p.casefold().startswith("specru~")
                for p in parts):
            return True
        if not self.guard.protected:
            return False
        spec = _protected_paths(tuple(self.guard.protected))
        return spec.match_file(rel) or (is_dir and spec.match_file(f"{rel}/{_PROBE}"))

    def git(self, entry: str) -> None:
        """git's hooks of the repository's own directory and its common directory (a
        worktree's ``.git`` is a file naming them: bound too, so it cannot be pointed
        elsewhere), and the config files there (vetted after the command)."""
        directory = entry
        if os.path.isfile(entry):
            self.add(entry)
            try:
                line = Path(entry).read_text(errors="replace").strip()
            except OSError:
                return
            if not line.startswith("gitdir:"):
                return
            directory = os.path.join(os.path.dirname(entry), line[len("gitdir:"):].strip())
        directories = [directory]
        try:
            common = Path(directory, "commondir").read_text(errors="replace").strip()
            directories.append(os.path.normpath(os.path.join(directory, common)))
            self.add(os.path.join(directory, "commondir"))
        except OSError:
            pass
        for git_dir in directories:
            if not os.path.isdir(git_dir):
                continue
            hooks = os.path.join(git_dir, "hooks")
            self.add(hooks, follow=True)
            self.watch(hooks)
            with contextlib.suppress(OSError):
                self.links.append((hooks, os.readlink(hooks)))  # a link is put back
            self.pin(_real(git_dir))
            self.configs += [os.path.join(git_dir, "config"),
                             os.path.join(git_dir, "config.worktree")]

    def pin(self, git_dir: str) -> None:
        """``git_dir`` and the directories above it up to the project root (only its parent
        when it lies outside the project: a worktree's common directory)."""
        self.pins.append(git_dir)
        parent = os.path.dirname(git_dir)
        if not _under(git_dir, self.guard.root):
            self.pins.append(parent)
            return
        while parent != self.guard.root and _under(parent, self.guard.root):
            self.pins.append(parent)
            parent = os.path.dirname(parent)
        self.pins.append(self.guard.root)

    def literal_names(self) -> None:
        """Held names without a wildcard, at the project root: watched when absent, bound
        when the walk did not reach them."""
        # ``.git`` itself is not watched: a new repository (``git init``) is ordinary work
        for pattern in _patterns(self.guard):
            rel = pattern.strip().strip("/")
            if not rel or pattern.startswith(("#", "!")) or _GLOB.search(rel):
                continue
            path = os.path.normpath(os.path.join(self.guard.root, rel))
            if not _under(path, self.guard.root):
                continue
            self.watch(path)
            self.add(path)


# --- in the command's child, before exec -----------------------------------------------------


def enter(paths: tuple[str, ...], uid: int, gid: int, pins: tuple[str, ...] = ()) -> None:
    """In the forked child before exec: a mount namespace of its own with ``pins`` bound
    onto themselves (writable: they only become mount points, which cannot be renamed) and
    ``paths`` bound read-only, then no way back (``CAP_SYS_ADMIN`` leaves the bounding
    set, so the command cannot unmount them). Root that may mount gets just the mount
    namespace, so it stays root over every file as before; anyone else gets it inside a
    user namespace with our uid and gid mapped to themselves (our files keep their owner,
    the command is who it was). Raises OSError: the command does not run."""
    if not (uid == 0 and _own_mount_namespace()):
        libc.unshare(libc.CLONE_NEWUSER | libc.CLONE_NEWNS, what="unshare(user, mount)")
        # The copied mounts became slaves of the originals (a less privileged mount
        # namespace), so the binds below never propagate out. Only our own ids can be
        # mapped from inside: for root without CAP_SYS_ADMIN (a container's default), files
        # of other owners show as ``nobody`` in here.
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    for pin in pins:  # outermost first; recursive, so no mount below one is hidden
        with contextlib.suppress(FileNotFoundError):
            libc.mount(pin, pin, None, _MS_BIND | _MS_REC, None)
    for path in paths:
        try:
            bind_read_only(path)
        except FileNotFoundError:
            continue  # gone since the plan: nothing there to write
    # The working directory was entered before the mounts: looked up again, a relative
    # path meets them (else ``.git/hooks`` from the project root would pass under a pin).
    with contextlib.suppress(OSError):
        os.chdir(os.getcwd())
    libc.prctl(libc.PR_CAPBSET_DROP, CAP_SYS_ADMIN, what="dropping CAP_SYS_ADMIN")


def _own_mount_namespace() -> bool:
    """For root: a mount namespace without a user namespace, every mount a slave of the
    original first (so no bind propagates out); False where root may not (no
    ``CAP_SYS_ADMIN``)."""
    try:
        libc.unshare(libc.CLONE_NEWNS, what="unshare(mount)")
    except OSError:
        return False
    libc.mount(None, "/", None, _MS_REC | _MS_SLAVE, None)
    return True


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def preexec(guarded: Guarded) -> Callable[[], None]:
    uid, gid = os.geteuid(), os.getegid()
    paths, pins = guarded.read_only, guarded.pins
    return lambda: enter(paths, uid, gid, pins)


@functools.cache
def unavailable() -> str | None:
    """Why this machine cannot run the backstop (asked once per process), or None."""
    if _inheritable_caps() & (1 << CAP_SYS_ADMIN):
        # root's exec would hand it back from the inheritable set, and it unmounts the binds
        return "CAP_SYS_ADMIN is in this process's inheritable capabilities"
    uid, gid = os.geteuid(), os.getegid()
    # What a main-chat command gets, on a directory of our own: a private mount namespace
    # with it bound read-only, and a write into it refused by the kernel.
    with tempfile.TemporaryDirectory(prefix="specrun-backstop-probe-") as held:
        target = os.path.join(held, "hook")
        try:
            written = subprocess.run(
                ["/bin/sh", "-c", ': > "$1"', "sh", target],
                preexec_fn=lambda: enter((held,), uid, gid), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
        except (OSError, subprocess.SubprocessError):
            return "user and mount namespaces are not available"
        if written.returncode == 0 or os.path.lexists(target):
            return "a read-only bind mount did not stop a write"
    return None


LAYER_DETAIL = ("each main-chat shell command in a private mount namespace: git's hooks, "
                ".envrc, .specrun and protectedPaths bound read-only; git's config put back "
                "when the command added an entry that runs a program")


def layer() -> LayerStatus:
    """The backstop as a containment layer for ``status``/``workers``/``sandbox``:
    inactive with the reason where this machine cannot run it (main-chat commands then
    still run, with only the checks after them)."""
    why = unavailable()
    if why is None:
        return LayerStatus("chat_backstop", True, LAYER_DETAIL)
    return LayerStatus("chat_backstop", False, f"unavailable: {why}; main-chat commands run "
                       "without it (only git's config and new held names are checked after)")


def _inheritable_caps() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapInh:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


# --- after the command -------------------------------------------------------------------------


def settle(guarded: Guarded, output: str, cwd: str) -> tuple[str, ...]:
    """After the command: remove held names it created, put back held links it replaced
    and git config files it gave a program to run, and one sentence per path the kernel
    refused it (found in its output)."""
    notes = [note for before in guarded.configs if (note := vet_config(guarded, before))]
    for path in guarded.absent:
        if os.path.lexists(path):
            _remove(path)
            notes.append(f"specrun removed {quote_name(_rel(guarded, path))}, which this "
                         f"command created without your yes: {_why(guarded, path)}.")
    for path, target in guarded.links:
        try:
            same = os.readlink(path) == target
        except OSError:
            same = False
        if not same:
            with contextlib.suppress(OSError):
                if os.path.lexists(path):
                    _remove(path)
                os.symlink(target, path)
            notes.append(f"specrun put back the link {quote_name(_rel(guarded, path))}, "
                         f"which this command replaced without your yes: {_why(guarded, path)}.")
    for path in refused_paths(guarded, output, cwd):
        notes.append(f"specrun kept this command from writing {quote_name(_rel(guarded, path))}"
                     f": {_why(guarded, path)}; a command that names the path asks you first.")
    return tuple(notes)


def vet_config(guarded: Guarded, before: ConfigBefore) -> str | None:
    """Put a git config file back as it was when the command left in it an entry, new or
    changed, that makes git run a program (or a file git could not read, or a link that
    would let a later write elsewhere change it); the note that says so, or None."""
    after = read_config(before.path)
    if after == before or not after.present:
        return None  # unchanged, or removed (git then runs nothing from it)
    why = config_change_hazard(before, after)
    if why is None:
        return None
    name = quote_name(_rel(guarded, before.path))
    try:
        _put_back(before)
    except OSError as exc:
        return (f"this command {why} in {name} without your yes, and specrun could not put "
                f"it back ({exc.strerror or exc}): check it before your next git command.")
    return (f"specrun put {name} back as it was: this command {why} without your yes, and "
            "git would run a program from it on your next git command, outside any sandbox.")


def config_change_hazard(before: ConfigBefore, after: ConfigBefore) -> str | None:
    """What the change from ``before`` to ``after`` did that lets git run a program (``set
    core.hookspath``), or None. Only entries that are new or changed count: a repository
    that came with an alias keeps it (the read-only git check judges the whole file)."""
    if after.link is not None and after.link != before.link:
        return "made it a link"
    if after.data is None:
        return "made it something git cannot read as a file"
    if after.links > max(before.links, 1):
        return "made it a hard link to another file"
    try:
        entries = list(parse_git_config(after.data.decode("utf-8", "surrogateescape")))
    except ValueError as exc:
        return f"left it unreadable to git ({exc})"
    try:
        old = set(parse_git_config((before.data or b"").decode("utf-8", "surrogateescape")))
    except ValueError:
        old = set()
    keys = [".".join(part for part in (section, subsection, key) if part is not None)
            for section, subsection, key, value in entries
            if (section, subsection, key, value) not in old
            and config_entry_runs_program(section, subsection, key, value)]
    if not keys:
        return None
    return "set " + ", ".join(dict.fromkeys(keys))


def _put_back(before: ConfigBefore) -> None:
    """The old state, each step atomic (a name renamed over the path, the same mode)."""
    path = before.path
    if not before.present:
        _remove(path)
        return
    if before.data is None and before.link is None:
        raise OSError(0, "it was no readable file before the command")
    directory = os.path.dirname(path)
    if before.link is not None:
        staged = os.path.join(directory, f".{os.path.basename(path)}.specrun-link")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        os.symlink(before.link, staged)
        _replace(staged, path)
        if before.data is None:
            return
        path = _real(path)
        directory = os.path.dirname(path)
    fd, staged = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.specrun-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(before.data or b"")
            os.fchmod(out.fileno(), before.mode)
            out.flush()
            os.fsync(out.fileno())
        _replace(staged, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise


def _replace(staged: str, path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):  # a rename cannot replace it
        shutil.rmtree(path)
    os.replace(staged, path)


def _why(guarded: Guarded, path: str) -> str:
    """``.envrc runs later without a key press (…)`` from the rule's clause
    ``it writes .envrc, which runs later…``."""
    name = quote_name(_rel(guarded, path))
    reason = guarded.reason(path)
    _, _, tail = reason.partition(", ")
    if not tail:
        return f"{name} is protected"
    return f"{name} {tail[len('which '):]}" if tail.startswith("which ") else f"{name} is {tail}"


def _rel(guarded: Guarded, path: str) -> str:
    return os.path.relpath(path, guarded.root) if _under(path, guarded.root) else path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)


_QUOTED = re.compile(r"""['"‘`]([^'"’`\n]+)['"’`]""")


def refused_paths(guarded: Guarded, output: str, cwd: str) -> list[str]:
    """The bound paths the command's error lines name ("Read-only file system", "Device or
    resource busy"), resolved from ``cwd`` with links followed (a link into ``.git/hooks``
    names ``.git/hooks``)."""
    found: list[str] = []
    for line in output.splitlines():
        if not any(marker in line for marker in _REFUSED):
            continue
        head = line.split(_REFUSED[0])[0].split(_REFUSED[1])[0]
        words = [m.group(1) for m in _QUOTED.finditer(line)]
        words += [w.rstrip(":") for w in head.replace(":", ": ").split() if "/" in w or "." in w]
        for word in words:
            path = _real(os.path.join(cwd, word))
            for bound in guarded.read_only:
                if (path == bound or _under(path, bound)) and bound not in found:
                    found.append(bound)
            if (path in guarded.pins and os.path.basename(path) == ".git"
                    and path not in found):
                found.append(path)
    return found


# --- the main chat's runner ------------------------------------------------------------------

ShellRunner = Callable[[str, "str | os.PathLike[str]", float, int], ShellResult]
_said_unavailable: list[bool] = []


def guarded_runner(guard: WriteGuard, opened: Opened = Opened()) -> ShellRunner:
    """``run_shell`` behind the backstop: the paths are planned per command (the tree may
    change between commands), the command's own output stays as it is, and specrun's notes
    follow it. Where the backstop cannot run, the command runs as before and the first such
    result of this process says why."""

    def run(command: str, cwd: str | os.PathLike[str], timeout_s: float,
            output_cap: int) -> ShellResult:
        why = unavailable()
        guarded = guarded_paths(guard, opened)
        if why is None:
            try:
                result = run_shell(command, cwd, timeout_s, output_cap,
                                   preexec=preexec(guarded))
            except subprocess.SubprocessError as exc:  # the namespace was refused: not run
                why = f"the namespace was refused: {exc}"
            else:
                notes = settle(guarded, f"{result.stdout}\n{result.stderr}", os.fspath(cwd))
                return dataclasses.replace(result, notes=result.notes + notes)
        # Without the binds, what is checked after the command still is.
        result = run_shell(command, cwd, timeout_s, output_cap)
        notes = settle(guarded, "", os.fspath(cwd))
        if not _said_unavailable:
            _said_unavailable.append(True)
            notes = (*notes, UNAVAILABLE.format(why=why))
        return dataclasses.replace(result, notes=result.notes + notes)

    return run
