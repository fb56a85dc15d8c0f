"""The pool reaches into ``multiprocess`` where it has no public API for what it needs: the
fork server's state (to fork the server from the service itself, ``pool.fork_server``), the
exit handler that would join every child (``pool.workers``) and the resource tracker it
never starts. So ``pyproject.toml`` pins ``multiprocess`` to the versions tested, and this
test says in one sentence which private name went missing when a new version drops one.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
POOL = REPO / "coordinator" / "service" / "pool"

# (module, attribute path, what the pool does with it)
PRIVATE = (
    ("multiprocess.forkserver", "_forkserver", "the process's one ForkServer object"),
    ("multiprocess.forkserver", "_forkserver._forkserver_pid", "set to the server it forked"),
    ("multiprocess.forkserver", "_forkserver._forkserver_address", "set to its socket path"),
    ("multiprocess.forkserver", "_forkserver._forkserver_alive_fd", "set to its liveness pipe"),
    ("multiprocess.util", "_exit_function", "unregistered: it joins every child at exit"),
    ("multiprocess.util", "_run_finalizers", "called instead, to remove the pymp-* dir"),
    ("multiprocess.resource_tracker", "_resource_tracker", "its tracker, never started"),
    ("multiprocess.resource_tracker", "_resource_tracker._fd", "set to /dev/null"),
    # the test suite's own (tests/worker/conftest.py stops both after a module)
    ("multiprocess.forkserver", "_forkserver._stop", "the suite stops the fork server"),
    ("multiprocess.resource_tracker", "_resource_tracker._pid", "the suite checks it"),
    ("multiprocess.resource_tracker", "_resource_tracker._stop", "and stops one that ran"),
)


def _pin() -> str:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if re.match(r"multiprocess\b", d)]
    return str(pin)


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


@pytest.mark.parametrize(("module", "path", "use"), PRIVATE)
def test_the_private_names_the_pool_uses_are_there(module: str, path: str, use: str) -> None:
    target: object = importlib.import_module(module)
    for name in path.split("."):
        if not hasattr(target, name):
            pytest.fail(
                f"multiprocess {version('multiprocess')} has no {module}.{path} ({use}); "
                f"coordinator/service/pool (or the suite) relies on it: adapt it to this version, "
                f"then move the pin in pyproject.toml ({_pin()})."
            )
        target = getattr(target, name)


def test_the_pin_has_an_upper_bound_that_holds_the_installed_version() -> None:
    pin = _pin()
    upper = re.search(r"<\s*([\d.]+)", pin)
    lower = re.search(r">=\s*([\d.]+)", pin)
    assert upper and lower, (
        f"pyproject.toml's {pin!r} must pin multiprocess to the versions tested (>=x,<y): the "
        "pool uses private names that any release may drop"
    )
    installed = _version_tuple(version("multiprocess"))
    assert _version_tuple(lower.group(1)) <= installed < _version_tuple(upper.group(1)), (
        f"multiprocess {version('multiprocess')} is installed, outside the pin {pin!r}"
    )


def test_every_private_multiprocess_name_in_the_pool_is_checked_here() -> None:
    checked = {f"{module}.{path}".rsplit(".", 1)[-1] for module, path, _ in PRIVATE}
    used: set[str] = set()
    for path in POOL.glob("*.py"):
        text = path.read_text()
        used |= set(re.findall(r"multiprocess\.\w+\.(_\w+)", text))
        if "multiprocess" in text:
            used |= set(re.findall(r"\b(?:server|tracker)\.(_\w+)", text))
    assert used <= checked, f"private multiprocess names the pool uses unchecked: {used - checked}"
    assert used, "the scan found no private name at all: it no longer reads the pool"
