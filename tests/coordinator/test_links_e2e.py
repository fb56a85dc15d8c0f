"""Symlinks a speculation's commands made, at Tab, through a real service.

A command makes a library link (``libcalc.so -> libcalc.so.1``) beside links that could
reach out of the project or into what runs later (an absolute target, ``..`` out of the
project, ``.git/hooks``, ``.github``). ``specrun diff`` shows the first as a link and names
the others as not created; Tab creates exactly the first, as a link; a service SIGKILLed in
the middle of that accept leaves, after its next start, either all of it or none of it;
``specrun undo`` takes the accept back, the link included.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.cli.daemon import start_daemon
from coordinator.pidfile import is_locked
from protocol.wire.control import AcceptRequest
from protocol.wire.endpoints import Endpoints
from protocol.wire.seams import NO_SEAMS
from tests.coordinator.e2e import (
    Driver,
    done_unless_stalled,
    shell_call,
    shell_speculation,
    stepped_scenario,
    tidy_project,
)
from tests.seams import service_entry
from tests.support import needs_containment, running_service, wait_until
from worker.contain.landlock import abi

pytestmark = needs_containment(
    "needs Landlock ABI >= 6 for the full profile" if abi() < 6 else None
)

LINK = "build the library"
COMMAND = (
    "echo lib > libcalc.so.1 && ln -s libcalc.so.1 libcalc.so"
    " && ln -s /etc/passwd abs.link && ln -s ../.. up.link && ln -s .git/hooks hooks.link"
    " && ln -s .github ci.link && echo linked"
)
HELD = ("abs.link", "up.link", "hooks.link", "ci.link")

Tree = dict[str, tuple[Any, ...]]


def tree(root: Path) -> Tree:
    """Files (content, mode) and links (target) of the project, .git and .specrun aside."""
    out: Tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".specrun", "__pycache__")]
        for name in (*filenames, *(d for d in dirnames if os.path.islink(Path(dirpath, d)))):
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            else:
                out[rel] = ("file", path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return out


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "links.yaml"
    steps = {LINK: [shell_call(COMMAND)]}
    path.write_text(yaml.safe_dump(stepped_scenario("links", steps, done_unless_stalled)))
    return path


@pytest.fixture
def service(tmp_path: Path, scenario_file: Path) -> Iterator[tuple[Any, Driver, Path]]:
    project = tidy_project(tmp_path / "project")
    with running_service(project, "--approval-mode", "auto-edit", "--scenario",
                         str(scenario_file), before_start=shell_speculation(project)) as runner:
        driver = Driver(project)
        try:
            driver.ask("hello")
            yield runner, driver, project
        finally:
            driver.close()


def test_tab_creates_the_link_and_holds_back_the_ones_that_reach_out(
    service: tuple[Any, Driver, Path],
) -> None:
    runner, driver, project = service
    before = tree(project)
    driver.ask(f"go {LINK}")
    driver.wait_for_speculation(LINK, ("completed",), timeout=90)
    shown = " ".join(runner.run("diff", check=True).stdout.split())  # unwrapped
    assert "created link libcalc.so -> libcalc.so.1" in shown, shown
    assert "abs.link -> /etc/passwd: its target is an absolute path" in shown
    assert "up.link -> ../..: its target leaves the project" in shown
    assert "hooks.link -> .git/hooks: its target is a protected path" in shown
    assert "ci.link -> .github: its target is a directory" in shown
    reply = runner.json("suggestion", "--transcript", "--full")
    [tool] = [e for e in reply["transcript"] if e["kind"] == "tool"]
    assert "applied at Tab as links: libcalc.so -> libcalc.so.1" in tool["text"]
    driver.accept()
    assert os.readlink(project / "libcalc.so") == "libcalc.so.1"
    assert (project / "libcalc.so").read_text() == "lib\n"
    for name in HELD:
        assert not os.path.lexists(project / name)
    code = runner.run("undo")
    assert code.returncode == 0, code.stdout + code.stderr
    assert tree(project) == before  # the link and the file taken back


@pytest.mark.parametrize(("kill_at", "applied"), [(2, False), (5, True)])
def test_a_service_killed_mid_accept_leaves_the_link_all_or_nothing(
    tmp_path: Path, scenario_file: Path, kill_at: int, applied: bool,
) -> None:
    project = tidy_project(tmp_path / "project")
    serve_args = ["--approval-mode", "auto-edit", "--scenario", str(scenario_file)]
    with running_service(project, *serve_args,
                         before_start=shell_speculation(project)) as runner:
        runner.run("stop", check=True)
        # Its applies SIGKILL it at their kill_at-th step (1 intent, 2-3 the stage file and
        # the stage link, 4 commit, 5 the first rename; the journal's directory is in the
        # state directory, made already).
        start_daemon(project, serve_args, env=runner.env.vars,
                     entry=service_entry(NO_SEAMS, apply_checkpoint=f"kill={kill_at}"))
        before = tree(project)
        driver = Driver(project)
        try:
            driver.ask("hello")
            driver.ask(f"go {LINK}")
            driver.wait_for_speculation(LINK, ("completed",), timeout=90)
            driver.client.send(AcceptRequest(req_id=driver.client.next_id(), method="tab"))
            pidfile = Endpoints.for_project(project, create=False).pidfile
            assert wait_until(lambda: not is_locked(pidfile), timeout=30)
        finally:
            driver.close()
        if not applied:  # killed while staging: the stage link is there, the link is not
            assert any(".specrun-stage-" in n for n in os.listdir(project))
        runner.run("start", check=True)  # recovery
        after = tree(project)
        assert not [n for n in os.listdir(project) if ".specrun-" in n]
        if applied:
            assert os.readlink(project / "libcalc.so") == "libcalc.so.1"
            assert after == {**before, "libcalc.so": ("link", "libcalc.so.1"),
                             "libcalc.so.1": ("file", b"lib\n", after["libcalc.so.1"][2])}
        else:
            assert after == before


def test_the_page_shows_the_link_tab_creates_and_names_the_ones_it_holds_back(
    service: tuple[Any, Driver, Path], tmp_path: Path,
) -> None:
    from tests.web_support import browser, open_page, save_screenshot, web_view

    runner, driver, _project = service
    driver.ask(f"go {LINK}")
    driver.wait_for_speculation(LINK, ("completed",), timeout=90)
    with web_view(runner) as web, browser() as context:
        page = open_page(context, web)
        page.wait_for_selector('.branch[data-rank="0"] .badge.status-completed')
        head = page.locator(".file-head", has_text="libcalc.so ->")
        head.first.wait_for()
        assert head.first.inner_text() == "created link: libcalc.so -> libcalc.so.1"
        held = page.locator(".muted", has_text="not created at Tab").all_inner_texts()
        save_screenshot(page, "links.png", tmp_path)
    joined = " ".join(held)
    assert "abs.link -> /etc/passwd: its target is an absolute path" in joined, held
    assert "hooks.link -> .git/hooks: its target is a protected path" in joined, held
