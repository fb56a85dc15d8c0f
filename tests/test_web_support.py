"""The browser tests' own support (tests/web_support.py). Not under the browser test modules'
shared Chromium: Playwright's sync API runs one instance per thread, and this test starts
its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import processes_with_env
from tests.web_support import browser, module_chromium


def test_the_shared_chromium_does_not_belong_to_the_module_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module's service (``running_service``) points SPECRUN_RUNTIME_DIR at its runtime
    directory while it runs, and at its end kills whatever still carries it. The module's
    shared Chromium, launched meanwhile, must not carry it: killed, it left its profile
    directory in /tmp (and the teardown waited 10 s for it first)."""
    runtime = tmp_path / "run"
    runtime.mkdir()
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(runtime))
    with module_chromium(), browser() as context:
        context.new_page().goto("data:text/html,<p>shown</p>")
        assert processes_with_env(runtime) == []
