"""Files that run later without a key press: Tab writes them now, something runs them later.

A speculation's edit to such a file is applied like any other, but its effect comes later,
outside specrun: when the shell enters the directory (``.envrc``), at the next commit or push
(``.husky/``, ``.pre-commit-config.yaml``), in CI (``.github/workflows/``, ``.gitlab-ci.yml``),
when the editor opens the folder (``.vscode/``, ``.idea/``), or when the tests or the build
run (``conftest.py``, ``setup.py``, ``noxfile.py``, ``tox.ini``, ``Makefile``,
``package.json`` scripts, ``pyproject.toml`` build backends, ``build.rs``, ``Cargo.toml``).
The accept listing flags them on a line of their own, and the ``runsLaterBoundary`` setting
makes writing one a boundary instead. A file given an exec bit counts as well.

``.git/hooks`` is not listed: nothing under ``.git`` is ever applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import pathspec

from protocol.wire.boundary import BoundaryReason

#: Gitignore-style patterns (a pattern without ``/`` matches at any depth).
DEFAULT_RUNS_LATER: tuple[str, ...] = (
    ".envrc",
    ".env",
    ".husky/",
    ".githooks/",
    ".pre-commit-config.yaml",
    ".github/workflows/",
    ".github/actions/",
    ".gitlab-ci.yml",
    ".circleci/",
    ".vscode/tasks.json",
    ".vscode/settings.json",
    ".vscode/launch.json",
    ".idea/",
    "*.code-workspace",
    "conftest.py",
    "setup.py",
    "setup.cfg",
    "noxfile.py",
    "tox.ini",
    "pytest.ini",
    "pyproject.toml",
    "sitecustomize.py",
    "*.pth",
    "Makefile",
    "GNUmakefile",
    "package.json",
    ".npmrc",
    "build.rs",
    "Cargo.toml",
    ".cargo/config.toml",
    ".cargo/config",
    "Justfile",
    "justfile",
)


@lru_cache(maxsize=16)
def _spec(extra: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines((*DEFAULT_RUNS_LATER, *extra))


def runs_later(rel: str, extra: Sequence[str] = (), *, executable: bool = False) -> bool:
    """Whether a change to ``rel`` takes effect later without a key press: it matches the
    default list or ``extra`` (the ``runsLaterPaths`` setting), or it is ``executable``
    (the change leaves an exec bit that was not there)."""
    return executable or _spec(tuple(extra)).match_file(rel)


def runs_later_reason(
    rel: str, extra: Sequence[str] = (), *, executable: bool = False
) -> BoundaryReason | None:
    """The boundary reason ``runs_later`` ``rel`` when ``runsLaterBoundary`` is on and a
    speculation writes such a file, else None."""
    if runs_later(rel, extra, executable=executable):
        return BoundaryReason("runs_later", rel)
    return None
