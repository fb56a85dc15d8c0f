"""``WorkerSeams``: what a test builds into a worker, checked where it is built."""

from __future__ import annotations

import pytest

from protocol.wire.seams import NO_SEAMS, WorkerSeams


def test_production_has_none() -> None:
    assert not NO_SEAMS.any_set
    assert NO_SEAMS.describe() == "none"
    assert WorkerSeams() == NO_SEAMS


def test_each_seam_is_named_in_the_log_line() -> None:
    seams = WorkerSeams(ungated_command="touch x", bypass_classifier=True, broken_layer="landlock")
    assert seams.any_set
    assert seams.describe() == (
        "ungated command 'touch x', classifier bypassed, landlock layer broken"
    )


def test_a_layer_that_does_not_exist_is_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match=r"broken_layer must be one of filesystem, .*'landlok'"):
        WorkerSeams(broken_layer="landlok")
