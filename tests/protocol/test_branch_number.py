"""The one numbering people read and type (branch 1 is the top guess) against the wire's
0-based rank, and the sentences an old or impossible number gets."""

from __future__ import annotations

import pytest

from protocol.text.branch_number import (
    below_one_sentence,
    branch_name,
    branch_number,
    branch_option,
    rank_of,
    retired_index_sentence,
)


def test_a_branch_number_is_the_rank_plus_one_and_back() -> None:
    assert [branch_number(rank) for rank in range(4)] == [1, 2, 3, 4]
    assert all(rank_of(branch_number(rank)) == rank for rank in range(10))
    assert branch_name(0) == "branch 1" and branch_option(2) == "--branch 3"


@pytest.mark.parametrize(("old", "meant"), [("0", "`--index 0` is `--branch 1`"),
                                            ("2", "`--index 2` is `--branch 3`"),
                                            ("-1", "`--index N` is `--branch N+1`"),
                                            ("two", "`--index N` is `--branch N+1`")])
def test_an_old_index_is_told_the_branch_it_meant(old: str, meant: str) -> None:
    sentence = retired_index_sentence(old)
    assert sentence.startswith("--index (counted from 0) is retired: branches are numbered "
                               "from 1, the top guess is 1")
    assert sentence.endswith(meant + ".") and sentence.count(".") >= 1


def test_only_a_number_below_one_gets_a_sentence() -> None:
    assert below_one_sentence(1) is None and below_one_sentence(4) is None
    assert below_one_sentence(0) == ("--branch 0 names no branch: branches are numbered from "
                                     "1, the top guess is --branch 1.")
