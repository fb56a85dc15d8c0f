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
* the project's venvs (``.venv``, ``venv`` and ``$VIRTUAL_ENV``): the ``home`` of their
  ``pyvenv.cfg`` and every hop of their ``bin/python`` symlink chain;
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

Never shown, whatever names it: ``$HOME`` itself or a directory above it, a path holding
or inside a secret store of the home directory (:data:`HOME_SECRETS`: ``~/.ssh``,
``~/.gnupg``, cloud and registry credentials, ``~/.config``, ``~/.specrun``...), ``/proc``,
``/sys``, ``/dev``, ``/run``, specrun's own runtime and speculation directories, anything
holding the project (whose view would be hidden) — and more than
:data:`MAX_EXPOSED` paths. System directories (``/usr``, ``/opt``...) and the project are
visible anyway and need nothing.

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
)
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
        for path in (*NEVER_SHOWN, *self.private):
            if _inside(real, path):
                return "a system or specrun runtime directory"
        return None

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


def _venv_home(venv: str) -> str | None:
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8") as cfg:
            for line in cfg:
                key, sep, value = line.partition("=")
                if sep and key.strip() == "home" and os.path.isabs(value.strip()):
                    return value.strip()
    except (OSError, UnicodeDecodeError):
        return None
    return None


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
    finder = _Finder(
        os.path.realpath(project), home, environ, tuple(os.path.realpath(p) for p in private)
    )
    entries = [e for e in environ.get("PATH", "").split(":") if os.path.isabs(e)]
    work: list[str] = list(entries)
    for venv in _venvs(finder.project, environ):
        home_dir = _venv_home(venv)
        if home_dir is not None:
            work.append(home_dir)
            work.extend(link_chain(os.path.join(venv, "bin", "python")))
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
