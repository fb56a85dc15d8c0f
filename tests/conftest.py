from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import tests.support
from tests.support import (
    Env,
    Specrun,
    containment_unavailable,
    isolated_env,
    make_sample_project,
    processes_with_env,
    wait_until,
)
from tests.web_support import module_chromium, need_chromium

# A suite started in the background by a non-interactive shell (`scripts/test &`, nohup,
# some CI runners) inherits SIGINT ignored, and an ignored signal stays ignored across
# exec: every Ctrl-C the tests send to a chat, a demo or `logs -f` would then be lost.
# Python's own handler here means the processes the tests start get the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# specrun keeps its own records in $XDG_STATE_HOME/specrun: a test that runs specrun's code
# in this process must never write into the real one of whoever runs the suite.
_STATE_HOME = tempfile.mkdtemp(prefix="sr-state-")
os.environ["XDG_STATE_HOME"] = _STATE_HOME
tests.support.SHARED_STATE_HOME = _STATE_HOME
atexit.register(shutil.rmtree, _STATE_HOME, True)

# The longest modules, longest first (each run alone with -n 2 on a 2-core machine,
# 2026-12-07, its tests' durations summed; load average 4-5 for the first group of
# measurements and about 10 for the second, halved here to compare). Under pytest-xdist
# (scripts/test: `-n ... --dist loadfile --no-loadscope-reorder`) each worker takes the
# next whole module when it is done with one; starting these first keeps one of them
# from being what the others wait for at the end. Without xdist the order is unchanged.
# tests/test_suite_order.py checks that each of them still exists (a moved module would
# silently lose its place).
LONGEST_FIRST = (
    "tests/test_chaos.py",  # 27-41 s: one deck of chaos rounds
    "tests/coordinator/test_cli_errors.py",
    "tests/coordinator/test_context_e2e.py",
    "tests/coordinator/test_speculation_e2e.py",
    "tests/coordinator/test_undo_e2e.py",
    "tests/coordinator/test_cli.py",
    "tests/test_bad_input.py",
    "tests/coordinator/test_demo.py",
    "tests/coordinator/test_chat_pty.py",
    "tests/security/test_main_chat_protected.py",
    "tests/coordinator/web/test_web_faithful.py",
    "tests/security/test_preview_is_what_tab_applies.py",
    "tests/coordinator/web/test_web_browser.py",
    "tests/coordinator/web/test_web_lifecycle.py",
    "tests/coordinator/test_service_lifecycle.py",
    "tests/worker/test_captured_builds.py",
    "tests/coordinator/test_cost_e2e.py",
    "tests/coordinator/test_first_minutes.py",
    "tests/test_fuzz_shell.py",
    "tests/coordinator/test_approval_lifecycle.py",
    "tests/coordinator/test_fuzz_control.py",
    "tests/security/test_hostile_limits_service.py",
    "tests/coordinator/test_chat.py",
    "tests/coordinator/test_fuzz_worker.py",
    "tests/coordinator/test_service.py",
    "tests/test_scripts_interrupt.py",
    "tests/overlay/test_recover.py",
    "tests/coordinator/test_cli_imports.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: every worker sorts alike
        rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
    if os.environ.get("SPECRUN_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow stress run; set SPECRUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("containment"):
        missing = mark.kwargs.get("missing")
        if missing:
            containment_unavailable(missing)


@pytest.fixture
def env() -> Iterator[Env]:
    with isolated_env() as e:
        yield e
        leaked = processes_with_env(e.runtime)
        for proc in leaked:
            proc.kill()
        assert not leaked, f"processes left behind: {[p.pid for p in leaked]}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_sample_project(tmp_path / "proj")


@pytest.fixture
def specrun(project: Path, env: Env) -> Iterator[Specrun]:
    runner = Specrun(project, env)
    yield runner
    # A test that started a service and failed before stopping it must not leak it.
    if processes_with_env(env.runtime):
        runner.run("stop")
        wait_until(lambda: not processes_with_env(env.runtime), timeout=10)


@contextmanager
def _started(specrun: Specrun) -> Iterator[None]:
    specrun.run("start", "--approval-mode", "auto-edit", check=True)
    try:
        yield
    finally:
        specrun.run("stop")
        wait_until(lambda: not processes_with_env(specrun.env.runtime), timeout=10)


@pytest.fixture
def service(specrun: Specrun) -> Iterator[Specrun]:
    """A running service (auto-edit mode, scripted model) stopped at teardown."""
    with _started(specrun):
        yield specrun


@pytest.fixture
def web_service(specrun: Specrun) -> Iterator[Specrun]:
    """``service`` for the browser tests: skipped, before anything starts, where Chromium
    is missing."""
    need_chromium()
    with _started(specrun):
        yield specrun


@pytest.fixture(scope="module")
def shared_chromium() -> Iterator[None]:
    """The browser test modules' ``browser()`` calls share one Chromium (launched at the
    first, closed with the module); each call still gets a fresh context. Opt in with
    ``pytestmark = pytest.mark.usefixtures("shared_chromium")``."""
    with module_chromium():
        yield


def _bound_unix_socket_paths() -> set[str]:
    """Paths of the unix sockets some process still holds (``/proc/net/unix``)."""
    try:
        with open("/proc/net/unix", encoding="utf-8") as table:
            next(table, None)
            return {fields[-1] for line in table if len(fields := line.split()) >= 8}
    except OSError:
        return set()


@pytest.fixture(scope="session", autouse=True)
def _no_dead_fork_server_dirs() -> Iterator[None]:
    """A service killed with SIGKILL (as several tests do on purpose) cannot run its exit
    handlers, so its fork server's ``pymp-*`` directory stays in the temp dir. After the
    session, such directories that appeared meanwhile and whose listener socket no process
    holds any more are removed; a live one (another run's) is left alone, never touched."""
    import shutil
    import tempfile

    base = Path(tempfile.gettempdir())
    before = set(base.glob("pymp-*"))
    yield
    bound = _bound_unix_socket_paths()
    for leftover in set(base.glob("pymp-*")) - before:
        try:
            entries = list(leftover.iterdir())
        except OSError:
            continue
        listeners = [e for e in entries if e.name.startswith("listener-")]
        if entries and len(listeners) == len(entries) and not bound & {str(e) for e in entries}:
            shutil.rmtree(leftover, ignore_errors=True)
