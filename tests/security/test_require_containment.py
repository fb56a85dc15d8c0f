"""The CI switch: with ``SPECRUN_REQUIRE_CONTAINMENT=1`` a test that cannot prove a
containment layer on this machine fails instead of being skipped (``.ci/run`` sets it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import pytest_runtest_setup
from tests.support import REPO, REQUIRE_CONTAINMENT_ENV, containment_unavailable


def test_without_the_switch_a_missing_layer_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_CONTAINMENT_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no Landlock"):
        containment_unavailable("no Landlock")


def test_with_the_switch_a_missing_layer_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_CONTAINMENT_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="no Landlock"):
        containment_unavailable("no Landlock")


def test_the_marker_goes_through_the_same_rule(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    request.node.add_marker(pytest.mark.containment(missing=None))
    pytest_runtest_setup(request.node)  # nothing missing: runs
    request.node.add_marker(pytest.mark.containment(missing="no user namespaces"))
    monkeypatch.setenv(REQUIRE_CONTAINMENT_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="no user namespaces"):
        pytest_runtest_setup(request.node)


def test_ci_sets_the_switch_and_no_test_skips_for_containment_on_its_own() -> None:
    assert f"export {REQUIRE_CONTAINMENT_ENV}=1" in (REPO / ".ci" / "run").read_text()
    # Every containment skip goes through tests/support.py: a bare skip naming a layer
    # would be silent on CI.
    words = ("landlock", "namespace", "seccomp", "containment", "sandbox", "cgroup")
    offenders = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.name == "support.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            bare = "pytest.skip(" in line or "mark.skipif(" in line
            if bare and any(word in line.lower() for word in words):
                offenders.append(f"{Path(path).relative_to(REPO)}:{number}")
    assert offenders == []
