"""scripts/fuzz_shell.py: the tracer catches what it must, and a short deterministic run is clean.

Skipped (with the reason) where strace, unshare or user namespaces are not available; see
scripts/_system_deps.sh, which installs strace.
"""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import containment_unavailable, needs_containment

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_shell", ROOT / "scripts" / "fuzz_shell.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_shell"] = module
    spec.loader.exec_module(module)
    return module


fuzz_shell = _load()


def _skip_reason() -> str | None:
    missing = fuzz_shell.missing_tools()
    if missing:
        return f"missing tools: {', '.join(missing)} (scripts/_system_deps.sh installs strace)"
    return fuzz_shell.isolation_works()


SKIP = _skip_reason()
needs_tracer = needs_containment(SKIP)


def test_generator_is_deterministic() -> None:
    corpus = fuzz_shell.load_corpus()
    assert len(corpus) > 500
    first = list(itertools.islice(fuzz_shell.commands(5, corpus), 200))
    again = list(itertools.islice(fuzz_shell.commands(5, corpus), 200))
    assert first == again
    assert len(set(first)) > 150


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if SKIP is not None:
        containment_unavailable(SKIP)
    base = tmp_path_factory.mktemp("fuzz")
    yield fuzz_shell.make_template(base)
    shutil.rmtree(base, ignore_errors=True)


@needs_tracer
@pytest.mark.parametrize(
    ("command", "names", "kind"),
    [
        ("echo x > out", ["echo"], "open-write"),
        ("rm notes.txt", ["rm"], "unlinkat"),
        ("cat </dev/tcp/127.0.0.1/9", ["cat"], "connect"),
        ("awk 'BEGIN { print 1 | \"cat\" }'", ["awk"], "execve"),
        ("kill -0 1", ["kill"], "kill"),
        ("chmod +x notes.txt", ["chmod"], "fchmodat"),
        ("mv notes.txt n2", ["mv"], "renameat2"),
    ],
)
def test_tracer_catches_effects(
    template: Path, tmp_path: Path, command: str, names: list[str], kind: str
) -> None:
    """Fed commands that do write, connect, exec or signal, the analysis reports each."""
    work, scratch = tmp_path / "w", tmp_path / "s"
    shutil.copytree(template, work, symlinks=True)
    scratch.mkdir()
    result = fuzz_shell.run_traced(command, work, scratch, 10)
    kinds = {f.kind for f in fuzz_shell.analyse(command, names, result, scratch, work)}
    assert kinds & {kind, kind.rstrip("at2"), kind.rstrip("at")}, kinds
    assert (work / "notes.txt").exists()  # the project copy is read-only


@needs_tracer
def test_git_read_commands_are_clean(template: Path, tmp_path: Path) -> None:
    work, scratch = tmp_path / "w", tmp_path / "s"
    shutil.copytree(template, work, symlinks=True)
    scratch.mkdir()
    command = "git status; git diff; git log -p -1; git blame README.md; git ls-files -m"
    result = fuzz_shell.run_traced(command, work, scratch, 20)
    assert result.returncode == 0
    assert fuzz_shell.analyse(command, ["git"], result, scratch, work) == []


@needs_tracer
def test_short_deterministic_run_has_no_findings() -> None:
    report = fuzz_shell.fuzz(count=300, seed=1, seconds=None, jobs=2)
    assert report.tried == 300
    assert report.executed > 50
    assert report.word_checked > 20
    assert report.findings == [], report.findings
