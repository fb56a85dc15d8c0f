"""git_config_hazard and the hardened git constants (issue 13)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from overlay import Overlay
from protocol.wire.boundary import BoundaryReason
from worker.gate import evaluate
from worker.shell import git_tree_scan
from worker.shell.git_config import (
    GIT_ENV_TO_REMOVE,
    HARDENED_GIT_ENV,
    HARDENED_GIT_OPTIONS,
    HARDENED_SUBCOMMAND_OPTIONS,
    command_uses_git,
    config_entry_runs_program,
    git_config_hazard,
    parse_git_config,
)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

PLAIN_CONFIG = """[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\thooksPath = .husky
[remote "origin"]
\turl = https://example.invalid/x.git
\tfetch = +refs/heads/*:refs/remotes/origin/*
[branch "main"]
\tremote = origin
[diff "python"]
\txfuncname = "^def .*$"
[user]
\tname = A; email = ignored
"""


def make_repo(root: Path, config: str = PLAIN_CONFIG) -> Path:
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "config").write_text(config)
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("x = 1\n")
    return root


def test_plain_repository_has_no_hazard(tmp_path: Path) -> None:
    make_repo(tmp_path)
    (tmp_path / ".gitattributes").write_text("*.py diff=python\n*.bin -text binary\n")
    assert git_config_hazard(str(tmp_path), None) is None


HAZARDS = [
    ('[filter "x"]\n\tclean = sh -c id\n', "filter.x.clean"),
    ('[filter "x"]\n\tsmudge = id\n', "filter.x.smudge"),
    ('[filter "x"]\n\tprocess = id\n', "filter.x.process"),
    ('[diff "x"]\n\ttextconv = id\n', "diff.x.textconv"),
    ('[diff "x"]\n\tcommand = id\n', "diff.x.command"),
    ("[diff]\n\texternal = id\n", "diff.external"),
    ('[merge "x"]\n\tdriver = id %A\n', "merge.x.driver"),
    ("[core]\n\tfsmonitor = ./hook\n", "core.fsmonitor"),
    ("[core]\n\tfsmonitor\n", "core.fsmonitor"),
    ("[CORE]\n\tFSMonitor = true\n", "core.fsmonitor"),
    ("[core] fsmonitor = ./hook\n", "core.fsmonitor"),
    ("[core]\n\tpager = id\n", "core.pager"),
    ("[core]\n\tattributesFile = /tmp/a\n", "core.attributesfile"),
    ("[core]\n\tsshCommand = id\n", "core.sshcommand"),
    ("[pager]\n\tlog = id\n", "pager.log"),
    ("[include]\n\tpath = other\n", "include.path"),
    ('[includeIf "gitdir:/"]\n\tpath = other\n', "includeif"),
    ("[alias]\n\tst = !id\n", "alias.st"),
    ("[gpg]\n\tprogram = id\n", "gpg.program"),
    ('[gpg "ssh"]\n\tprogram = id\n', "gpg.ssh.program"),
    ("[log]\n\tshowSignature = true\n", "log.showsignature"),
    ('[remote "o"]\n\tuploadpack = id\n', "remote.o.uploadpack"),
    ('[remote "o"]\n\tpromisor = true\n', "remote.o.promisor"),
    ("[filter.x]\n\tclean = id\n", "filter.x.clean"),
    ('[filter "x"]\n\tclean = a \\\n b\n', "filter.x.clean"),
    ("[core\n\tfsmonitor = x\n", "cannot check"),
    ("garbage line\n", "cannot check"),
]


@pytest.mark.parametrize(("config", "needle"), HAZARDS)
def test_config_hazards(tmp_path: Path, config: str, needle: str) -> None:
    make_repo(tmp_path, PLAIN_CONFIG + config)
    reason = git_config_hazard(str(tmp_path), None)
    assert reason is not None and needle in reason, reason


def test_harmless_booleans(tmp_path: Path) -> None:
    make_repo(tmp_path, PLAIN_CONFIG + "[core]\n\tfsmonitor = false\n[log]\n\tshowSignature = no\n")
    assert git_config_hazard(str(tmp_path), None) is None


def test_attributes_anywhere_and_in_the_overlay(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "p")
    (project / "src" / "deep").mkdir()
    (project / "src" / "deep" / ".gitattributes").write_text("*.py filter=x\n")
    reason = git_config_hazard(str(project), None)
    assert reason is not None and "filter=x" in reason
    (project / "src" / "deep" / ".gitattributes").unlink()
    assert git_config_hazard(str(project), None) is None
    (project / ".git" / "info" / "attributes").write_text("[attr]m filter=y\n")
    assert "filter=y" in (git_config_hazard(str(project), None) or "")
    (project / ".git" / "info" / "attributes").unlink()
    overlay = tmp_path / "overlay"
    (overlay / "src").mkdir(parents=True)
    (overlay / "src" / ".gitattributes").write_text("* filter=z\n")
    assert "filter=z" in (git_config_hazard(str(project), str(overlay)) or "")
    (overlay / "src" / ".gitattributes").unlink()
    (overlay / ".git").mkdir()
    (overlay / ".git" / "config").write_text("[core]\n\tfsmonitor = ./x\n")
    assert "core.fsmonitor" in (git_config_hazard(str(project), str(overlay)) or "")


def test_nested_submodule_worktree_and_parent_repositories(tmp_path: Path) -> None:
    outer = make_repo(tmp_path / "outer")
    project = outer / "src" / "proj"
    project.mkdir()
    assert git_config_hazard(str(project), None) is None
    (outer / ".git" / "config").write_text("[alias]\n\tx = !id\n")
    assert "alias.x" in (git_config_hazard(str(project), None) or "")
    (outer / ".git" / "config").write_text(PLAIN_CONFIG)
    nested = project / "vendor" / "lib"
    make_repo(nested, "[diff]\n\texternal = id\n")
    assert "diff.external" in (git_config_hazard(str(project), None) or "")
    (nested / ".git" / "config").write_text(PLAIN_CONFIG)
    modules = outer / ".git" / "modules" / "sub"
    modules.mkdir(parents=True)
    (modules / "config").write_text('[filter "x"]\n\tsmudge = id\n')
    assert "filter.x.smudge" in (git_config_hazard(str(outer), None) or "")
    (modules / "config").write_text(PLAIN_CONFIG)
    # a worktree: ".git" is a file pointing elsewhere, with a commondir
    wt_git = tmp_path / "wtgit"
    wt_git.mkdir()
    (wt_git / "commondir").write_text("../outer/.git\n")
    (wt_git / "config.worktree").write_text("[core]\n\tpager = id\n")
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {wt_git}\n")
    assert "core.pager" in (git_config_hazard(str(tree), None) or "")
    (wt_git / "config.worktree").unlink()
    assert git_config_hazard(str(tree), None) is None


@needs_git
def test_a_real_submodule_is_no_hazard_unless_its_work_tree_leads_out(tmp_path: Path) -> None:
    """``git submodule add`` writes ``core.worktree`` into the submodule's config under
    ``.git/modules``, pointing at its directory in the project: read-only git must still
    run in any project with a submodule, also one with a branch named ``config``. The same
    key leading out of the project is a hazard (git would read attributes from a tree
    nobody checked)."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@invalid"}  # fmt: skip

    def git(cwd: Path, *argv: str) -> None:
        subprocess.run(["git", "-c", "init.defaultBranch=main", "-c",
                        "protocol.file.allow=always", *argv],
                       cwd=cwd, env=env, check=True, capture_output=True)  # fmt: skip

    for name in ("lib", "project"):
        (tmp_path / name).mkdir()
        git(tmp_path / name, "init", "-q")
        (tmp_path / name / "a.txt").write_text("a\n")
        git(tmp_path / name, "add", "-A")
        git(tmp_path / name, "commit", "-qm", "first")
    project = tmp_path / "project"
    git(project, "submodule", "add", "-q", "../lib", "vendor/lib")
    config = project / ".git" / "modules" / "vendor" / "lib" / "config"
    assert "worktree = ../../../../vendor/lib" in config.read_text()
    git_tree_scan.forget()
    assert git_config_hazard(str(project), None) is None
    # A branch named "config" is a file .git/modules/vendor/lib/refs/heads/config: no config.
    git(project / "vendor" / "lib", "branch", "config")
    assert git_config_hazard(str(project), None) is None
    git(project, "config", "-f", str(config), "core.worktree", str(tmp_path / "lib"))
    assert "core.worktree" in (git_config_hazard(str(project), None) or "")


def test_parse_git_config() -> None:
    entries = list(parse_git_config('[a "B c"]\n\tK = v ; x\n[d.E]\nflag\n# c\n'))
    assert entries == [("a", "B c", "k", "v ; x"), ("d", "e", "flag", None)]


def test_command_uses_git() -> None:
    assert command_uses_git("git status")
    assert command_uses_git("ls && git log | head")
    assert not command_uses_git("cat .git/config")


@needs_git
def test_hardened_git_runs_no_configured_program(tmp_path: Path) -> None:
    """The constants are accepted by this git and keep a hostile config from running anything.

    The repository defines an fsmonitor hook, a pager, an external diff and a textconv, each
    of which would create a marker file; git status/diff/log -p with the hardened environment
    and options must run and create none of them.
    """
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "ran"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=m"]
    subprocess.run([*git, "init", "-q"], cwd=repo, env=env, check=True)
    (repo / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "a.txt"], cwd=repo, env=env, check=True)
    subprocess.run([*git, "commit", "-qm", "c"], cwd=repo, env=env, check=True)
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\necho ran >> {marker}\ncat\n")
    hook.chmod(0o755)
    with open(repo / ".git" / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = {hook}\n\tpager = {hook}\n"
                 f"[diff]\n\texternal = {hook}\n[diff \"t\"]\n\ttextconv = {hook}\n")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("*.txt diff=t\n")
    (repo / "a.txt").write_text("two\n")
    assert git_config_hazard(str(repo), None) is not None
    hardened = {**env, **HARDENED_GIT_ENV}
    for key in GIT_ENV_TO_REMOVE:
        hardened.pop(key, None)
    for sub, extra in (("status", ()), ("diff", None), ("log", None), ("show", None)):
        opts = HARDENED_SUBCOMMAND_OPTIONS.get(sub, ()) if extra is None else extra
        argv = ["git", *HARDENED_GIT_OPTIONS, sub, *opts]
        if sub == "log":
            argv.append("-p")
        proc = subprocess.run(argv, cwd=repo, env=hardened, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, (argv, proc.stderr)
    assert not marker.exists(), marker.read_text()
    # and the same config without hardening does run the hook (the test can fail)
    subprocess.run(["git", "diff"], cwd=repo, env=env, capture_output=True, timeout=60)
    assert marker.exists()


# -- a large generated repository: every class of hazard found, after the scan remembered it --

GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=m"]


def generated_repository(root: Path, files: int) -> Path:
    """``files`` tracked files in 16-file directories three levels deep, committed."""
    for i in range(files):
        d = root / f"p{i // 800}" / f"m{i // 160 % 5}" / f"s{i // 16 % 10}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(f"x = {i}\n")
    (root / "p0" / "m0" / ".gitattributes").write_text("*.py diff=python\n")  # tracked, harmless
    subprocess.run([*GIT, "init", "-q"], cwd=root, env=GIT_ENV, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=root, env=GIT_ENV, check=True)
    subprocess.run([*GIT, "commit", "-qm", "c"], cwd=root, env=GIT_ENV, check=True)
    return root


@pytest.fixture(scope="module")
def large_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    return generated_repository(tmp_path_factory.mktemp("large") / "repo", 4000)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


Plant = Callable[[Path, Path], None]  # (repository, overlay directory)


def _append_config(repo: Path, text: str) -> None:
    with open(repo / ".git" / "config", "a") as fh:
        fh.write(text)


def in_repo(rel: str, text: str) -> Plant:
    return lambda repo, overlay: _write(repo / rel, text)


def in_overlay(rel: str, text: str) -> Plant:
    return lambda repo, overlay: _write(overlay / rel, text)


def in_config(text: str) -> Plant:
    """``text`` appended to the repository's own .git/config."""
    return lambda repo, overlay: _append_config(repo, text)


# (what to plant, the words the reason must name); each undone after its test.
LARGE_TREE_HAZARDS = {
    "untracked nested .gitattributes": (
        in_repo("p4/m4/s9/new/.gitattributes", "*.py filter=x\n"),
        "filter=x",
    ),
    "tracked .gitattributes changed in place": (
        in_repo("p0/m0/.gitattributes", "*.py diff=python\n[attr]m filter=y\n"),
        "filter=y",
    ),
    "overlay .gitattributes": (in_overlay("p3/m1/.gitattributes", "* filter=z\n"), "filter=z"),
    "info/attributes": (in_repo(".git/info/attributes", "* filter=i\n"), "filter=i"),
    "core.attributesFile": (
        in_config("[core]\n\tattributesFile = /tmp/a\n"),
        "core.attributesfile",
    ),
    "include": (in_config("[include]\n\tpath = ../evil\n"), "include.path"),
    "alias": (in_config("[alias]\n\tst = !id\n"), "alias.st"),
    "fsmonitor": (in_config("[core]\n\tfsmonitor = ./hook\n"), "core.fsmonitor"),
    "filter driver": (in_config('[filter "x"]\n\tclean = id\n'), "filter.x.clean"),
    "textconv": (in_config('[diff "python"]\n\ttextconv = id\n'), "diff.python.textconv"),
    "merge driver": (in_config('[merge "m"]\n\tdriver = id %A\n'), "merge.m.driver"),
    "untracked nested repository": (
        in_repo("p2/m3/s5/vendor/.git/config", "[core]\n\tpager = id\n"),
        "core.pager",
    ),
    "nested repository in the overlay": (
        in_overlay("p1/lib/.git/config", "[diff]\n\texternal = id\n"),
        "diff.external",
    ),
}


@pytest.mark.parametrize("name", sorted(LARGE_TREE_HAZARDS))
def test_each_hazard_is_found_in_a_large_tree_after_a_clean_scan(
    name: str, large_repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tree was scanned (and remembered, the racy margin set to nothing) before the
    hazard appears: what the scan remembered must not hide it."""
    monkeypatch.setattr(git_tree_scan, "RACY_NS", 0)
    repo = large_repository
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    saved = {p: p.read_bytes() for p in (repo / ".git" / "config", repo / "p0/m0/.gitattributes")}
    assert git_config_hazard(str(repo), str(overlay)) is None
    assert git_config_hazard(str(repo), str(overlay)) is None  # answered from memory
    plant, needle = LARGE_TREE_HAZARDS[name]
    try:
        plant(repo, overlay)
        reason = git_config_hazard(str(repo), str(overlay))
        assert reason is not None and needle in reason, reason
    finally:
        for path, data in saved.items():
            path.write_bytes(data)
        for extra in ("p4/m4/s9/new", "p2/m3/s5/vendor", ".git/info/attributes"):
            target = repo / extra
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    assert git_config_hazard(str(repo), None) is None


def test_a_large_tree_is_scanned_once_then_only_its_changed_directories(
    large_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_tree_scan, "RACY_NS", 0)
    git_tree_scan.forget()
    assert git_config_hazard(str(large_repository), None) is None
    found = git_tree_scan.git_entries(str(large_repository))
    assert found.directories > 250 and found.listed == 0


def _bulk_entries(root: Path, count: int) -> None:
    """``count`` directory entries, cheaply: hard links to one empty file per directory
    (a link is one system call and no data; 2,000 per directory stays under any link limit)."""
    per_dir = 2000
    made = 0
    d = 0
    while made < count:
        sub = root / f"d{d}"
        sub.mkdir(parents=True)
        first = sub / "f0"
        first.touch()
        made += 2  # the directory and its first file
        for i in range(1, min(per_dir, count - made + 1)):
            os.link(first, sub / f"f{i}")
            made += 1
        d += 1


@pytest.mark.parametrize(
    "entries", [5_000, pytest.param(200_001, marks=pytest.mark.slow, id="200001")]
)
def test_read_only_git_is_allowed_in_a_tree_of_any_size_and_still_fails_closed(
    entries: int, tmp_path: Path
) -> None:
    """Above 200,000 entries the old check refused every git command as "tree too large";
    now git status runs unapproved, and a hazard deep in the same tree is still found."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = generated_repository(tmp_path / "repo", 50)
    (repo / ".gitignore").write_text("bulk/\n")
    _bulk_entries(repo / "bulk", entries)
    overlay = Overlay(repo, tmp_path / "overlay" / "spec-1")
    decision = evaluate("run_shell_command", {"command": "git status --short"}, "default", overlay)
    assert (decision.action, decision.reason) == ("allow", "shell_read_only")
    last = max((p for p in (repo / "bulk").iterdir()), key=lambda p: int(p.name[1:]))
    (last / ".gitattributes").write_text("* filter=bulk\n")
    decision = evaluate("run_shell_command", {"command": "git diff"}, "default", overlay)
    assert decision.action == "boundary" and isinstance(decision.reason, BoundaryReason)
    assert decision.reason.code == "git_config" and "filter=bulk" in decision.reason.detail


RUNS_A_PROGRAM = [
    ("core.hooksPath", ".evil"), ("core.editor", "sh evil.sh"), ("sequence.editor", "evil"),
    ("credential.helper", "!sh evil.sh"), ("credential.https://x.org.helper", "evil"),
    ("protocol.ext.allow", "always"), ("protocol.allow", "always"),
    ("submodule.lib.update", "!sh evil.sh"), ("remote.origin.url", "ext::sh -c evil"),
    ("url.ext::sh -c evil.insteadOf", "https://"), ("mergetool.x.cmd", "evil"),
    ("core.fsmonitor", "evil"), ("alias.st", "!evil"),  # the read-only git rule's too
]
BENIGN = [
    ("branch.main.remote", "origin"), ("branch.main.merge", "refs/heads/main"),
    ("remote.origin.url", "https://example.com/x.git"),
    ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
    ("submodule.lib.url", "../lib"), ("submodule.lib.active", "true"),
    ("submodule.lib.update", "rebase"), ("user.name", "Probe"), ("credential.helper", ""),
    ("protocol.file.allow", "always"), ("core.sparseCheckout", "true"),
]


@needs_git
@pytest.mark.parametrize(("key", "value"), RUNS_A_PROGRAM + BENIGN)
def test_config_entry_runs_program_as_git_writes_it(tmp_path: Path, key: str, value: str) -> None:
    # The entry as git itself writes it (``git config -f``), read back by the parser.
    config = tmp_path / "config"
    subprocess.run(["git", "config", "-f", str(config), key, value], check=True)
    [entry] = list(parse_git_config(config.read_text()))
    problem = config_entry_runs_program(*entry)
    if (key, value) in RUNS_A_PROGRAM:
        assert problem is not None and problem.startswith("git config "), entry
    else:
        assert problem is None, (entry, problem)
