"""The suite's longest-first module list (tests/conftest.py) names modules that exist: a
module renamed or split would otherwise lose its place silently and be started last."""

from __future__ import annotations

from tests.conftest import LONGEST_FIRST
from tests.support import REPO


def test_every_longest_first_module_exists_once() -> None:
    missing = [path for path in LONGEST_FIRST if not (REPO / path).is_file()]
    assert missing == [], f"tests/conftest.py LONGEST_FIRST names no such module: {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
