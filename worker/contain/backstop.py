"""The main chat's kernel backstop: what a shell command computes at run time cannot write
a protected or runs-later path it was not approved to write.

The parse-tree check (``worker.shell.write_targets``) asks before a command whose command
line names such a path. It cannot see ``f=.git/hooks/pre-commit; echo x > "$f"``, a
Makefile recipe or a script the repository brought, ``python -c "open('.git/config',
'a')"``, or a link in the project that leads into ``.git/hooks``. So every main-chat
command runs in a private user and mount namespace of its own where

- every existing protected or runs-later path of the project (``.git/config``,
  ``.git/hooks/``, ``.git/info/``, the ``.git`` file of a worktree, ``.gitattributes``,
  ``.specrun/``, ``.envrc``, ``Makefile``, ``.github/workflows/``, ``.vscode/``…: the
  one rule, ``protocol.rules.protected_writes``) and specrun's own state directories are
  bound read-only onto themselves: a write fails with "Read-only file system", a rename
  onto one or an unlink of one with "Device or resource busy", a new file inside a
  protected directory (a new hook) cannot be created, whichever path leads there;
- such a path that does not exist yet (a new ``.envrc``) cannot be held by a mount (a
  mount needs an existing name, and a read-only project root would refuse every new file
  and ``sed -i`` there), so it is watched: when the command made it, specrun removes it
  right after the command and says so;
- everything else is as before: same cwd, environment, user and files; ``.git/index``,
  objects and refs stay writable, so ``git add`` and ``git commit`` work.

A path the person said yes to for this command (the parse-tree question) stays writable,
as does everything when the question could not name a path (a command specrun could not
read). Root that may mount gets a mount namespace alone; anyone else one inside a user
namespace with our uid and gid mapped to themselves (``enter``). The command cannot undo
the mounts: ``CAP_SYS_ADMIN`` is dropped from its bounding set before
it starts. Where user namespaces are not available the command runs as before and the
result says so once.

Not covered (docs/security.md): a program that asks another process to write for it (a
running editor, ``systemd-run --user``, tmux, docker) or writes through another process's
view (``/proc/PID/root``); set-uid programs (``sudo``) run without their privilege inside
the namespace; runs-later names deeper than three directories or past the first 4,000
entries, and inside ``node_modules``, virtual environments and build output, are not
bound (the parse-tree check still asks when a command names one).
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from overlay.kernel import libc
from protocol.rules.protected import is_protected_name
from protocol.rules.protected_writes import protected_write
from protocol.rules.runs_later import DEFAULT_RUNS_LATER
from protocol.text.inert_text import quote_name
from protocol.wire.work import WriteGuard
from worker.contain.mounts import bind_read_only
from worker.shell.runner import ShellResult, run_shell

CAP_SYS_ADMIN = 21
_MS_REC = 1 << 14
_MS_SLAVE = 1 << 19
WALK_DEPTH = 3
WALK_ENTRIES = 4000
# Directories never walked: tools write their own files there all the time (a
# ``node_modules/x/package.json``, a venv's ``*.pth``), so binding them would break installs.
SKIPPED_DIRS = frozenset({
    "node_modules", ".venv", "venv", ".tox", ".nox", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", "target", "build", "dist", "site-packages", ".cache",
})
_PROBE = "specrun-backstop-probe"  # a name no pattern is meant to match
_GLOB = re.compile(r"[*?\[]")
_OUTSIDE_GIT = ("it writes git's configuration, git's own configuration (its config, hooks "
                "and attributes run programs on your next git command, outside any sandbox)")
_REFUSED = ("Read-only file system", "Device or resource busy")
UNAVAILABLE = ("specrun could not keep git's configuration and hooks and the files that run "
               "later read-only for main-chat commands here ({why}): a command can still "
               "write them through a path it computes at run time")


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
class Guarded:
    """What one command's namespace holds back: ``read_only`` existing paths bound
    read-only, ``absent`` protected names not there before (removed if the command makes
    them), ``links`` protected names that are links, with their targets (put back if the
    command replaces them: a mount on a link would bind what it points to)."""

    guard: WriteGuard
    read_only: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    # a bound path that a link of git's leads to -> that link (its reason is the link's)
    stands_for: tuple[tuple[str, str], ...] = ()

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
    """The paths of ``guard``'s project a command may not write, less those ``opened``."""
    plan = _Plan(guard)
    plan.found_in_walk()
    plan.literal_names()
    for private in guard.private:
        plan.add(private)
    read_only = tuple(p for p in dict.fromkeys(plan.read_only) if not opened.opens(p))
    absent = tuple(p for p in dict.fromkeys(plan.absent) if not opened.opens(p))
    links = tuple((p, t) for p, t in plan.links if not opened.opens(p))
    return Guarded(guard, _outermost(read_only), absent, links, tuple(plan.stands_for.items()))


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
    return (*DEFAULT_RUNS_LATER, *guard.later, *guard.protected)


@functools.lru_cache(maxsize=16)
def _name_filter(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """Matches a name that some pattern's component could match (``.github`` for
    ``.github/workflows/``, ``*.pth``): only such entries are judged by the whole rule, so
    a walk costs a regular expression per entry, not a rule with its resolved paths."""
    names = {part for pattern in patterns
             for part in pattern.strip().lstrip("!").strip("/").split("/") if part}
    return re.compile("|".join(fnmatch.translate(name) for name in sorted(names)) or "(?!)")


# What the last walk of a project found (protected entries, ``.git`` entries, links with a
# protected name), with the modification time of every directory it listed: while none
# changed, no entry was added, removed or renamed there, and the next command's plan skips
# the walk (what is found is still checked on disk every time).
_Walked = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, str], ...]]
_WALKS: dict[tuple[str, tuple[str, ...], tuple[str, ...]], _Walked] = {}


class _Plan:
    def __init__(self, guard: WriteGuard) -> None:
        self.guard = guard
        self.names = _name_filter(_patterns(guard))
        self.read_only: list[str] = []
        self.absent: list[str] = []
        self.links: list[tuple[str, str]] = []
        self.found: list[tuple[str, str]] = []  # (path, "bind" | "git" | "link")
        self.stands_for: dict[str, str] = {}
        self.listed: list[tuple[str, int]] = []  # (directory, st_mtime_ns before listing)

    def found_in_walk(self) -> None:
        key = (self.guard.root, tuple(self.guard.protected), tuple(self.guard.later))
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
        if not protected_name and not self.names.match(name):
            return is_dir and name not in SKIPPED_DIRS
        path = entry.path
        if entry.is_symlink():
            if self._link_name(path) is not None:
                self.found.append((path, "link"))
            return False
        if name.casefold().rstrip(". ") == ".git":
            self.found.append((path, "git"))
            return False
        reason = protected_write(self.guard, path)
        if reason is None and is_dir:
            reason = protected_write(self.guard, os.path.join(path, _PROBE))
        if reason is not None:
            self.found.append((path, "bind"))
            return False
        return is_dir and name not in SKIPPED_DIRS and not protected_name

    def _link_name(self, path: str) -> str | None:
        """A link is judged by its own name (what it points to is bound on its own when
        it is in the project)."""
        plain = WriteGuard(self.guard.root, self.guard.protected, self.guard.later, ())
        return protected_write(plain, os.path.join(_real(os.path.dirname(path)),
                                                   os.path.basename(path)))

    def git(self, entry: str) -> None:
        """git's files that run programs: config, hooks, info/ (attributes), of the
        repository's own directory and its common directory (a worktree's ``.git`` is a
        file naming them: bound too, so it cannot be pointed elsewhere)."""
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
            for name in ("config", "config.worktree", "hooks", "info"):
                self.add(os.path.join(git_dir, name), follow=True)
            for name in ("hooks", "info"):
                self.watch(os.path.join(git_dir, name))

    def literal_names(self) -> None:
        """Protected names without a wildcard, at the project root: watched when absent,
        bound when the walk did not reach them."""
        # ``.git`` itself is not watched: a new repository (``git init``) is ordinary work
        for pattern in (*_patterns(self.guard), ".gitattributes", ".gitmodules", ".specrun"):
            rel = pattern.strip().strip("/")
            if not rel or pattern.startswith(("#", "!")) or _GLOB.search(rel):
                continue
            path = os.path.normpath(os.path.join(self.guard.root, rel))
            if not _under(path, self.guard.root):
                continue
            self.watch(path)
            self.add(path)


# --- in the command's child, before exec -----------------------------------------------------


def enter(paths: tuple[str, ...], uid: int, gid: int) -> None:
    """In the forked child before exec: a mount namespace of its own with ``paths`` bound
    read-only, then no way back (``CAP_SYS_ADMIN`` leaves the bounding set, so the command
    cannot unmount them). Root that may mount gets just the mount namespace, so it stays
    root over every file as before; anyone else gets it inside a user namespace with our
    uid and gid mapped to themselves (our files keep their owner, the command is who it
    was). Raises OSError: the command does not run."""
    if not (uid == 0 and _own_mount_namespace()):
        libc.unshare(libc.CLONE_NEWUSER | libc.CLONE_NEWNS, what="unshare(user, mount)")
        # The copied mounts became slaves of the originals (a less privileged mount
        # namespace), so the binds below never propagate out. Only our own ids can be
        # mapped from inside: for root without CAP_SYS_ADMIN (a container's default), files
        # of other owners show as ``nobody`` in here.
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    for path in paths:
        try:
            bind_read_only(path)
        except FileNotFoundError:
            continue  # gone since the plan: nothing there to write
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
    paths = guarded.read_only
    return lambda: enter(paths, uid, gid)


@functools.cache
def unavailable() -> str | None:
    """Why this machine cannot run the backstop (asked once per process), or None."""
    if _inheritable_caps() & (1 << CAP_SYS_ADMIN):
        # root's exec would hand it back from the inheritable set, and it unmounts the binds
        return "CAP_SYS_ADMIN is in this process's inheritable capabilities"
    uid, gid = os.geteuid(), os.getegid()
    try:
        subprocess.run(["/bin/sh", "-c", ":"], preexec_fn=lambda: enter((), uid, gid), check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, close_fds=True)
    except (OSError, subprocess.SubprocessError):
        return "user and mount namespaces are not available"
    return None


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
    """After the command: remove protected names it created, put back protected links it
    replaced, and one sentence per path the kernel refused it (found in its output)."""
    notes: list[str] = []
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
        if why is None:
            guarded = guarded_paths(guard, opened)
            try:
                result = run_shell(command, cwd, timeout_s, output_cap,
                                   preexec=preexec(guarded))
            except subprocess.SubprocessError as exc:  # the namespace was refused: not run
                why = f"the namespace was refused: {exc}"
            else:
                notes = settle(guarded, f"{result.stdout}\n{result.stderr}", os.fspath(cwd))
                return dataclasses.replace(result, notes=result.notes + notes)
        result = run_shell(command, cwd, timeout_s, output_cap)
        if _said_unavailable:
            return result
        _said_unavailable.append(True)
        return dataclasses.replace(result, notes=(*result.notes, UNAVAILABLE.format(why=why)))

    return run
