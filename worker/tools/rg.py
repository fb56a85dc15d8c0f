"""ripgrep as the file finder of ``grep_search`` and ``glob``.

The search tools keep their own semantics (Python regular expressions, the tree walk's order,
``.gitignore`` through pathspec, the 8 KB binary sniff, the size cap): ripgrep only narrows the
set of files they look at, which is where a pure-Python walk spends its time on a big tree.
:func:`find_files` returns the files of a directory the walk in :mod:`worker.tools.tree` would
visit that can matter, in the walk's order: for ``grep_search`` the files in which rg finds the
pattern plus the ones it skipped for size, for ``glob`` every file (optionally only those whose
name matches a glob). The caller then runs exactly the code it runs on the walk's output, so
lines, numbers, caps and notes come out the same.

rg never follows a symlink (it runs without ``-L``/``--follow``, and lists regular files
only); the links ``find`` reports beside it (a search), or a scan of the directories in this
process (a listing: :func:`_scan_symlinks`), go through the read rule (``worker.tools.reach``)
like the walk's: one that leads outside the project or into specrun's state is skipped and
named, never read. specrun's state below the start directory is dropped from rg's list.

A speculation's overlay files shadow the real ones: rg lists the real tree, the listed paths
written in the overlay are dropped, and the overlay's files (filtered by the same ignore rules
as the walk) are merged in at their place in the order.

A listing whose ignore files hold only name rules needs no rg: :func:`plain_listing` walks the
tree once in this process (``worker.tools.listing_walk``) and hands the same
:class:`FileSearch` interface its files, their modification times and the symlinks.

``None`` means "use the walk": no runnable rg binary, a pattern rg would read differently from
Python (or cannot compile), ignore rules rg would see differently (a ``.gitignore`` written in
the overlay, ignore files above a project that is not a git repository, a directory outside the
project), or rg failing. ``use_ripgrep=False`` in the tool context always uses the walk.

The rg and ``find`` programs run unconfined, so one named by ``SPECRUN_RG`` or found on
``PATH`` is run only if ``protocol.rules.programs`` allows it for the project: never a file
inside the project (a cloned repository's ``.envrc`` can set both variables).

Known difference, where rg follows git and the walk (pathspec) does not: a negated pattern
naming a directory (``!keep``) re-includes, for pathspec, files below an excluded directory
inside it; git and rg never look inside an excluded directory. And a nested repository (a
directory holding ``.git``) does not see the ignore rules of the directories above it in rg.
And ``find`` skips the directories the top ``.gitignore`` ignores by plain name: a nested
``.gitignore`` that re-includes one (``!__pycache__/``) gets its files searched, but a symlink
or an over-size file inside it goes unnamed.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from protocol.rules import programs
from worker.tools.listing_walk import NameTest, walk_listing
from worker.tools.plain_ignore import PlainRules, RuleChain, plain_rules
from worker.tools.tree import SKIPPED_DIRS, IgnoreRules, Node, TreeView

__all__ = [
    "FileSearch",
    "Hit",
    "find_files",
    "name_glob",
    "plain_listing",
    "rg_binary",
    "rust_pattern",
    "start_search",
]

log = logging.getLogger("specrun.worker.search")

_EXE = "rg.exe" if sys.platform == "win32" else "rg"
_TYPE = "specrunsel"


def _candidates(project: Path) -> Iterable[str]:
    """Where rg may be, first to last, each allowed for ``project``. The interpreter's own
    directories are as trusted as the interpreter that runs this (the ``ripgrep`` wheel
    installs rg there, in a virtual environment that may well be inside the project); a
    file named by ``SPECRUN_RG`` or found on ``PATH`` must pass ``programs.refusal``."""
    env = os.environ.get("SPECRUN_RG")
    if env:
        why = programs.refusal(env, project)
        if why is None:
            yield env
        else:
            log.warning("SPECRUN_RG is not used: %s", why)
    yield os.path.join(os.path.dirname(sys.executable), _EXE)
    scripts = sysconfig.get_path("scripts")
    if scripts:
        yield os.path.join(scripts, _EXE)
    yield from programs.on_path(_EXE, project)


@functools.cache
def rg_binary(project: Path) -> str | None:
    """The first ripgrep 14 binary that runs, of those ``_candidates`` allows for
    ``project``: ``$SPECRUN_RG``, next to the interpreter, the interpreter's scripts
    directory, ``PATH``."""
    seen: set[str] = set()
    for path in _candidates(project):
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        try:
            done = subprocess.run([path, "--version"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0 and done.stdout.startswith(b"ripgrep 14."):
            return path
    return None


# --- patterns ----------------------------------------------------------------------------------


def rust_pattern(pattern: str) -> str | None:
    """``pattern`` (valid Python syntax) spelled for rg's regex engine so that rg finds at
    least every line Python's ``re`` finds, or ``None`` when that cannot be promised.

    Python-only syntax (look-around, back references, ``\\Z``, ``{,n}`` ...) makes rg fail,
    which also means ``None`` (via :func:`find_files`). Here: ``\\<``/``\\>`` are word
    boundaries to rg but literal ``<``/``>`` to Python, and a ``[`` inside a class, or ``&&``,
    ``--``, ``~~`` there, are set operations to rg but literal characters to Python.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    class_start = 0
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            out.append(nxt if nxt in "<>" else ch + nxt)
            i += 2
            continue
        if in_class:
            at_start = i == class_start or (i == class_start + 1 and pattern[class_start] == "^")
            if ch == "]" and not at_start:
                in_class = False
            elif ch == "[" or pattern.startswith(("&&", "--", "~~"), i):
                return None
        elif ch == "[":
            in_class = True
            class_start = i + 1
        out.append(ch)
        i += 1
    return "".join(out)


_SAFE_NAME = re.compile(r"[\w.*?{},+@%=~ -]+")


def name_glob(pattern: str) -> str | None:
    """For a glob over ``/``-separated paths, a glob every matching path's *file name* matches,
    in the syntax shared by ``glob_regex`` and rg, or ``None``. It only lets rg skip files
    early: the caller still matches each path against the whole pattern.

    ``?`` becomes ``*``: rg's ``?`` is one byte, so it would drop ``é.py`` for ``?.py``,
    which ``glob_regex`` (one character) matches."""
    last = pattern.rsplit("/", 1)[-1]
    if not last or "**" in last or "{" in pattern[: len(pattern) - len(last)]:
        return None
    last = re.sub(r"[*?]*\?[*?]*", "*", last)
    if not _SAFE_NAME.fullmatch(last) or last.strip("*") == "":
        return None
    depth = 0
    for ch in last:
        if ch == "{":
            depth += 1
            if depth > 1:
                return None
        elif ch == "}":
            depth -= 1
            if depth < 0:
                return None
    return last if depth == 0 else None


# --- running rg --------------------------------------------------------------------------------


def _mirrors_ignore_rules(root: Path) -> bool:
    """Whether rg, told to ignore parent directories beyond a git repository, applies the same
    ignore files as the walk (which reads only the project's own): true for a project that is
    a git repository, and for one with no ignore files or repository above it."""
    if os.path.lexists(root / ".git"):
        return True
    return not any(
        os.path.lexists(parent / ".gitignore") or os.path.lexists(parent / ".git")
        for parent in root.parents
    )


class Hit(NamedTuple):
    """A file found: its path relative to the start directory (posix), its logical absolute
    path and the file holding its content (the overlay copy of a file written in it)."""

    rel: str
    logical: str
    physical: str

    def node(self) -> Node:
        return Node(Path(self.logical), Path(self.physical), is_dir=False)


_PIPE_BYTES = 1 << 20


def _streamed(
    argv: list[str], cwd: Path, env: dict[str, str] | None, err: int, pipe_bytes: int
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
        pipesize=pipe_bytes,
    )  # fmt: skip


class _Proc:
    """A child process whose output goes to memory files (see :meth:`output`), or, with
    ``stream``, whose stdout is read while it runs (:meth:`chunks`)."""

    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str] | None = None,
        *,
        stream: bool = False,
    ) -> None:
        self._fds: list[int] = []
        self._pipe: int | None = None
        if hasattr(os, "memfd_create"):
            err: int = os.memfd_create("specrun-search-err", os.MFD_CLOEXEC)
            if stream:
                self._fds = [err]
                # A pipe big enough for a whole listing (a MiB, the unprivileged maximum, is
                # about 20,000 paths): rg never waits for the reader, who stats each block as
                # it comes; with the default 64 KiB, rg stalled whenever the reader was not
                # scheduled, which on a loaded machine made the listing last as long as the
                # reader's work (``scripts/bench_search.py``, docs/benchmarks.md).
                try:
                    self.proc = _streamed(argv, cwd, env, err, _PIPE_BYTES)
                except OSError:  # a pipe that size refused (the user's pipe quota): the default
                    self.proc = _streamed(argv, cwd, env, err, -1)
                assert self.proc.stdout is not None
                self._pipe = self.proc.stdout.fileno()
            else:
                out: int = os.memfd_create("specrun-search-out", os.MFD_CLOEXEC)
                self._fds = [out, err]
                self.proc = subprocess.Popen(
                    argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
                )
        else:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )

    def chunks(self) -> Iterator[bytes]:
        """Stdout as it comes (rg writes it in blocks of a few KiB), then :meth:`output`
        gives the exit status and stderr (and no stdout)."""
        if self._pipe is None:
            return  # not streamed: all of stdout comes with output()
        while chunk := os.read(self._pipe, 1 << 18):
            yield chunk

    def output(self) -> tuple[int, bytes, bytes]:
        """(exit status, stdout, stderr) once the process ended. Output goes to memory files
        (or, streamed, is read by :meth:`chunks` meanwhile): nothing touches the disk, which
        a speculation could not write outside its overlay anyway."""
        try:
            if not self._fds:
                out, err = self.proc.communicate()
                return self.proc.returncode, out, err
            if self._pipe is not None:
                for _ in self.chunks():
                    pass  # not read by the caller: drained, so the process can end
            code = self.proc.wait()
            got = []
            for fd in self._fds:
                size = os.lseek(fd, 0, os.SEEK_END)
                got.append(os.pread(fd, size, 0) if size else b"")
            if self._pipe is not None:
                return code, b"", got[0]
            return code, got[0], got[1]
        finally:
            self.close()

    def paths(self) -> list[str] | None:
        """The NUL-separated paths the process printed (``find``), or ``None`` when it failed
        and printed none."""
        code, out, _ = self.output()
        if code != 0 and not out:
            return None
        return [os.fsdecode(raw) for raw in out.split(b"\0") if raw]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._pipe = None


def _rg_argv(
    binary: str,
    root: Path,
    where: str,
    *,
    pattern: str | None,
    no_ignore: bool,
    name: str | None,
    max_depth: int | None,
    max_filesize: int | None,
) -> list[str]:
    argv = [
        binary,
        "--no-config",
        "--no-messages",
        "--hidden",
        "--no-ignore-global",
        "--no-ignore-dot",
        "--null",
        "--color=never",
        "-g",
        "!.git/",
    ]
    if no_ignore:
        argv.append("--no-ignore")
    elif not os.path.lexists(root / ".git"):
        # No repository: rg must read .gitignore files anyway (there are none above the
        # project, see _mirrors_ignore_rules). In a repository it must not: with this flag it
        # would also apply the ignore files of directories above the repository.
        argv.append("--no-require-git")
    if name is not None:
        argv += ["--type-add", f"{_TYPE}:{name}", "--type", _TYPE]
    if max_depth is not None:
        argv += ["--max-depth", str(max_depth)]
    if max_filesize is not None:
        argv += ["--max-filesize", str(max_filesize)]
    if pattern is None:
        # Every core, as bare `rg --files` takes them: on a quiet machine one thread fewer
        # (for the `find` beside it) made no difference (52 against 54 ms on 34k files), on a
        # loaded one a single thread got half the CPU share bare rg gets and the listing took
        # twice as long.
        argv += ["--files", "--threads", str(_cores())]
    else:
        argv += ["--files-with-matches", "--crlf", "-e", pattern]
    return [*argv, "--", where]


@functools.cache
def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@functools.cache
def _find_binary(project: Path) -> str | None:
    """The first ``find`` on ``PATH`` that may be run for ``project``."""
    return programs.which("find", project)


_MAX_FIND_NAMES = 32


def _name_alternatives(name: str | None) -> list[str] | None:
    """The plain patterns (``*`` their only wildcard) a :func:`name_glob` stands for, its
    braces expanded, or ``None`` when there is no name or too many alternatives."""
    if name is None:
        return None
    names = [""]
    for literal, group in re.findall(r"([^{]*)(?:\{([^}]*)\})?", name):
        alternatives = group.split(",") if group else [""]
        names = [n + literal + alt for n in names for alt in alternatives]
        if len(names) > _MAX_FIND_NAMES:
            return None
    return list(dict.fromkeys(names))


def _find_names(name: str | None) -> list[str]:
    """``find`` tests that keep only entries whose name matches ``name`` (a
    :func:`name_glob`, whose braces ``find -name`` does not know: each alternative becomes
    a ``-name`` of its own), or none when there is no name, or too many alternatives."""
    names = _name_alternatives(name)
    if names is None:
        return []
    tests = ["("]
    for i, one in enumerate(names):
        tests += (["-o"] if i else []) + ["-name", one]
    return [*tests, ")"]


def _name_regex(name: str | None) -> re.Pattern[str] | None:
    """What :func:`_find_names` tests, as one regex for a whole file name (``*`` matches any
    characters, a leading dot and a newline too, as ``find -name`` does), or ``None``: every
    name."""
    names = _name_alternatives(name)
    if names is None:
        return None
    spelled = ("".join(".*" if ch == "*" else re.escape(ch) for ch in one) for one in names)
    return re.compile("|".join(f"(?:{one})" for one in spelled), re.DOTALL)


def _scan_symlinks(
    top: str,
    where: str,
    max_depth: int | None,
    names: re.Pattern[str] | None,
    pruned: Collection[str],
) -> list[str] | None:
    """The symlinks below directory ``top`` (an absolute path), as ``find where`` (``where``
    the same directory, relative) with the arguments of :func:`_find_argv` for a listing
    prints them: no deeper than ``max_depth``, only those whose name ``names`` matches, not
    inside a directory named ``.git`` or in ``pruned``, the start included. ``None`` when
    nothing was found and a directory could not be read (``find`` failing: use the walk).

    In-process instead of ``find`` because the scan reads each directory once and takes the
    entry types the kernel gives with the names: ``find`` (fts) also stats and juggles
    descriptors for each directory, which made it cost most of rg's own CPU time on a big
    tree (docs/benchmarks.md). No link is followed and no file is stat-ed."""
    skipped = {".git", *pruned}
    if os.path.basename(where) in skipped or os.path.islink(top) or not os.path.isdir(top):
        return []  # find prunes the start itself; or a link: find does not go below it
    links: list[str] = []
    failed = False
    deepest = -1 if max_depth is None else max_depth
    # Each directory is opened below its parent's descriptor with O_NOFOLLOW: a directory
    # swapped for a link between its entry being read and its opening is not followed.
    frames: list[tuple[int, Iterator[os.DirEntry[str]], str, int]] = []
    try:
        fd = os.open(top, _DIR_FLAGS)
        try:
            frames.append((fd, os.scandir(fd), top + "/", 1))
        except OSError:
            os.close(fd)
            raise
        while frames:
            fd, entries, prefix, depth = frames[-1]
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if depth == deepest or entry.name in skipped:
                            continue
                        child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                        try:
                            children = os.scandir(child)
                        except OSError:
                            os.close(child)
                            raise
                        frames.append((child, children, prefix + entry.name + "/", depth + 1))
                        break  # its parent's entries go on once it is done
                    if entry.is_symlink() and (names is None or names.fullmatch(entry.name)):
                        links.append(prefix + entry.name)
                except OSError:  # gone since its directory was read, or unreadable
                    failed = True
            else:
                frames.pop()
                _close_scan(fd, entries)
    except OSError:
        failed = True
    finally:
        for fd, entries, _, _ in frames:
            _close_scan(fd, entries)
    return None if failed and not links else links


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _close_scan(fd: int, entries: Iterator[os.DirEntry[str]]) -> None:
    close = getattr(entries, "close", None)
    if close is not None:
        close()
    os.close(fd)


_PLAIN_DIR_RULE = re.compile(r"[\w.-]+/?")


def _ignored_dir_names(root: Path) -> list[str]:
    """Names the project's top ``.gitignore`` ignores at every depth as plain words
    (``__pycache__/``, ``node_modules``): ``find`` need not look inside such directories,
    since the walk does not either. A file with any negation (``!...``) gives none: the walk
    (pathspec) can re-include below an ignored directory. Only ever a subset of what the walk
    ignores; every path ``find`` prints is still checked against the walk's rules."""
    try:
        text = (root / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    names = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("!"):
            return []
        name = line.rstrip("/")
        if line == raw and _PLAIN_DIR_RULE.fullmatch(line) and name.strip("."):
            names.append(name)
    return [name for name in dict.fromkeys(names) if name != ".git"]


def _find_argv(
    binary: str,
    where: str,
    max_filesize: int | None,
    max_depth: int | None = None,
    name: str | None = None,
    pruned: Collection[str] = (),
) -> list[str]:
    """What rg leaves out and the walk visits: symlinks (rg does not follow them; the walk
    reads a symlinked file) and, for a search, files over the size cap (rg skips them
    silently; the search names them). ``find`` reads only directory entries for the links
    and the names, and stats a regular file only for the size test, once its name matched;
    it goes no deeper than rg."""
    wanted = ["-type", "l"]
    if max_filesize is not None:
        wanted = ["(", "-type", "l", "-o", "-type", "f", "-size", f"+{max_filesize}c", ")"]
    # The cheapest test first: "-type l" reads the directory entry's type; a name is a
    # pattern match; the size test stats the file, so it comes after the name.
    names = _find_names(name)
    tests = [*wanted, *names] if max_filesize is None else [*names, *wanted]
    depth = [] if max_depth is None else ["-maxdepth", str(max_depth)]
    skipped = ["-name", ".git"]
    for dirname in pruned:
        skipped += ["-o", "-name", dirname]
    return [
        binary,
        where,
        *depth,
        "(",
        *skipped,
        ")",
        "-type",
        "d",
        "-prune",
        "-o",
        *tests,
        "-print0",
    ]


class _LinkScan:
    """:func:`_scan_symlinks` standing in for ``find`` in a listing, on a thread of its own
    from the start, as ``find`` ran beside rg: the scan spends most of its time in the
    kernel (directory reads), when the reader of rg's list can hold the interpreter."""

    def __init__(
        self,
        top: str,
        where: str,
        max_depth: int | None,
        name: str | None,
        pruned: Collection[str],
    ) -> None:
        self._args = (top, where, max_depth, _name_regex(name), pruned)
        self._found: list[list[str] | None] = []
        self._thread = threading.Thread(target=self._run, name="specrun-symlink-scan")
        self._thread.start()

    def _run(self) -> None:
        self._found.append(_scan_symlinks(*self._args))

    def paths(self) -> list[str] | None:
        self._thread.join()
        return self._found[0] if self._found else None

    def close(self) -> None:
        self._thread.join()  # a scan is not stopped half way; it holds descriptors until done


class _FoundLinks:
    """The symlinks a :func:`plain_listing` walk found, standing in for ``find``."""

    def __init__(self, links: list[str]) -> None:
        self._links = links

    def paths(self) -> list[str]:
        return self._links

    def close(self) -> None:
        pass


class _Visibility:
    """Whether the walk from ``start`` reaches a file, by the same ignore rules (cached per
    directory, for the few files checked this way: overlay files, symlinks, big files; read
    only once one is)."""

    def __init__(self, view: TreeView, start: Path, no_ignore: bool) -> None:
        self.view = view
        self.no_ignore = no_ignore
        self._start = start
        self._dirs: dict[Path, IgnoreRules | None] = {}

    def _rules(self, directory: Path) -> IgnoreRules | None:
        if not self._dirs:
            start, view = self._start, self.view
            self._dirs[start] = IgnoreRules() if self.no_ignore else IgnoreRules.at(view, start)
        if directory in self._dirs:
            return self._dirs[directory]
        outer = self._rules(directory.parent)
        rules: IgnoreRules | None = None
        if outer is not None and directory.name not in SKIPPED_DIRS:
            if self.no_ignore:
                rules = outer
            elif not outer.ignored(directory, True):
                rules = outer.entering(self.view, directory)
        self._dirs[directory] = rules
        return rules

    def visible(self, path: Path, is_dir: bool = False) -> bool:
        rules = self._rules(path.parent)
        return rules is not None and (self.no_ignore or not rules.ignored(path, is_dir))


class FileSearch:
    """rg, with ``find`` beside it (or, for a listing, a symlink scan on a thread), running for
    one search (see :func:`start_search`).

    :meth:`listed` gives what rg found as soon as rg has exited, while ``find`` may still
    be walking the tree: a caller does its per-file work (``glob`` stats every file) in that
    time instead of after both. :meth:`extra` then gives what the walk adds to rg's list.
    """

    def __init__(
        self,
        view: TreeView,
        start: Path,
        visibility: _Visibility,
        rg: _Proc | None,
        find: _Proc | _LinkScan | _FoundLinks | None,
        where: str,
        *,
        listed: list[str] | None = None,
        times: dict[str, int] | None = None,
    ) -> None:
        self._view = view
        self._start = start
        self._visibility = visibility
        self._rg = rg
        self._find = find
        self._where = where
        self._listed: list[str] | None = None if rg is not None else (listed or [])
        self._times = times or {}
        self.base = str(start).rstrip("/") + "/"
        """The start directory's path with a trailing slash: ``base + rel`` is a file's path."""
        self.plain = True
        """Whether no listed path holds a control character (``quote_path`` leaves all as they
        are), checked on rg's output a block at a time."""
        self.failed = False
        self._reading = False

    def batches(self) -> Iterator[list[str]]:
        """The regular files rg found (for a pattern: those holding it, not over the size cap),
        as paths relative to the start directory (posix), in no order and a block at a time
        while rg still walks the tree; an overlay file shadows the real one (:meth:`extra`
        lists it). Afterwards :attr:`failed` says whether rg failed (use the walk then)."""
        if self._listed is not None:
            yield self._listed
            return
        rg = self._rg
        if rg is None or self._reading:
            return
        self._reading = True  # once; close() still ends rg if the caller stops early
        cut = len(self._where) + 1 if self._where != "." else 2
        gone = {str(p) for p in self._view.overlay_files()}
        base = self.base
        # rg lists real files only (it follows no link); specrun's own state below the start
        # directory is left out, as the walk leaves it out.
        tops = () if self._view.shows_private else self._view.reach.private
        private = tuple(top[len(base) :] + "/" for top in tops if top.startswith(base))
        listed: list[str] = []
        pending = b""
        for chunk in rg.chunks():
            data = pending + chunk
            end = data.rfind(b"\0") + 1
            pending = data[end:]
            if not end:
                continue
            block = data[:end]
            if self.plain and not _plain_bytes(block):
                self.plain = False
            rels = [entry[cut:] for entry in os.fsdecode(block).split("\0") if entry]
            if gone:
                rels = [rel for rel in rels if base + rel not in gone]
            if private:
                rels = [rel for rel in rels if not rel.startswith(private)]
            listed += rels
            yield rels
        code, out, err = rg.output()
        self._rg = None
        tail = pending + out  # no stream (no memfd_create): all of it is here
        if tail:
            rels = [e[cut:] for e in os.fsdecode(tail).split("\0") if e]
            rels = [rel for rel in rels if base + rel not in gone]
            if private:
                rels = [rel for rel in rels if not rel.startswith(private)]
            self.plain = self.plain and _plain_bytes(tail)
            listed += rels
            yield rels
        failed = code not in (0, 1) and not listed  # a bad argument, an unreadable start
        if failed or b"regex parse error" in err or b"error parsing" in err:
            self.failed = True
            self.close()
            return
        self._listed = listed

    def listed(self) -> list[str] | None:
        """All of :meth:`batches` in one list, or ``None``: rg failed, use the walk."""
        if self._listed is None and not self.failed:
            for _ in self.batches():
                pass
        return None if self.failed else self._listed

    def times(self) -> dict[str, int]:
        """Modification times (ns) the walk of a :func:`plain_listing` took, by path relative
        to the start directory; empty for rg (the caller stats what it lists)."""
        return self._times

    def extra(self, listed: Collection[str] | None = None) -> list[Hit] | None:
        """What the walk visits beyond :meth:`listed`: symlinks that are not directories,
        files over the size cap (for a pattern), and the overlay's files below the start
        directory, each where the walk's ignore rules let it be seen; ``None``: use the
        walk. ``listed``: rg's list, when the caller has it at hand (a file rg listed is not
        repeated)."""
        if listed is None:
            listed = self.listed()
            if listed is None:
                return None
        hits: list[Hit] = []
        start = self._start
        if self._find is not None:
            found = self._find.paths()
            self._find = None
            if found is None:
                return None
            root = self._view.root
            overlay = self._view.overlay_files()
            seen: set[str] | None = None
            for raw in found:
                path = Path(os.path.normpath(root / raw))
                if path == start or path in overlay or self._view.hides(path):
                    continue
                is_dir = os.path.isdir(path)
                if not self._visibility.visible(path, is_dir):
                    continue
                if os.path.islink(path) and not self._view.vet(path):
                    continue  # named by the caller, never read
                if is_dir:
                    continue  # a symlink to a directory: the walk does not follow those
                rel = path.relative_to(start).as_posix()
                if seen is None:  # rare: a symlink or a big file; a file may have grown
                    seen = set(listed)  # past the cap between rg's look and find's
                if rel not in seen:
                    seen.add(rel)
                    logical = str(path)
                    hits.append(Hit(rel, logical, logical))
        for logical_path, physical in self._view.overlay_files().items():
            below = logical_path.is_relative_to(start) and logical_path != start
            if below and self._visibility.visible(logical_path):
                rel = logical_path.relative_to(start).as_posix()
                hits.append(Hit(rel, str(logical_path), str(physical)))
        return hits

    def close(self) -> None:
        if self._rg is not None:
            self._rg.close()
        if self._find is not None:
            self._find.close()
        self._rg = self._find = None

    def __enter__(self) -> FileSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CONTROL_BYTES = re.compile(rb"[\x01-\x1f\x7f]")  # NUL separates rg's paths


def _plain_bytes(block: bytes) -> bool:
    """Whether no path in rg's ``block`` needs ``quote_path``: no control character and no
    byte that is not UTF-8 (shown as an escape, it must be quoted as the walk quotes it)."""
    if _CONTROL_BYTES.search(block) is not None:
        return False
    if block.isascii():
        return True
    try:
        block.decode()
    except UnicodeDecodeError:
        return False
    return True


def start_search(
    view: TreeView,
    start: Node,
    *,
    pattern: str | None = None,
    name: str | None = None,
    max_depth: int | None = None,
    max_filesize: int | None = None,
) -> FileSearch | None:
    """rg and ``find`` started on directory ``start`` (see :func:`find_files` for the
    arguments), or ``None`` when rg cannot stand in for the walk (see the module's
    docstring). Close the search (a ``with`` block) if it is not read to its end."""
    root = view.root
    binary, finder = rg_binary(root), _find_binary(root)
    if binary is None or finder is None or not start.path.is_relative_to(root):
        return None
    overlay = view.overlay_files()
    if any(p.name == ".gitignore" for p in overlay):
        return None
    rg_pattern = None if pattern is None else rust_pattern(pattern)
    if pattern is not None and rg_pattern is None:
        return None
    no_ignore = start.path != root and IgnoreRules.at(view, start.path).ignored(start.path, True)
    if not no_ignore and not _mirrors_ignore_rules(root):
        return None

    visibility = _Visibility(view, start.path, no_ignore)
    rel_start = os.path.relpath(start.path, root)
    where = "." if rel_start == "." else "./" + rel_start
    if not os.path.isdir(start.path):  # only in the overlay: nothing for rg to list
        return FileSearch(view, start.path, visibility, None, None, where)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIPGREP_")}
    argv = _rg_argv(
        binary,
        root,
        where,
        pattern=rg_pattern,
        no_ignore=no_ignore,
        name=name,
        max_depth=max_depth,
        max_filesize=max_filesize,
    )
    try:
        rg = _Proc(argv, root, env, stream=True)
    except OSError:
        return None
    pruned = () if no_ignore else _ignored_dir_names(root)
    if max_filesize is None:  # a listing: only the symlinks are wanted, no size test
        links = _LinkScan(str(start.path), where, max_depth, name, pruned)
        return FileSearch(view, start.path, visibility, rg, links, where)
    try:
        find = _Proc(_find_argv(finder, where, max_filesize, max_depth, name, pruned), root)
    except OSError:
        rg.close()
        return None
    return FileSearch(view, start.path, visibility, rg, find, where)


def plain_listing(
    view: TreeView,
    start: Node,
    *,
    name: str | None = None,
    max_depth: int | None = None,
) -> FileSearch | None:
    """A listing of directory ``start`` (``name`` and ``max_depth`` as for
    :func:`find_files`) done by one walk in this process (:mod:`worker.tools.listing_walk`),
    with every listed file's modification time (:meth:`FileSearch.times`), already complete
    when returned; or ``None`` when that walk does not apply: an ignore file in force that is
    not plain (:mod:`worker.tools.plain_ignore`), one written in the overlay, a start that is
    a link, outside the project or only in the overlay, a directory that could not be read.
    Then :func:`start_search` (rg) or the walk answers."""
    root, top = view.root, start.path
    if not top.is_relative_to(root) or os.path.islink(top) or not os.path.isdir(top):
        return None
    if "\n" in str(top.relative_to(root)):  # pathspec matches no rule across a newline
        return None
    if any(p.name == ".gitignore" for p in view.overlay_files()):
        return None
    no_ignore = top != root and IgnoreRules.at(view, top).ignored(top, True)
    chain = None if no_ignore else _plain_chain(view, top)
    if not no_ignore and chain is None:
        return None
    base = str(top).rstrip("/") + "/"
    # specrun's own state below the start is not entered (rg's list leaves it out the same way)
    tops = () if view.shows_private else view.reach.private
    private = [top_[len(base) :] + "/" for top_ in tops if top_.startswith(base)]
    names = _name_alternatives(name)
    wanted = NameTest(regex=_name_regex(name))
    if names is not None and all(one.startswith("*") and "*" not in one[1:] for one in names):
        wanted = NameTest(suffixes=tuple(one[1:] for one in names))  # "*.py": cheaper

    def read_rules(path: str) -> PlainRules | None:
        return _plain_ignore_file(view, Path(path))

    found = walk_listing(
        str(top),
        chain,
        read_rules,
        max_depth=max_depth,
        wanted=wanted,
        links_named=_name_regex(name),
        left_out=private,
    )
    if found is None or found.failed:
        return None
    times = found.files
    listed = list(times)
    gone = {str(p) for p in view.overlay_files()}
    if gone:
        listed = [rel for rel in listed if base + rel not in gone]
    rel_start = os.path.relpath(top, root)
    where = "." if rel_start == "." else "./" + rel_start
    visibility = _Visibility(view, top, no_ignore)
    search = FileSearch(
        view, top, visibility, None, _FoundLinks(found.links), where, listed=listed, times=times
    )
    search.plain = _CONTROL_TEXT.search("".join(listed)) is None
    return search


_CONTROL_TEXT = re.compile("[\x01-\x1f\x7f\udc80-\udcff]")  # what quote_path quotes


def _plain_ignore_file(view: TreeView, path: Path, node: Node | None = None) -> PlainRules | None:
    """The rules of the ignore file at ``path`` as the walk reads it (through the read rule;
    none when it is missing, a directory or unreadable), or ``None`` when it is not plain."""
    if node is None:
        node = view.node(path)
    if node is None or node.is_dir:
        return PlainRules()
    try:
        text = view.read_bytes(node).decode("utf-8", errors="replace")
    except OSError:
        return PlainRules()
    return plain_rules(text.splitlines())


def _plain_chain(view: TreeView, top: Path) -> RuleChain | None:
    """The plain rules in force in ``top`` (the ignore files :meth:`IgnoreRules.at` reads),
    or ``None`` when one of them is not plain."""
    root = view.root
    info = root / ".git" / "info" / "exclude"
    files = [(root, _plain_ignore_file(view, info, Node(info, info, is_dir=False)))]
    levels = [root, *(root / part for part in _prefixes(top, root))]
    files += [(level, _plain_ignore_file(view, level / ".gitignore")) for level in levels]
    inherited: list[PlainRules] = []
    own: list[PlainRules] = []
    for level, rules in files:
        if rules is None:
            return None
        (own if level == top else inherited).append(rules)
    merged = PlainRules(
        anywhere=tuple(p for rules in own for p in rules.anywhere),
        anywhere_dirs=tuple(p for rules in own for p in rules.anywhere_dirs),
        here=tuple(p for rules in own for p in rules.here),
        here_dirs=tuple(p for rules in own for p in rules.here_dirs),
    )
    return RuleChain(tuple(inherited), merged)


def _prefixes(path: Path, root: Path) -> list[str]:
    """The directories from ``root`` down to ``path``, relative to ``root``."""
    parts = path.relative_to(root).parts
    return [os.path.join(*parts[: i + 1]) for i in range(len(parts))]


def find_files(
    view: TreeView,
    start: Node,
    *,
    pattern: str | None = None,
    name: str | None = None,
    max_depth: int | None = None,
    max_filesize: int | None = None,
    ordered: bool = True,
) -> list[Hit] | None:
    """The files below directory ``start`` that ``walk_files(view, start)`` yields and that
    can matter, in the walk's order; ``None`` when rg cannot stand in for the walk (see the
    module's docstring).

    ``pattern`` (Python syntax): only files rg finds it in, plus files over ``max_filesize``
    (rg skips them; the caller reports them). ``name``: only files whose name matches this
    glob (see :func:`name_glob`). ``max_depth``: files at most this many levels down.
    Symlinks that are not directories and overlay files are always included: the caller
    checks them as it checks the walk's files. ``ordered=False``: in any order.
    """
    search = start_search(
        view,
        start,
        pattern=pattern,
        name=name,
        max_depth=max_depth,
        max_filesize=max_filesize,
    )
    if search is None:
        return None
    with search:
        listed = search.listed()
        extra = None if listed is None else search.extra(listed)
    if listed is None or extra is None:
        return None
    base = search.base
    hits = [Hit(rel, base + rel, base + rel) for rel in listed]
    hits += extra
    if not ordered:
        return hits
    return sorted(hits, key=lambda hit: hit.rel.split("/"))
