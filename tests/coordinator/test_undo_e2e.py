"""`specrun undo` against a real service on the scripted model: a main-chat turn's writes
and an accept's are checkpoints; undo takes them back byte for byte (content and mode),
names and keeps a file the person changed since (applying nothing, or the rest with
--force), rewinds the conversation when asked, is settled whole after the service is
killed in the middle of it, and never touches git's index or objects."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.cli.daemon import start_daemon
from coordinator.pidfile import is_locked
from coordinator.service.chat.history import HistoryStore
from protocol.wire.control import AcceptRequest
from protocol.wire.endpoints import Endpoints
from protocol.wire.seams import NO_SEAMS
from tests.coordinator.e2e import (
    TIDY,
    Driver,
    done_unless_stalled,
    driven_service,
    shell_call,
    shell_speculation,
    stepped_scenario,
    tidy_project,
    write_call,
)
from tests.seams import service_entry
from tests.support import (
    Specrun,
    make_sample_project,
    needs_containment,
    running_service,
    wait_until,
)

EDIT = "edit the files"
ADD = "add the negative test"
MORE = "write more notes"
STEPS: dict[str, list[dict[str, Any]]] = {
    EDIT: [
        write_call("tools/run.sh", "#!/bin/sh\necho edited\n"),
        {"name": "edit", "arguments": {"file_path": "src/calc.py",
                                       "old_string": "return a - b",
                                       "new_string": "return a + b"}},
        write_call("notes/today.md", "new notes\n"),
    ],
    ADD: [
        write_call("tests/test_neg.py", "def test_neg():\n    assert -1 + -1 == -2\n"),
        write_call("README.md", "# calc, with a negative test\n"),
    ],
    MORE: [write_call("notes/today.md", "more notes\n")],
    TIDY: [
        write_call("src/util.py", "def double(x):\n    return 2 * x\n"),
        shell_call("chmod +x tools/run.sh && rm tests/old_test.py"),
    ],
}

Tree = dict[str, tuple[bytes, int]]


def tree(root: Path) -> Tree:
    out: Tree = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in (".git", ".specrun") or "__pycache__" in rel:
            continue
        if path.is_file() and not path.is_symlink():
            out[rel] = (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return out


def git_state(root: Path) -> tuple[str, int]:
    """The index's digest and how many objects git holds: undo changes neither."""
    index = hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest()
    objects = sum(1 for p in (root / ".git" / "objects").rglob("*") if p.is_file())
    return index, objects


def project_for_undo(root: Path) -> Path:
    project = make_sample_project(root)
    (project / "tools").mkdir()
    (project / "tools" / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(project / "tools" / "run.sh", 0o751)
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm",
                    "tools"], cwd=project, check=True)
    return project


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "undo.yaml"
    path.write_text(yaml.safe_dump(stepped_scenario("undo", STEPS, done_unless_stalled)))
    return path


@pytest.fixture
def service(tmp_path: Path, scenario_file: Path) -> Iterator[tuple[Specrun, Driver, Path]]:
    project = project_for_undo(tmp_path / "project")
    with driven_service(project, scenario_file) as running:
        yield running


def undo_json(runner: Specrun, *args: str) -> tuple[int, Any]:
    proc = runner.run("undo", *args, "--json")
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def test_undo_takes_back_an_accept_then_a_turn_byte_for_byte_and_keeps_what_you_changed(
    service: tuple[Specrun, Driver, Path],
) -> None:
    runner, driver, project = service
    git_before = git_state(project)
    before_turn = tree(project)
    driver.ask(EDIT)  # a typed prompt: a main-chat turn whose tools write three files
    assert (project / "notes/today.md").exists()
    before_accept = tree(project)
    driver.ask(f"go {ADD}")
    driver.wait_for_speculation(ADD, ("completed",), timeout=60)
    driver.accept()
    assert (project / "tests/test_neg.py").exists()

    code, listed = undo_json(runner, "--list")
    assert code == 0
    kinds = [(c["kind"], c["prompt"]) for c in listed["checkpoints"]]
    assert kinds == [("turn", EDIT), ("accept", ADD)]
    turns = [c["turn"] for c in listed["checkpoints"]]
    assert turns == sorted(turns) and len(set(turns)) == 2
    shown = runner.run("undo", "--list", check=True).stdout
    assert "removes   tests/test_neg.py" in shown and "restores  README.md" in shown

    # A file the person changed since: named, and nothing is undone.
    (project / "tests/test_neg.py").write_text("# mine now\n")
    code, refused = undo_json(runner)
    assert code == 1 and refused["undone"] is False
    assert {(f["path"], f["action"]) for f in refused["files"]} == {
        ("tests/test_neg.py", "kept"), ("README.md", "restore")}
    assert (project / "README.md").read_text() == "# calc, with a negative test\n"
    said = runner.run("undo")
    assert said.returncode == 1 and "tests/test_neg.py" in said.stdout
    assert "--force" in said.stdout

    # --force: the rest goes back, the changed file stays as the person left it.
    code, forced = undo_json(runner, "--force")
    assert code == 0 and forced["undone"] is True
    assert (project / "tests/test_neg.py").read_text() == "# mine now\n"
    (project / "tests/test_neg.py").unlink()
    assert tree(project) == before_accept

    # Then the turn: content and mode, byte for byte; its new file removed.
    code, done = undo_json(runner)
    assert code == 0 and done["undone"] is True
    assert {(f["path"], f["action"]) for f in done["files"]} == {
        ("tools/run.sh", "restore"), ("src/calc.py", "restore"), ("notes/today.md", "remove")}
    assert tree(project) == before_turn
    assert stat.S_IMODE((project / "tools/run.sh").stat().st_mode) == 0o751
    assert git_state(project) == git_before

    code, nothing = undo_json(runner)
    assert code == 1 and "Nothing to undo" in nothing.get("message", "")


def test_undo_n_with_the_conversation_rewinds_files_and_chat_to_before_turn_n(
    service: tuple[Specrun, Driver, Path],
) -> None:
    runner, driver, project = service
    driver.ask(EDIT)
    after_edit = tree(project)
    history = HistoryStore(project)
    prompts = [m.text for m in history.load_report().full_messages if m.role == "user"]
    driver.ask(MORE)
    driver.ask("hello")
    assert (project / "notes/today.md").read_text() == "more notes\n"
    more_turn = len(prompts) + 1

    code, done = undo_json(runner, str(more_turn), "--conversation")
    assert code == 0 and done["conversation_rewound"] is True, done
    assert tree(project) == after_edit
    kept = [m.text for m in HistoryStore(project).load_report().full_messages
            if m.role == "user"]
    assert kept == prompts
    # The earlier checkpoint belongs to the new session and can still be taken back.
    code, listed = undo_json(runner, "--list")
    assert [c["prompt"] for c in listed["checkpoints"]] == [EDIT]
    assert runner.json("status")["session_id"] != ""


@pytest.mark.parametrize(("kill_at", "undone"), [(2, False), (6, True)])
def test_a_service_killed_mid_undo_is_settled_whole_at_its_next_start(
    tmp_path: Path, scenario_file: Path, kill_at: int, undone: bool,
) -> None:
    project = project_for_undo(tmp_path / "project")
    with running_service(project, "--approval-mode", "auto-edit", "--scenario",
                         str(scenario_file)) as runner:
        before = tree(project)
        git_before = git_state(project)
        driver = Driver(project)
        try:
            driver.ask(EDIT)
        finally:
            driver.close()
        written = tree(project)
        runner.run("stop", check=True)
        # A service whose applies SIGKILL it at their kill_at-th step, here the undo's
        # (2: staging, before the commit record; 6: after the first rename).
        start_daemon(project, ["--approval-mode", "auto-edit", "--scenario", str(scenario_file)],
                     env=runner.env.vars,
                     entry=service_entry(NO_SEAMS, apply_checkpoint=f"kill={kill_at}"))
        died = runner.run("undo")
        assert died.returncode != 0
        runner.run("start", check=True)  # recovery, then the undo's own settling
        assert tree(project) == (before if undone else written)
        code, listed = undo_json(runner, "--list")
        assert [c["prompt"] for c in listed["checkpoints"]] == ([] if undone else [EDIT])
        if not undone:
            code, _done = undo_json(runner)
            assert code == 0 and tree(project) == before
        assert git_state(project) == git_before
        assert not (project / ".specrun" / "journal").exists()


@needs_containment(None)
def test_undo_of_an_accept_that_deleted_a_file_and_changed_a_mode(tmp_path: Path,
                                                                 scenario_file: Path) -> None:
    project = tidy_project(tmp_path / "project")
    with running_service(project, "--approval-mode", "auto-edit", "--scenario",
                         str(scenario_file), before_start=shell_speculation(project)) as runner:
        driver = Driver(project)
        try:
            driver.ask("hello")
            before = tree(project)
            driver.ask(f"go {TIDY}")
            driver.wait_for_speculation(TIDY, ("completed",), timeout=60)
            driver.accept()
        finally:
            driver.close()
        assert not (project / "tests/old_test.py").exists()
        assert os.access(project / "tools/run.sh", os.X_OK)
        code, done = undo_json(runner)
        assert code == 0, done
        assert {(f["path"], f["action"]) for f in done["files"]} == {
            ("src/util.py", "remove"), ("tools/run.sh", "restore"),
            ("tests/old_test.py", "recreate")}
        assert tree(project) == before


@pytest.mark.parametrize(("kill_at", "applied"), [(3, False), (5, True)])
def test_a_service_killed_mid_accept_keeps_a_checkpoint_exactly_when_the_files_went_in(
    tmp_path: Path, scenario_file: Path, kill_at: int, applied: bool,
) -> None:
    project = project_for_undo(tmp_path / "project")
    serve_args = ["--approval-mode", "auto-edit", "--scenario", str(scenario_file)]
    with running_service(project, *serve_args) as runner:
        runner.run("stop", check=True)
        # Its applies SIGKILL it at their kill_at-th step, here the accept's (3: staging,
        # before the commit record; 5: after the first rename).
        start_daemon(project, serve_args, env=runner.env.vars,
                     entry=service_entry(NO_SEAMS, apply_checkpoint=f"kill={kill_at}"))
        before = tree(project)
        driver = Driver(project)
        try:
            driver.ask("hello")
            driver.ask(f"go {ADD}")
            driver.wait_for_speculation(ADD, ("completed",), timeout=60)
            driver.client.send(AcceptRequest(req_id=driver.client.next_id(), method="tab"))
            # The service dies under the accept: its pidfile lock goes with it.
            pidfile = Endpoints.for_project(project, create=False).pidfile
            assert wait_until(lambda: not is_locked(pidfile), timeout=30)
        finally:
            driver.close()
        runner.run("start", check=True)  # the apply's recovery, then the checkpoints'
        assert (project / "tests/test_neg.py").exists() is applied
        code, listed = undo_json(runner, "--list")
        assert [c["kind"] for c in listed["checkpoints"]] == (["accept"] if applied else [])
        if applied:
            code, done = undo_json(runner)
            assert code == 0 and done["undone"] is True
        assert tree(project) == before
