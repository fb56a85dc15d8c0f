"""The toolchains a speculateShell command sees are read-only, and never bring the rest of
the home directory along: not its secrets, not its dotfiles, whatever the user's PATH or
the toolchainPaths setting names. The file system layer and Landlock each hold on their
own (the other switched off), as in ``test_layers``; the helper takes no variable from a
request beyond its short list, so a worker cannot hand a command ``LD_PRELOAD``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.conftest import layers_for, start_whole_helper
from tests.support import needs_containment
from worker.capture import remove_capture
from worker.contain.captured_env import captured_setup
from worker.contain.helper import Request, SandboxHelper
from worker.contain.landlock import abi
from worker.contain.spawn import ALL_LAYERS, Layers
from worker.shell.runner import ShellResult

pytestmark = needs_containment("the kernel has no Landlock" if abi() < 1 else None)

SECRETS = {
    ".ssh/id_ed25519": "SSH-KEY-MATERIAL",
    ".cargo/credentials.toml": "CARGO-TOKEN",
    ".config/gh/hosts.yml": "GH-TOKEN",
    ".bashrc": "BASHRC-CONTENT",
    ".netrc": "NETRC-PASSWORD",
}


@pytest.fixture(scope="module")
def helper() -> Iterator[SandboxHelper]:
    started = start_whole_helper()
    yield started
    started.close()


@pytest.fixture()
def world(tmp_path: Path) -> dict[str, Path]:
    home = tmp_path / "home"
    for rel, text in SECRETS.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    tool = home / ".cargo" / "bin" / "sometool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho tool ran\n")
    tool.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    return {"home": home, "project": project, "tool": tool, "tmp": tmp_path}


def _captured(
    helper: SandboxHelper,
    world: dict[str, Path],
    command: str,
    *,
    layers: Layers = ALL_LAYERS,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    mode: str = "captured",
) -> ShellResult:
    home = world["home"]
    # The user's PATH names the toolchain, the home itself and a secret store; the
    # setting names two more places that hold secrets.
    environ = {
        "HOME": str(home),
        "PATH": f"{home}/.cargo/bin:{home}:{home}/.ssh:/usr/bin:/bin",
    }
    setup = captured_setup(str(world["project"]), environ, extra)
    capture = world["tmp"] / "capture"
    try:
        return helper.run(
            Request(
                command=command,
                cwd=str(world["project"]),
                project=str(world["project"]),
                timeout_s=20,
                output_cap=64 * 1024,
                mode=mode,  # type: ignore[arg-type]
                capture_dir=str(capture),
                layers=layers,
                toolchains=setup.toolchains.binds,
                env=env if env is not None else setup.env,
            )
        )
    finally:
        remove_capture(capture)


def _reads_of_every_secret(home: Path) -> str:
    return "; ".join(f"cat {home / rel}" for rel in SECRETS) + f"; ls -A {home}"


@pytest.mark.parametrize("only", ["all", "filesystem", "landlock"])
def test_toolchains_run_and_the_homes_secrets_stay_unreadable(
    helper: SandboxHelper, world: dict[str, Path], only: str
) -> None:
    home = world["home"]
    layers = layers_for(only)
    command = f"{world['tool']}; " + _reads_of_every_secret(home)
    result = _captured(
        helper, world, command, layers=layers, extra=(str(home / ".cargo"), str(home / ".config"))
    )
    assert "tool ran" in result.stdout, result
    for text in SECRETS.values():
        assert text not in result.stdout
    assert ".bashrc" not in result.stdout and ".ssh" not in result.stdout


@pytest.mark.parametrize("only", ["all", "filesystem", "landlock"])
def test_toolchains_cannot_be_written(
    helper: SandboxHelper, world: dict[str, Path], only: str
) -> None:
    tool = world["tool"]
    layers = layers_for(only)
    command = (
        f"echo evil > {tool}; chmod 777 {tool}; touch {tool.parent}/planted; "
        f"rm -f {tool}; mv {tool} {tool}.moved; true"
    )
    def state() -> tuple[object, ...]:
        # Landlock governs contents and names, not metadata: with it alone a chmod
        # would pass (the read-only mount of the full profile refuses that too)
        mode = None if only == "landlock" else tool.stat().st_mode
        return tool.read_bytes(), mode, sorted(os.listdir(tool.parent))

    before = state()
    _captured(helper, world, command, layers=layers)
    assert state() == before


def test_the_view_names_nothing_it_refused(world: dict[str, Path]) -> None:
    home = world["home"]
    environ = {"HOME": str(home), "PATH": f"{home}/.cargo/bin:{home}:{home}/.ssh:/usr/bin"}
    setup = captured_setup(
        str(world["project"]), environ, (str(home / ".cargo"), str(home / ".config"))
    )
    assert setup.toolchains.binds == (str(home / ".cargo" / "bin"),)
    assert setup.env["PATH"].split(":")[0] == str(home / ".cargo" / "bin")
    assert str(home) not in setup.env["PATH"].split(":")
    assert {p for p, _why in setup.toolchains.refused} == {
        str(home), str(home / ".ssh"), str(home / ".cargo"), str(home / ".config")
    }


def test_a_request_cannot_hand_the_command_other_variables(
    helper: SandboxHelper, world: dict[str, Path]
) -> None:
    hook = world["tmp"] / "hook.sh"
    hook.write_text("echo BASH_ENV-RAN\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "BASH_ENV": str(hook),
        "LD_PRELOAD": "/nonexistent/evil.so",
        "PYTHONPATH": str(world["tmp"]),
        "GIT_CONFIG_GLOBAL": str(hook),
        "GIT_AUTHOR_NAME": "Allowed Name",
    }
    result = _captured(helper, world, "env", env=env)
    lines = result.stdout.splitlines()
    assert "GIT_AUTHOR_NAME=Allowed Name" in lines
    assert "GIT_CONFIG_GLOBAL=/dev/null" in lines
    assert not any(line.startswith(("BASH_ENV=", "LD_PRELOAD=", "PYTHONPATH=")) for line in lines)
    assert "BASH_ENV-RAN" not in result.stdout


def test_a_read_only_command_gets_neither_toolchains_nor_variables(
    helper: SandboxHelper, world: dict[str, Path]
) -> None:
    result = _captured(helper, world, f"cat {world['tool']}; echo $PATH", mode="read_only")
    assert "tool ran" not in result.stdout and "No such file" in result.stderr
    assert result.stdout.strip().splitlines()[-1] == "/usr/local/bin:/usr/bin:/bin"


def test_a_cloned_venv_opens_no_host_directory(
    helper: SandboxHelper, world: dict[str, Path]
) -> None:
    """A repository's ``.venv`` whose ``pyvenv.cfg`` says ``home = <the home's parent>`` and
    whose ``bin/python`` links into ``~/.gradle``: a captured command still reads neither
    ``~/.gradle/gradle.properties`` nor anything else of the home directories."""
    home, project = world["home"], world["project"]
    (home / ".gradle/wrapper").mkdir(parents=True)
    (home / ".gradle/gradle.properties").write_text("GRADLE-TOKEN\n")
    (home / ".bash_history").write_text("HISTORY-LINE\n")
    python = home / ".gradle/wrapper/python"
    python.write_text("#!/bin/sh\necho stray\n")
    python.chmod(0o755)
    venv = project / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {home.parent}\nversion = 3.11\n")
    (venv / "bin" / "python").symlink_to(python)
    result = _captured(helper, world, f"cat {home}/.gradle/gradle.properties "
                                      f"{home}/.bash_history; ls -A {home.parent} {home}")
    assert "GRADLE-TOKEN" not in result.stdout and "HISTORY-LINE" not in result.stdout
    assert ".bash_history" not in result.stdout and ".gradle" not in result.stdout
