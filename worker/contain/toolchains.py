"""Which of the user's toolchains a speculation's writable shell can see, read-only.

A captured command (the opt-in ``speculateShell``) should run the same programs as the
user's own terminal: the ``python3`` of pyenv, the interpreter a project's venv links to,
``cargo`` and the rustup toolchain behind it, nvm's ``node``, uv-managed Pythons. Those
live in ``$HOME``, which the sandbox never shows. This module picks, outside the sandbox,
the few host paths to show read-only at their own place (``View.toolchains``), and the
``PATH`` and the handful of variables the command gets to find them.

Where the paths come from:

* every absolute directory on the user's ``PATH`` (the service's environment, which is the
  shell that started it);
* the project's venvs (``.venv``, ``venv`` and ``$VIRTUAL_ENV``): the directory of the
  interpreter their ``bin/python`` finally links to, and only when that is a known
  manager's (a pyenv version, uv's Python store) or a directory on the user's ``PATH``.
  A venv in the project came with the repository: its ``pyvenv.cfg`` ``home =`` line and
  the hops of its links are the repository's words, so they name nothing on their own
  (they once bound ``~/.gradle`` and all of ``/home``);
* symlinks in those directories that lead elsewhere (``~/.local/bin/ruff`` into uv's tool
  directory, a tool venv's ``python`` into uv's Pythons), followed until nothing new shows
  up;
* the ``toolchainPaths`` setting.

What is shown for a directory (never more):

* inside pyenv's root (``$PYENV_ROOT``, ``~/.pyenv``, or a directory a few levels up
  holding ``libexec/pyenv`` and ``versions/``): one installed version
  (``versions/X``) when the path is inside it, else the whole root (its shims run
  ``libexec/pyenv``, which reads ``version`` and ``versions/``);
* cargo's ``bin`` (``$CARGO_HOME/bin`` or ``~/.cargo/bin``): that directory, plus rustup's
  ``toolchains/`` and ``settings.toml``, and cargo's downloaded ``registry/`` and ``git/``
  (:func:`_add_dependency_stores`, which shows Maven's ``~/.m2/repository`` too), never the
  rest of ``~/.cargo`` (its ``credentials.toml``, ``config.toml``) or of ``~/.rustup``;
* any other ``<prefix>/bin``: it and ``<prefix>/lib`` (``lib64``) beside it, where an
  interpreter keeps its standard library and packages (nvm's ``versions/node/X``, uv's
  Pythons, ``~/.local``), unless ``<prefix>`` is ``$HOME`` itself; any other directory
  alone.

Never shown, whatever names it: ``$HOME`` itself or a directory above it, a parent of
many users' or many tools' files (:data:`SHARED_ROOTS`: ``/home``, ``/var/lib``,
``/srv``, ``/tmp``...; :data:`HOME_PARENTS`: ``~/.cache``, ``~/.local``...), a path
holding or inside a secret store of the home directory (:data:`HOME_SECRETS`: ``~/.ssh``,
``~/.gnupg``, cloud and registry credentials, ``~/.config``, ``~/.specrun``, tools'
credentials such as ``~/.gradle/gradle.properties``, shell histories...), ``/proc``,
``/sys``, ``/dev``, ``/run``, a path holding or inside specrun's own runtime, state
(``$XDG_STATE_HOME/specrun``) and speculation directories, anything holding the project
(whose view would be hidden) — and more than :data:`MAX_EXPOSED` paths. System
directories (``/usr``, ``/opt``...) and the project are visible anyway and need nothing.

``HOME`` stays the command's private ``/tmp`` (tools write their caches there and lose
them with the command); so the managers that find their root through ``$HOME`` get it
named: ``PYENV_ROOT``, ``RUSTUP_HOME``; the user's ``PYENV_VERSION``,
``RUSTUP_TOOLCHAIN`` and ``VIRTUAL_ENV`` (when visible) pass through.

:func:`missing_program` reads a finished command's errors for a program that the view
lacks but the host has: the speculation then stops (``toolchain_missing:<program>``) so
that Tab runs the prompt for real instead of showing "command not found".
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from worker.contain.mounts import SYSTEM_DIRS
from worker.shell.runner import READ_ONLY_PATH

# Relative to $HOME: never shown, nor any directory that holds one of them.
HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".config",
    ".password-store",
    ".local/share/keyrings",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".yarnrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".terraform.d",
    ".vault-token",
    ".specrun",
    ".gradle/gradle.properties",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".pgpass",
    ".my.cnf",
    ".local/state",
)
#: Parents of many users' or many services' files: never shown whole, whatever names them.
SHARED_ROOTS = ("/home", "/root", "/var", "/var/lib", "/srv", "/mnt", "/media", "/tmp",
                "/var/tmp", "/opt")
#: Relative to $HOME: parents of many tools' files (caches, data), never shown whole.
HOME_PARENTS = (".cache", ".local", ".local/share", ".local/share/uv")
#: Relative to $HOME: where uv keeps the Pythons it installs (``UV_PYTHON_INSTALL_DIR``).
UV_PYTHONS = ".local/share/uv/python"
NEVER_SHOWN = ("/proc", "/sys", "/dev", "/run")
# Stores of downloaded dependencies a build reads, relative to $HOME: what the user's
# earlier builds fetched, so that an offline build in the sandbox finds them (the sandbox
# has no network to fetch them again). Never the tool's configuration or credentials
# beside them (``~/.m2/settings.xml``, ``~/.cargo/credentials.toml``).
MAVEN_REPOSITORY = ".m2/repository"
CARGO_STORES = ("registry", "git")  # below $CARGO_HOME
MAX_EXPOSED = 64
_MAX_LINKS_SCANNED = 2000
_MAX_HOPS = 40
_PYENV_DEPTH = 4  # plugins/<name>/shims is three below the root
# Variables the user's shell may set that select a toolchain: passed through unchanged.
PASSED_THROUGH = ("PYENV_VERSION", "RUSTUP_TOOLCHAIN")


@dataclass(frozen=True)
class ToolchainView:
    """What a captured command gets: host paths bound read-only at their own place, its
    ``PATH``, extra variables, and what was asked for but refused (path, why)."""

    binds: tuple[str, ...] = ()
    path: str = READ_ONLY_PATH
    env: tuple[tuple[str, str], ...] = ()
    refused: tuple[tuple[str, str], ...] = ()


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass
class _Finder:
    project: str
    home: str
    environ: Mapping[str, str]
    private: tuple[str, ...]
    exposed: list[str] = field(default_factory=list)
    on_path: set[str] = field(default_factory=set)  # real paths of the user's PATH entries
    refused: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        env = self.environ
        self.pyenv = os.path.realpath(env.get("PYENV_ROOT") or os.path.join(self.home, ".pyenv"))
        self.cargo = os.path.realpath(env.get("CARGO_HOME") or os.path.join(self.home, ".cargo"))
        self.rustup = os.path.realpath(
            env.get("RUSTUP_HOME") or os.path.join(self.home, ".rustup")
        )
        self.system = tuple(sorted({os.path.realpath(d) for d in SYSTEM_DIRS}))
        self.secrets = tuple(os.path.join(self.home, rel) for rel in HOME_SECRETS)
        self.parents = {
            *(os.path.realpath(d) for d in SHARED_ROOTS),
            *(os.path.join(self.home, rel) for rel in HOME_PARENTS),
        }
        self.uv_pythons = os.path.realpath(
            env.get("UV_PYTHON_INSTALL_DIR") or os.path.join(self.home, UV_PYTHONS)
        )

    def visible(self, real: str) -> bool:
        """Shown anyway: a system directory or the project."""
        return any(_inside(real, d) for d in self.system) or _inside(real, self.project)

    def refusal(self, real: str) -> str | None:
        if real == "/" or _inside(self.home, real):
            return "the home directory (or above): only toolchains inside it are shown"
        if _inside(self.project, real):
            return "it holds the project"
        for secret in self.secrets:
            if _inside(real, secret) or _inside(secret, real):
                return f"a secret store ({os.path.relpath(secret, self.home)}) is in it"
        if real in self.parents:
            return "a parent of many users' or tools' files: only a toolchain inside it is shown"
        for path in NEVER_SHOWN:
            if _inside(real, path):
                return "a system directory"
        for path in self.private:
            if _inside(real, path) or _inside(path, real):
                return "specrun's own runtime, state or speculation directory is in it"
        return None

    def known_interpreter(self, real: str) -> bool:
        """Whether ``real`` (the directory of a venv's interpreter) is a toolchain the host
        itself has: a pyenv version, a uv-managed Python, a system directory, or a
        directory on the user's ``PATH``."""
        pyenv = self.pyenv_root(real)
        if pyenv is not None and _inside(real, os.path.join(pyenv, "versions")):
            return True
        if _inside(real, self.uv_pythons) and real != self.uv_pythons:
            return True
        return (self.visible(real) and not _inside(real, self.project)) or real in self.on_path

    def pyenv_root(self, real: str) -> str | None:
        """The pyenv root ``real`` is in: ``$PYENV_ROOT`` or ``~/.pyenv``, or an ancestor
        laid out as one (its shims name their root themselves, whatever ``$HOME`` is)."""
        if _inside(real, self.pyenv):
            return self.pyenv
        candidate = real
        for _ in range(_PYENV_DEPTH):
            if os.path.isfile(os.path.join(candidate, "libexec", "pyenv")) and os.path.isdir(
                os.path.join(candidate, "versions")
            ):
                return candidate
            candidate = os.path.dirname(candidate)
        return None

    def exposures(self, real: str) -> list[str]:
        """What to show for ``real`` (see the module's rules)."""
        pyenv = self.pyenv_root(real)
        if pyenv is not None:
            versions = os.path.join(pyenv, "versions")
            if _inside(real, versions) and real != versions:
                name = os.path.relpath(real, versions).split("/")[0]
                return [os.path.join(versions, name)]
            self.env["PYENV_ROOT"] = pyenv
            return [pyenv]
        if _inside(real, os.path.join(self.cargo, "bin")):
            shown = [os.path.join(self.cargo, "bin")]
            parts = [os.path.join(self.rustup, n) for n in ("toolchains", "settings.toml")]
            if all(os.path.exists(p) for p in parts):
                # rustup creates update-hashes/ on every start: shown (read-only) if it is there
                hashes = os.path.join(self.rustup, "update-hashes")
                shown += parts + ([hashes] if os.path.isdir(hashes) else [])
                self.env["RUSTUP_HOME"] = self.rustup
            return shown
        toolchains = os.path.join(self.rustup, "toolchains")
        if _inside(real, toolchains) and real != toolchains:
            return [os.path.join(toolchains, os.path.relpath(real, toolchains).split("/")[0])]
        prefix = os.path.dirname(real)
        if os.path.basename(real) == "bin" and prefix not in ("/", self.home):
            libs = [os.path.join(prefix, n) for n in ("lib", "lib64")]
            return [real] + [lib for lib in libs if os.path.isdir(lib)]
        return [real]

    def add(self, candidate: str) -> list[str]:
        """Show ``candidate`` if the rules allow; returns the directories newly shown."""
        real = os.path.realpath(candidate)
        if real in self.seen or not os.path.exists(real):
            return []
        self.seen.add(real)
        if self.visible(real) or any(_inside(real, e) for e in self.exposed):
            return []
        why = self.refusal(real)
        if why is not None:
            self.refused[real] = why
            return []
        new: list[str] = []
        for path in self.exposures(real):
            why = self.refusal(path)
            if why is not None:
                self.refused[path] = why
            elif not any(_inside(path, e) for e in self.exposed):
                if len(self.exposed) >= MAX_EXPOSED:
                    self.refused[path] = f"more than {MAX_EXPOSED} toolchain paths"
                    continue
                self.exposed[:] = [e for e in self.exposed if not _inside(e, path)]
                self.exposed.append(path)
                new.append(path)
        return new

    def shows(self, real: str) -> bool:
        return self.visible(real) or any(_inside(real, e) for e in self.exposed)


def _venvs(project: str, environ: Mapping[str, str]) -> Iterator[str]:
    for name in (".venv", "venv"):
        yield os.path.join(project, name)
    active = environ.get("VIRTUAL_ENV")
    if active and os.path.isabs(active):
        yield active


def _venv_interpreter(venv: str) -> str | None:
    """The real directory of the interpreter ``venv/bin/python`` finally is (an executable
    regular file), or None. Its ``pyvenv.cfg`` is not read: what it says is the words of
    whoever wrote the venv (in a cloned project, the repository)."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.lexists(python):
        python = os.path.join(venv, "bin", "python3")
    real = os.path.realpath(python)
    if not (os.path.isfile(real) and os.access(real, os.X_OK)):
        return None
    return os.path.dirname(real)


def specrun_dirs(environ: Mapping[str, str], home: str) -> tuple[str, ...]:
    """specrun's own directories on the host, from the user's environment: its state root
    (``$XDG_STATE_HOME/specrun``, else ``~/.local/state/specrun``) and the speculation
    base (``<tmp>/specrun-speculation-<uid>``)."""
    state = environ.get("XDG_STATE_HOME", "")
    root = state if os.path.isabs(state) else os.path.join(home, ".local", "state")
    tmp = environ.get("TMPDIR", "")
    base = tmp if os.path.isabs(tmp) else tempfile.gettempdir()
    return (os.path.join(root, "specrun"),
            os.path.join(base, f"specrun-speculation-{os.geteuid()}"))


def link_chain(path: str) -> list[str]:
    """The directories of every hop of a symlink chain (``path`` first), as real paths."""
    dirs: list[str] = []
    current = path
    for _ in range(_MAX_HOPS):
        dirs.append(os.path.realpath(os.path.dirname(current)))
        if not os.path.islink(current):
            break
        try:
            target = os.readlink(current)
        except OSError:
            break
        current = os.path.join(os.path.dirname(current), target)
    return dirs


def _link_targets(directory: str) -> list[str]:
    """Where the symlinks directly in ``directory`` lead (their final directories)."""
    out: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= _MAX_LINKS_SCANNED:
                    break
                if entry.is_symlink():
                    for hop in link_chain(entry.path)[1:]:
                        if not _inside(hop, directory):
                            out.append(hop)
    except OSError:
        return []
    return out


def _add_dependency_stores(finder: _Finder) -> None:
    """Maven's local repository (Java finds it through the passwd home directory, which
    is the user's, so it is shown at its own place), and, when cargo is shown, cargo's
    registry and git checkouts, with ``CARGO_HOME`` naming where they are (``$HOME`` is
    the command's private ``/tmp``)."""
    maven = os.path.join(finder.home, MAVEN_REPOSITORY)
    if os.path.isdir(maven):
        finder.add(maven)
    if not any(_inside(os.path.join(finder.cargo, "bin"), e) for e in finder.exposed):
        return
    stores = [os.path.join(finder.cargo, name) for name in CARGO_STORES]
    for store in stores:
        if os.path.isdir(store):
            finder.add(store)
    if any(finder.shows(os.path.realpath(store)) for store in stores):
        finder.env["CARGO_HOME"] = finder.cargo


def toolchain_view(
    project: str,
    environ: Mapping[str, str],
    extra: Sequence[str] = (),
    private: Sequence[str] = (),
) -> ToolchainView:
    """The toolchains to show a captured command of ``project``, from ``environ`` (the
    user's ``PATH``, ``HOME``, the managers' variables), the project's venvs and ``extra``
    (the ``toolchainPaths`` setting). ``private``: specrun's own directories, never shown."""
    home = os.path.realpath(environ.get("HOME") or os.path.expanduser("~"))
    own = (*private, *specrun_dirs(environ, home))
    finder = _Finder(
        os.path.realpath(project), home, environ, tuple(os.path.realpath(p) for p in own)
    )
    entries = [e for e in environ.get("PATH", "").split(":") if os.path.isabs(e)]
    finder.on_path = {os.path.realpath(e) for e in entries}
    work: list[str] = list(entries)
    for venv in _venvs(finder.project, environ):
        interpreter = _venv_interpreter(venv)
        if interpreter is None or _inside(interpreter, finder.project):
            continue  # none, or inside the project: shown anyway
        if finder.known_interpreter(interpreter):
            work.append(interpreter)
        else:  # named by a file in the project (or a venv elsewhere): not the host's
            finder.refused[interpreter] = (
                "a venv's interpreter outside the known toolchains (pyenv, uv, PATH)")
    work.extend(os.path.expanduser(p) for p in extra if os.path.isabs(os.path.expanduser(p)))
    for p in extra:
        if not os.path.isabs(os.path.expanduser(p)):
            finder.refused[p] = "not an absolute path"
    while work:
        for shown in finder.add(work.pop(0)):
            if os.path.isdir(shown) and os.path.basename(shown) == "bin":
                work.extend(_link_targets(shown))
    _add_dependency_stores(finder)
    path: list[str] = []
    for entry in [*entries, *READ_ONLY_PATH.split(":")]:
        real = os.path.realpath(entry)
        if not os.path.isdir(real) or not finder.shows(real):
            continue
        shown_as = entry if any(_inside(entry, d) for d in SYSTEM_DIRS) else real
        if shown_as not in path:
            path.append(shown_as)
    env = dict(finder.env)
    for name in PASSED_THROUGH:
        if environ.get(name):
            env[name] = environ[name]
    active = environ.get("VIRTUAL_ENV")
    if active and os.path.isabs(active) and finder.shows(os.path.realpath(active)):
        env["VIRTUAL_ENV"] = active
    return ToolchainView(
        binds=tuple(sorted(finder.exposed)),
        path=":".join(path),
        env=tuple(sorted(env.items())),
        refused=tuple(sorted(finder.refused.items())),
    )


# bash's own words for a program it could not start, from the command's top-level shell
# (its name first), and env's for a program a shebang names.
_NOT_FOUND = re.compile(r"^(?P<shell>[^:\n]+): line \d+: (?P<prog>[^\n]+?): command not found$")
_NO_FILE = re.compile(
    r"^(?P<shell>[^:\n]+): line \d+: (?P<prog>[^\n]+?): No such file or directory$"
)
_BAD_INTERPRETER = re.compile(
    r"^(?P<shell>[^:\n]+): line \d+: [^\n]+?: (?P<prog>/[^\n:]+): bad interpreter: "
    r"No such file or directory$"
)
_ENV = re.compile(r"^/usr/bin/env: ['‘](?P<prog>[^'’\n]+)['’]: No such file or directory$")


def _candidates(stderr: str, shell: str) -> Iterator[str]:
    for line in stderr.splitlines():
        for pattern in (_NOT_FOUND, _NO_FILE, _BAD_INTERPRETER):
            match = pattern.match(line)
            if match is not None and match.group("shell") == shell:
                yield match.group("prog")
        match = _ENV.match(line)
        if match is not None:
            yield match.group("prog")


def missing_program(stderr: str, shell: str, cwd: str, host_path: str) -> str | None:
    """The first program the command could not start although the host has it (a name
    found on ``host_path``, or a path that exists outside the sandbox), or None.
    ``shell``: the name the top-level bash reports itself by (its ``argv[0]``)."""
    for prog in _candidates(stderr, shell):
        if "/" in prog:
            if os.path.exists(os.path.join(cwd, prog)):
                return prog
        elif shutil.which(prog, path=host_path) is not None:
            return prog
    return None
