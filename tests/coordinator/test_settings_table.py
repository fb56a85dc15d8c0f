"""The docs name every setting and every error code the code has, and no other: the
settings table of docs/configuration.md is generated from ``Settings`` and checked here;
docs/cli.md's error codes are read off ``protocol.wire.control.ErrorCode``."""

from __future__ import annotations

import re
from typing import get_args

from coordinator.settings import KEYS
from coordinator.settings_table import DOC, settings_table, with_table
from protocol.wire.control import ErrorCode


def test_the_settings_table_in_the_docs_is_the_one_the_code_makes() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert with_table(doc) == doc, (
        "the settings table is stale: run python -m coordinator.settings_table --write"
    )


def test_the_table_has_one_row_per_setting() -> None:
    rows = [line for line in settings_table().splitlines() if line.startswith("| `")]
    named = [re.match(r"\| `(\w+)`", row).group(1) for row in rows]  # type: ignore[union-attr]
    assert named == list(KEYS)
    assert len(named) >= 30


def test_the_documented_error_codes_are_exactly_the_wire_codes() -> None:
    doc = (DOC.parent / "cli.md").read_text(encoding="utf-8")
    listed = re.search(r"\(codes:\s*([^)]*)\)", doc)
    assert listed, "docs/cli.md no longer lists the error codes"
    documented = set(re.findall(r"`(\w+)`", listed.group(1)))
    assert documented == set(get_args(ErrorCode))
