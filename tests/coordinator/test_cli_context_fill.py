"""The one line that says how full the context window is (status, chat)."""

from __future__ import annotations

from coordinator.cli.context_fill import context_line, worth_showing
from protocol.wire.control import ContextInfo


def test_the_line_says_how_full_where_the_window_comes_from_and_the_compactions() -> None:
    info = ContextInfo(32768, "endpoint", 13_400, 0.8, 2)
    assert context_line(info) == (
        "context 41% full: ~13,400 of 32,768 tokens (reported by the endpoint; compacts at "
        "80%; 2 compactions)"
    )
    fresh = ContextInfo(32768, "default", 900, 0.8, 0)
    assert context_line(fresh) == (
        "context 3% full: ~900 of 32,768 tokens (default: the endpoint reports none; "
        "compacts at 80%)"
    )


def test_chat_mentions_it_after_a_turn_once_half_full() -> None:
    assert not worth_showing(None)
    assert not worth_showing(ContextInfo(1000, "setting", 499, 0.8, 0))
    assert worth_showing(ContextInfo(1000, "setting", 500, 0.8, 0))
