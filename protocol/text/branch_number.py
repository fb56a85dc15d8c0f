"""The one numbering of a suggestion's alternatives that a person reads and types.

The service ranks a suggestion's guesses from 0 (the best) and the wire keeps that rank
(``Branch.rank``, ``AcceptRequest.index``, ``accepted_by_rank``: the JSON a script reads).
A person sees and types *branch numbers* instead: branch 1 is the top guess, branch 2 the
next, and so on, in the chat (``↓↑ branch 2 of 3``), ``specrun suggestion``, ``specrun
accept --branch N``, ``specrun diff --branch N``, ``specrun stats``, the web page and the
demo. Every place that shows or reads a number goes through here, so the two never mix.
"""

from __future__ import annotations

BRANCH_OPTION = "--branch"
RETIRED_OPTION = "--index"


def branch_number(rank: int) -> int:
    """The number a person reads for the branch of wire rank ``rank`` (0 -> 1)."""
    return rank + 1


def rank_of(number: int) -> int:
    """The wire rank of the branch a person numbered ``number`` (1 -> 0)."""
    return number - 1


def branch_name(rank: int) -> str:
    """``branch 1`` for the top guess, ``branch 2`` for the next…"""
    return f"branch {branch_number(rank)}"


def branch_option(rank: int) -> str:
    """What a person types to pick the branch of wire rank ``rank``: ``--branch 2``."""
    return f"{BRANCH_OPTION} {branch_number(rank)}"


def below_one_sentence(number: int) -> str | None:
    """The one sentence a ``--branch`` below 1 gets (a 0 typed from the old numbering,
    say); None for a number that can name a branch."""
    if number >= 1:
        return None
    return (f"{BRANCH_OPTION} {number} names no branch: branches are numbered from 1, the "
            f"top guess is {BRANCH_OPTION} 1.")


def retired_index_sentence(value: str) -> str:
    """The one sentence an old ``--index`` (counted from 0) gets: which ``--branch`` it
    meant, so a script written for it is told, never sent to a neighbouring branch."""
    try:
        old = int(value)
    except ValueError:
        old = None
    meant = (f"`{RETIRED_OPTION} {old}` is `{BRANCH_OPTION} {branch_number(old)}`"
             if old is not None and old >= 0
             else f"`{RETIRED_OPTION} N` is `{BRANCH_OPTION} N+1`")
    return (f"{RETIRED_OPTION} (counted from 0) is retired: branches are numbered from 1, "
            f"the top guess is 1, so {meant}.")
