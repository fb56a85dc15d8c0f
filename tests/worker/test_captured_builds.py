"""speculateShell on real projects: a speculation runs each ecosystem's test suite (forks,
git fixtures, build directories renamed into place and project directories deleted) and
it passes there exactly as it passes directly; a command that times out is a result; a
program only the host has stops the speculation (``toolchain_missing``).

Real speculation jobs (``worker.jobs.run_speculation``) against the scripted model over
HTTP, every command in the real sandbox helper's full profile with the writable view.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from coordinator.scripted_model import ScriptedModelServer
from overlay import speculation_base_dir
from protocol.wire.boundary import BoundaryReason
from protocol.wire.work import (
    Boundary,
    Completed,
    Containment,
    SpeculationLimits,
    ToolFinished,
)
from tests.support import needs_containment, shared_sandbox_helper
from tests.toolchain_projects import Builder, Project, available, run_directly
from tests.worker.conftest import PIPELINED_RULE, Collector, Harness, call, rule
from worker.contain.captured_env import (
    CROSS_DEVICE_NOTE,
    NO_NETWORK_NOTE,
    PTY_NOTE,
    UNIX_SOCKET_NOTE,
)

ECOSYSTEMS = available()


def _view_supported() -> bool:
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
    )
    return probe.returncode == 0


pytestmark = [
    needs_containment(None if _view_supported() else "no unprivileged mount namespaces"),
    pytest.mark.usefixtures("stop_multiprocess_helpers"),
]

Speculate = Callable[..., Collector]


@pytest.fixture
def speculate(tmp_path: Path) -> Iterator[Speculate]:
    """``speculate(project_root, calls, **job)``: one speculation whose first turn makes
    ``calls`` and whose next turn answers; returns its events."""
    harnesses: list[Harness] = []
    own = speculation_base_dir() / str(os.getpid())
    shared_sandbox_helper()
    before = set(os.listdir(own)) if own.exists() else set()

    def run(root: Path, calls: list[dict[str, Any]], **job: Any) -> Collector:
        rules = [
            rule({"text": "Done."}, last_tool="run_shell_command"),
            rule({"tool_calls": calls}),
            PIPELINED_RULE,
        ]
        server = ScriptedModelServer({"rules": rules, "chunk_ms": 0}).start()
        h = Harness(root, server)
        harnesses.append(h)
        spec = msgspec.structs.replace(h.job(), speculate_shell=True, **job)
        return h.run(spec)

    try:
        yield run
    finally:
        for h in harnesses:
            h.server.stop()
            h.cleanup()
    after = set(os.listdir(own)) if own.exists() else set()
    assert not (after - before - {"owner"}), f"{sorted(after - before)} left in {own}"


def _outputs(out: Collector) -> list[str]:
    return [e.result.output or e.result.error or "" for e in out.of(ToolFinished)]


def _suite_in_a_speculation(speculate: Speculate, project: Project) -> tuple[str, Completed]:
    out = speculate(project.root, [call("run_shell_command", command=project.command)])
    ends = out.of(Completed)
    assert ends, [e for e in out.events if isinstance(e, Boundary)]
    (output,) = _outputs(out)
    return output, ends[0]


def _check_ecosystem(
    speculate: Speculate, tmp_path: Path, name: str, builder: Builder, **size: int
) -> None:
    project = builder(tmp_path / name, **size)
    code, direct, _seconds = run_directly(project)
    assert code == 0 and project.passed(direct) == project.expected, direct[-3000:]
    subprocess.run(["git", "clean", "-fdxq", "-e", ".venv"], cwd=project.root, check=True)
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=project.root, check=True)
    output, done = _suite_in_a_speculation(speculate, project)
    assert output.startswith("Exit code: 0"), output[-3000:]
    assert project.passed(output) == project.expected, output[-3000:]
    assert NO_NETWORK_NOTE not in output
    # the real tree is as it was; what the suite built waits in the overlay
    assert (project.root / "fixtures").is_dir()
    assert not (project.root / "target").exists()
    if name == "rust":
        assert any(rel.startswith("target/") for rel in done.outcome.written_files)


@pytest.mark.parametrize("name", sorted(ECOSYSTEMS))
def test_each_suite_passes_in_a_speculation_as_it_passes_directly(
    speculate: Speculate, tmp_path: Path, name: str
) -> None:
    _check_ecosystem(speculate, tmp_path, name, ECOSYSTEMS[name], sequential=50, concurrent=10)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ECOSYSTEMS))
def test_suites_that_fork_hundreds_of_processes(
    speculate: Speculate, tmp_path: Path, name: str
) -> None:
    _check_ecosystem(speculate, tmp_path, name, ECOSYSTEMS[name], sequential=400, concurrent=40)


def test_new_directories_rename_project_directories_delete_existing_ones_say_exdev(
    speculate: Speculate, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "sub" / "m.txt").write_text("m\n")
    (root / "docs").mkdir()
    (root / "docs" / "d.txt").write_text("d\n")
    rename_new = (
        "python3 -c 'import os, tempfile; d = tempfile.mkdtemp(dir=\".\"); "
        "open(d + \"/x\", \"w\").write(\"1\"); os.rename(d, \".pytest_cache\"); "
        "os.mkdir(\"pkg/new\"); os.rename(\"pkg/new\", \"renamed\"); print(\"renamed ok\")'"
    )
    rename_old = "python3 -c 'import os; os.rename(\"docs\", \"docs2\")'"
    out = speculate(
        root,
        [
            call("run_shell_command", command=rename_new),
            call("run_shell_command", command="rm -rf pkg && echo removed ok"),
            call("run_shell_command", command=rename_old),
        ],
    )
    new, removed, old = _outputs(out)
    assert "renamed ok" in new and new.startswith("Exit code: 0"), new
    assert "removed ok" in removed and removed.startswith("Exit code: 0"), removed
    assert "Invalid cross-device link" in old and CROSS_DEVICE_NOTE in old, old
    assert CROSS_DEVICE_NOTE not in new + removed
    assert (root / "pkg" / "sub" / "m.txt").exists()  # the real tree is untouched
    written = out.of(Completed)[0].outcome.written_files
    assert ".pytest_cache/x" in written
    assert written[".pytest_cache/x"].by_command  # build output: held back at Tab


def test_multiprocessing_needing_a_unix_socket_says_so(
    speculate: Speculate, tmp_path: Path
) -> None:
    """A unix socket is refused by design; the pipes of a plain Pool are not."""
    root = tmp_path / "project"
    root.mkdir()
    program = (
        "import multiprocessing as mp\n"
        "if __name__ == '__main__':\n"
        "    with mp.get_context('fork').Pool(2) as pool:\n"
        "        print('pool', pool.map(abs, [-1, -2]))\n"
        "    with mp.get_context('forkserver').Pool(2) as pool:\n"
        "        print(pool.map(abs, [-3]))\n"
    )
    (root / "mp.py").write_text(program)
    out = speculate(root, [call("run_shell_command", command="python3 mp.py")])
    (output,) = _outputs(out)
    assert "pool [1, 2]" in output, output
    assert "Permission denied" in output and UNIX_SOCKET_NOTE in output, output
    assert NO_NETWORK_NOTE not in output


def test_a_command_that_times_out_is_a_result_and_the_speculation_goes_on(
    speculate: Speculate, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    out = speculate(
        root,
        [
            call("run_shell_command", command="echo before > kept.txt; echo first"),
            call("run_shell_command", command="echo started; sleep 60"),
        ],
        limits=SpeculationLimits(shell_timeout_s=1.0),
    )
    first, slow = _outputs(out)
    assert "first" in first
    assert "[The command timed out after 1 s and was killed.]" in slow, slow
    assert "started" in slow and NO_NETWORK_NOTE in slow
    done = out.of(Completed)
    assert done and not out.of(Boundary)
    assert "kept.txt" in done[0].outcome.written_files
    assert done[0].outcome.messages[-1].text == "Done."


def _fake_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n"
        "[alias]\n\tsneaky = !echo ran-an-alias\n"
    )
    return home


def test_git_fixtures_commit_as_the_user_and_clone_locally_but_no_further(
    speculate: Speculate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _fake_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    root = tmp_path / "project"
    root.mkdir()
    fixture = (
        "git init -q /tmp/origin && cd /tmp/origin && echo x > f && git add f && "
        "git commit -qm first && git log --format='%an <%ae> / %cn' && "
        "git clone -q file:///tmp/origin /tmp/c1 && git clone -q /tmp/origin /tmp/c2 && "
        "ls /tmp/c1 /tmp/c2"
    )
    out = speculate(
        root,
        [
            call("run_shell_command", command=fixture),
            call("run_shell_command", command="git clone -q https://example.com/x.git /tmp/x"),
            call("run_shell_command", command="git init -q /tmp/r && git -C /tmp/r sneaky"),
        ],
    )
    local, remote, alias = _outputs(out)
    assert local.startswith("Exit code: 0"), local
    assert "Ada Lovelace <ada@example.org> / Ada Lovelace" in local
    assert "transport 'https' not allowed" in remote, remote
    assert "ran-an-alias" not in alias and "is not a git command" in alias, alias


def test_a_pseudo_terminal_is_refused_and_said_so(speculate: Speculate, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    command = "python3 -c 'import pty; pty.openpty()'"
    out = speculate(root, [call("run_shell_command", command=command)])
    (output,) = _outputs(out)
    assert "out of pty devices" in output and PTY_NOTE in output, output


def test_the_maven_repository_is_there_read_only_and_its_settings_are_not(
    speculate: Speculate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An offline build finds what earlier builds downloaded (``mvn -o test`` could not
    even create its local repository before), and cannot change it."""
    home = _fake_home(tmp_path)
    (home / ".m2/repository/junit").mkdir(parents=True)
    (home / ".m2/repository/junit/junit.pom").write_text("<project/>\n")
    (home / ".m2/settings.xml").write_text("<password>SECRET</password>\n")
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "project"
    root.mkdir()
    m2 = home / ".m2"
    command = (
        f"cat {m2}/repository/junit/junit.pom; "
        f"touch {m2}/repository/planted || echo refused; "
        f"cat {m2}/settings.xml || echo no-settings"
    )
    out = speculate(root, [call("run_shell_command", command=command)])
    (output,) = _outputs(out)
    assert "<project/>" in output and "refused" in output, output
    assert "no-settings" in output and "SECRET" not in output, output
    assert not (m2 / "repository/planted").exists()


def test_a_program_only_the_host_has_stops_at_toolchain_missing(
    speculate: Speculate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _fake_home(tmp_path)
    hidden = home / ".config" / "tools" / "bin"  # a secret store: never shown
    hidden.mkdir(parents=True)
    tool = hidden / "mytool"
    tool.write_text("#!/bin/sh\necho mytool ran\n")
    tool.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{hidden}:{os.environ['PATH']}")
    root = tmp_path / "project"
    root.mkdir()
    out = speculate(
        root,
        [
            call("run_shell_command", command="echo fine"),
            call("run_shell_command", command="mytool --version"),
        ],
    )
    (boundary,) = out.of(Boundary)
    assert boundary.reason == BoundaryReason("toolchain_missing", "mytool")
    assert [m.role for m in boundary.outcome.messages][-1] == "tool"  # the first call is kept
    assert "fine" in _outputs(out)[0]


def test_a_venv_whose_interpreter_is_outside_the_view_stops_at_toolchain_missing(
    speculate: Speculate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _fake_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    interpreter = home / ".ssh" / "python3"  # a venv linking into a secret store
    interpreter.parent.mkdir()
    interpreter.write_text("#!/bin/sh\necho not-a-python\n")
    interpreter.chmod(0o755)
    root = tmp_path / "project"
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(interpreter)
    (root / ".venv" / "pyvenv.cfg").write_text(f"home = {interpreter.parent}\n")
    out = speculate(root, [call("run_shell_command", command=".venv/bin/python -V")])
    (boundary,) = out.of(Boundary)
    assert boundary.reason == BoundaryReason("toolchain_missing", ".venv/bin/python")


def test_the_venv_of_the_default_python3_runs(speculate: Speculate, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["python3", "-m", "venv", "--without-pip", ".venv"], cwd=root, check=True)
    host = subprocess.run(
        [".venv/bin/python", "-c", "import sys; print(sys.version)"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout.strip()
    command = ".venv/bin/python -c 'import sys; print(sys.version)'; python3 -c 'print(1)'"
    out = speculate(root, [call("run_shell_command", command=command)])
    (output,) = _outputs(out)
    assert output.startswith("Exit code: 0") and host in output, (host, output)


def test_toolchain_paths_setting_adds_a_directory(
    speculate: Speculate, tmp_path: Path
) -> None:
    extra = tmp_path / "opt-tools" / "bin"
    extra.mkdir(parents=True)
    tool = extra / "extratool"
    tool.write_text("#!/bin/sh\necho extra tool ran\n")
    tool.chmod(0o755)
    root = tmp_path / "project"
    root.mkdir()
    command = f"{tool}; touch {extra}/planted; grep ' {extra} ' /proc/self/mountinfo"
    out = speculate(
        root,
        [call("run_shell_command", command=command)],
        containment=Containment(toolchain_paths=(str(extra),)),
    )
    (output,) = _outputs(out)
    assert "extra tool ran" in output, output
    assert "Read-only file system" in output
    assert not (extra / "planted").exists()
    line = next(ln for ln in output.splitlines() if ln.split()[4:5] == [str(extra)])
    mount_options = line.split()[5].split(",")  # mountinfo: id parent dev root point options
    assert "ro" in mount_options and "nosuid" in mount_options and "nodev" in mount_options


def test_in_a_confined_pool_worker_the_toolchain_and_identity_are_there(
    tmp_path: Path, spec_project: Path
) -> None:
    """The same in a real pool worker that has confined itself (Landlock) before its
    first captured command: the toolchain view and the git identity are worked out then."""
    from tests.worker.test_speculation_worker import pool_of, run, send_sandboxed_job

    root = spec_project
    subprocess.run(["python3", "-m", "venv", "--without-pip", ".venv"], cwd=root, check=True)
    identity = subprocess.run(
        ["git", "config", "--get", "user.name"], capture_output=True, text=True, cwd="/"
    ).stdout.strip()
    command = (
        ".venv/bin/python -c 'print(\"venv python ok\")' && git init -q /tmp/r && "
        "cd /tmp/r && git commit -q --allow-empty -m x && git log --format=%an"
    )
    rules = [
        rule({"text": "Done."}, last_tool="run_shell_command"),
        rule({"tool_calls": [call("run_shell_command", command=command)]}),
        PIPELINED_RULE,
    ]
    server = ScriptedModelServer({"rules": rules, "chunk_ms": 0}).start()
    h = Harness(root, server)
    try:

        async def main() -> None:
            async with pool_of() as (pool, events):
                await send_sandboxed_job(pool, h, speculate_shell=True)
                from protocol.wire.work import PipelinedSuggestion

                seen = await events.until(PipelinedSuggestion, timeout=60)
                (output,) = [
                    e.result.output or e.result.error or ""
                    for e in seen
                    if isinstance(e, ToolFinished)
                ]
                assert "venv python ok" in output, output
                if identity:
                    assert f"\n{identity}\n" in output, output
                assert any(isinstance(e, Completed) for e in seen)
                h.cleanup()

        run(main)
    finally:
        server.stop()
        h.cleanup()


def test_python_bytecode_is_neither_kept_nor_counted_against_the_quota(
    speculate: Speculate, tmp_path: Path
) -> None:
    """A real suite imports every module of the project and its venv: on the old code each
    import wrote a ``.pyc`` into the view, counted against ``overlayQuotaFiles`` (a 300-test
    pytest project wrote 723) and applied at Tab, bytecode no diff shows."""
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    for i in range(30):
        (root / "pkg" / f"m{i}.py").write_text(f"VALUE = {i}\n")
    imports = "; ".join(f"import pkg.m{i}" for i in range(30))
    command = (
        f"python3 -c '{imports}; import sys; print(\"imported\", sys.dont_write_bytecode)' "
        "&& python3 -m py_compile pkg/m0.py && echo result > out.txt"
    )
    out = speculate(
        root,
        [call("run_shell_command", command=command)],
        containment=Containment(overlay_quota_files=10),
    )
    ends = out.of(Completed)
    assert ends, [e for e in out.events if isinstance(e, Boundary)]
    (output,) = _outputs(out)
    assert output.startswith("Exit code: 0") and "imported True" in output, output
    assert "1 Python bytecode file(s) not kept" in output, output  # py_compile's own
    assert list(ends[0].outcome.written_files) == ["out.txt"]
    assert not (root / "pkg" / "__pycache__").exists()
