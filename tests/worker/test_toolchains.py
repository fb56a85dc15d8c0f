"""Which host paths a captured command sees (``worker.contain.toolchains``): the user's
toolchains read-only, never the rest of the home directory; and how a program the view
lacks is recognised. Real directories laid out as pyenv, rustup, nvm, uv and pip leave
them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from worker.contain.toolchains import MAX_EXPOSED, link_chain, missing_program, toolchain_view


def _exe(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home directory with the usual toolchain managers and secrets."""
    home = tmp_path / "home"
    # pyenv: shims that run libexec/pyenv, one installed version
    _exe(home / ".pyenv/shims/python3")
    _exe(home / ".pyenv/libexec/pyenv")
    _exe(home / ".pyenv/versions/3.11.7/bin/python3.11")
    (home / ".pyenv/versions/3.11.7/lib/python3.11").mkdir(parents=True)
    (home / ".pyenv/version").write_text("3.11.7\n")
    # rustup + cargo, with cargo's credentials beside its bin
    _exe(home / ".cargo/bin/rustup")
    (home / ".cargo/bin/cargo").symlink_to("rustup")
    (home / ".cargo/credentials.toml").write_text("token = 'SECRET'\n")
    (home / ".cargo/config.toml").write_text("[net]\n")
    (home / ".rustup/toolchains/stable/bin").mkdir(parents=True)
    (home / ".rustup/settings.toml").write_text('default_toolchain = "stable"\n')
    (home / ".rustup/update-hashes").mkdir()
    (home / ".rustup/downloads").mkdir()
    # nvm
    _exe(home / ".nvm/versions/node/v20.1.0/bin/node")
    (home / ".nvm/versions/node/v20.1.0/lib/node_modules/npm").mkdir(parents=True)
    (home / ".nvm/alias").mkdir(parents=True)
    # uv: a tool linked from ~/.local/bin, whose venv links a uv-managed python
    uv_python = _exe(home / ".local/share/uv/python/cpython-3.12/bin/python3.12")
    (home / ".local/share/uv/python/cpython-3.12/lib/python3.12").mkdir(parents=True)
    ruff = _exe(home / ".local/share/uv/tools/ruff/bin/ruff")
    (home / ".local/share/uv/tools/ruff/bin/python").symlink_to(uv_python)
    (home / ".local/bin").mkdir(parents=True)
    (home / ".local/bin/ruff").symlink_to(ruff)
    (home / ".local/lib/python3.11/site-packages").mkdir(parents=True)
    (home / ".local/share/keyrings").mkdir(parents=True)
    # secrets
    (home / ".ssh").mkdir()
    (home / ".ssh/id_ed25519").write_text("KEY\n")
    (home / ".config/gh").mkdir(parents=True)
    (home / ".bashrc").write_text("export TOKEN=x\n")
    return home


def _path(home: Path, *dirs: str) -> str:
    return ":".join([*(str(home / d) for d in dirs), "/usr/local/bin", "/usr/bin", "/bin"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "work" / "project"
    project.mkdir(parents=True)
    return project


def test_the_usual_managers_show_their_toolchains_and_nothing_else(
    home: Path, project: Path
) -> None:
    environ = {
        "HOME": str(home),
        "PATH": _path(
            home,
            ".cargo/bin",
            ".pyenv/shims",
            ".nvm/versions/node/v20.1.0/bin",
            ".local/bin",
        ),
    }
    view = toolchain_view(str(project), environ)
    assert set(view.binds) == {
        str(home / ".cargo/bin"),
        str(home / ".rustup/toolchains"),
        str(home / ".rustup/settings.toml"),
        str(home / ".rustup/update-hashes"),
        str(home / ".pyenv"),
        str(home / ".nvm/versions/node/v20.1.0/bin"),
        str(home / ".nvm/versions/node/v20.1.0/lib"),
        str(home / ".local/bin"),
        str(home / ".local/lib"),
        str(home / ".local/share/uv/tools/ruff/bin"),
        str(home / ".local/share/uv/python/cpython-3.12/bin"),
        str(home / ".local/share/uv/python/cpython-3.12/lib"),
    }
    assert view.path.split(":")[:4] == [
        str(home / ".cargo/bin"),
        str(home / ".pyenv/shims"),
        str(home / ".nvm/versions/node/v20.1.0/bin"),
        str(home / ".local/bin"),
    ]
    assert dict(view.env) == {
        "PYENV_ROOT": str(home / ".pyenv"),
        "RUSTUP_HOME": str(home / ".rustup"),
    }
    shown = [Path(p) for p in view.binds]
    for secret in (".ssh", ".cargo/credentials.toml", ".cargo/config.toml", ".config",
                   ".bashrc", ".local/share/keyrings", ".rustup/downloads", ".nvm/alias"):
        assert not any((home / secret).is_relative_to(p) for p in shown), secret
    assert str(home) not in view.binds


def test_a_venv_shows_the_one_version_it_links_to(home: Path, project: Path) -> None:
    venv = project / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").symlink_to(home / ".pyenv/versions/3.11.7/bin/python3.11")
    (venv / "bin" / "python").symlink_to("python3")
    (venv / "pyvenv.cfg").write_text(f"home = {home}/.pyenv/versions/3.11.7/bin\nversion = 3\n")
    view = toolchain_view(str(project), {"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert view.binds == (str(home / ".pyenv/versions/3.11.7"),)
    assert link_chain(str(venv / "bin" / "python")) == [
        str(venv / "bin"), str(venv / "bin"), str(home / ".pyenv/versions/3.11.7/bin")
    ]


def test_a_pyenv_root_is_found_by_its_layout_when_home_is_elsewhere(
    home: Path, project: Path, tmp_path: Path
) -> None:
    other_home = tmp_path / "other"
    other_home.mkdir()
    environ = {"HOME": str(other_home), "PATH": _path(home, ".pyenv/shims")}
    view = toolchain_view(str(project), environ)
    assert view.binds == (str(home / ".pyenv"),)
    assert ("PYENV_ROOT", str(home / ".pyenv")) in view.env


@pytest.mark.parametrize(
    ("asked", "why"),
    [
        ("", "the home directory"),
        (".ssh", "a secret store (.ssh)"),
        (".cargo", "a secret store (.cargo/credentials"),
        (".config/gh", "a secret store (.config)"),
        (".local/share", "a secret store (.local/share/keyrings)"),
    ],
)
def test_what_is_never_shown_whatever_names_it(
    home: Path, project: Path, asked: str, why: str
) -> None:
    path = str(home / asked) if asked else str(home)
    for environ, extra in (
        ({"HOME": str(home), "PATH": f"{path}:/usr/bin"}, ()),
        ({"HOME": str(home), "PATH": "/usr/bin"}, (path,)),
    ):
        view = toolchain_view(str(project), environ, extra)
        assert view.binds == ()
        assert path.rstrip("/") not in view.path.split(":")
        (refused,) = view.refused
        assert refused[0] == os.path.realpath(path) and refused[1].startswith(why), refused


def test_the_project_above_or_below_and_system_directories_need_nothing(
    home: Path, project: Path
) -> None:
    environ = {"HOME": str(home), "PATH": f"{project}/bin:/usr/local/bin:/usr/bin:/bin"}
    (project / "bin").mkdir()
    view = toolchain_view(str(project), environ, (str(project.parent), "relative/dir"))
    assert view.binds == ()
    assert dict(view.refused) == {
        str(project.parent): "it holds the project",
        "relative/dir": "not an absolute path",
    }
    assert view.path.split(":")[0] == f"{project}/bin"


def test_private_directories_and_the_cap(home: Path, project: Path, tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    _exe(runtime / "bin" / "x")
    many = [tmp_path / "many" / f"t{i}" for i in range(MAX_EXPOSED + 3)]
    for directory in many:
        directory.mkdir(parents=True)
    environ = {"HOME": str(home), "PATH": f"{runtime}/bin:/usr/bin"}
    view = toolchain_view(str(project), environ, [str(d) for d in many], [str(runtime)])
    assert str(runtime / "bin") not in view.binds
    assert len(view.binds) == MAX_EXPOSED
    assert sum(why.startswith("more than") for _p, why in view.refused) == 3


def test_manager_variables_pass_through(home: Path, project: Path) -> None:
    environ = {
        "HOME": str(home),
        "PATH": "/usr/bin",
        "PYENV_VERSION": "3.11.7",
        "RUSTUP_TOOLCHAIN": "stable",
        "VIRTUAL_ENV": str(project / ".venv"),
        "LD_PRELOAD": "/tmp/evil.so",
    }
    assert dict(toolchain_view(str(project), environ).env) == {
        "PYENV_VERSION": "3.11.7",
        "RUSTUP_TOOLCHAIN": "stable",
        "VIRTUAL_ENV": str(project / ".venv"),
    }


SHELL = "/usr/bin/bash"


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        (f"{SHELL}: line 1: sh: command not found\n", "sh"),
        (f"{SHELL}: line 3: .venv/bin/python: No such file or directory\n", ".venv/bin/python"),
        (f"{SHELL}: line 1: ./run: {{interp}}: bad interpreter: No such file or directory\n",
         "{interp}"),
        ("/usr/bin/env: ‘sh’: No such file or directory\n", "sh"),
        ("/usr/bin/env: 'sh': No such file or directory\n", "sh"),
        # not ours: a nested shell, a program nobody has, a test's own message
        ("bash: line 1: sh: command not found\n", None),
        (f"{SHELL}: line 1: no-such-program-x: command not found\n", None),
        ("sh: command not found\n", None),
    ],
)
def test_a_program_the_host_has_is_recognised(
    tmp_path: Path, stderr: str, expected: str | None
) -> None:
    interp = _exe(tmp_path / "interp")
    (tmp_path / ".venv/bin").mkdir(parents=True)
    (tmp_path / ".venv/bin/python").symlink_to(interp)
    stderr = stderr.replace("{interp}", str(interp))
    found = missing_program(stderr, SHELL, str(tmp_path), "/usr/bin:/bin")
    assert found == (None if expected is None else expected.replace("{interp}", str(interp)))


def test_a_path_missing_on_the_host_too_is_the_commands_own_error(tmp_path: Path) -> None:
    stderr = f"{SHELL}: line 1: ./build/app: No such file or directory\n"
    assert missing_program(stderr, SHELL, str(tmp_path), "/usr/bin") is None


def test_dependency_stores_are_shown_but_not_their_configuration(
    home: Path, project: Path
) -> None:
    """What earlier builds downloaded (Maven's local repository, cargo's registry and git
    checkouts): an offline build in the sandbox needs it, there is no network to fetch it
    again. Without it ``mvn -o test`` failed: "Could not create local repository"."""
    (home / ".m2/repository/junit").mkdir(parents=True)
    (home / ".m2/settings.xml").write_text("<password>SECRET</password>\n")
    (home / ".cargo/registry/index").mkdir(parents=True)
    (home / ".cargo/git/db").mkdir(parents=True)
    environ = {"HOME": str(home), "PATH": _path(home, ".cargo/bin")}
    view = toolchain_view(str(project), environ)
    for store in (".m2/repository", ".cargo/registry", ".cargo/git"):
        assert str(home / store) in view.binds, store
    assert dict(view.env)["CARGO_HOME"] == str(home / ".cargo")
    shown = [Path(p) for p in view.binds]
    for secret in (".m2/settings.xml", ".cargo/credentials.toml", ".cargo/config.toml"):
        assert not any((home / secret).is_relative_to(p) for p in shown), secret


def test_cargo_stores_only_with_cargo(home: Path, project: Path) -> None:
    (home / ".cargo/registry/index").mkdir(parents=True)
    view = toolchain_view(str(project), {"HOME": str(home), "PATH": _path(home)})
    assert not any(".cargo" in p for p in view.binds)
    assert "CARGO_HOME" not in dict(view.env)


def test_a_cloned_venv_names_no_host_directory(home: Path, project: Path, tmp_path: Path) -> None:
    """A repository ships ``.venv``: its ``pyvenv.cfg`` ``home =`` line and its links are
    the repository's words. They once bound ``~/.gradle`` (its gradle.properties) and all
    of ``/home``; now only an interpreter of a known toolchain is shown."""
    (home / ".gradle/wrapper").mkdir(parents=True)
    (home / ".gradle/gradle.properties").write_text("token=SECRET\n")
    stray = _exe(home / ".gradle/wrapper/python")
    venv = project / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /home\nversion = 3.11\n")
    (venv / "bin" / "python").symlink_to(stray)
    view = toolchain_view(str(project), {"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert view.binds == ()
    assert str(home / ".gradle/wrapper") in dict(view.refused)
    other = project / "venv"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "python").symlink_to(home / ".pyenv/versions/3.11.7/bin/python3.11")
    assert toolchain_view(str(project), {"HOME": str(home), "PATH": "/usr/bin:/bin"}).binds == (
        str(home / ".pyenv/versions/3.11.7"),)


@pytest.mark.parametrize("named", ["/home", "/var/lib", "/srv", "/tmp", "HOME/.cache",
                                   "HOME/.local/share", "STATE", "STATE/specrun/projects",
                                   "TMP/specrun-speculation-UID"])
def test_parents_and_specruns_own_directories_are_never_shown(
    home: Path, project: Path, tmp_path: Path, named: str
) -> None:
    state = tmp_path / "state"
    (state / "specrun/projects").mkdir(parents=True)
    spec_base = tmp_path / "tmpdir" / f"specrun-speculation-{os.geteuid()}"
    spec_base.mkdir(parents=True)
    (home / ".cache/pip").mkdir(parents=True)
    path = (named.replace("HOME", str(home)).replace("STATE", str(state))
            .replace("TMP", str(tmp_path / "tmpdir")).replace("UID", str(os.geteuid())))
    environ = {"HOME": str(home), "PATH": f"{path}:/usr/bin:/bin",
               "XDG_STATE_HOME": str(state), "TMPDIR": str(tmp_path / "tmpdir")}
    view = toolchain_view(str(project), environ, extra=(path,))
    assert not any(os.path.realpath(path).startswith(b) or b.startswith(os.path.realpath(path))
                   for b in view.binds), view.binds
    if os.path.exists(path):
        assert os.path.realpath(path) in dict(view.refused)
