"""What `specrun chat` shows and tells while the person types (issue 17), on real replies:
the grey rest of a suggestion, which alternative is shown, Down/Up, and when the service
must hear what is typed."""

from __future__ import annotations

import pytest

from coordinator.cli.chat.interactive import SuggestionState, ghost_rest
from protocol.wire.control import Branch, SpeculationInfo, SpeculationStatus, SuggestionReply

RUN = "run the tests"
NEG = "add a test for negative numbers"
DIFF = "show me the diff"


@pytest.mark.parametrize(("typed", "suggestion", "rest"), [
    ("", RUN, RUN),
    ("run", RUN, " the tests"),
    ("Run  the", RUN, " tests"),  # case and whitespace runs aside
    ("run the ", RUN, "tests"),  # a finished word: the rest starts at the next one
    ("RUN THE T", RUN, "ests"),
    ("run the", "run thereafter", "reafter"),  # a word being typed
    (RUN, RUN, ""),
    ("Run the tests.", RUN, ""),  # typed in full, with a final period
    ("run the ", "run thereafter", None),
    ("x", RUN, None),
    ("run the tests now", RUN, None),
])
def test_ghost_rest(typed: str, suggestion: str, rest: str | None) -> None:
    assert ghost_rest(typed, suggestion) == rest


def _spec(status: SpeculationStatus = "running", n: int = 1) -> SpeculationInfo:
    return SpeculationInfo(id=f"spec-{n}", status=status, turns=0, tool_uses=0,
                           files_written=(), boundary_reason=None, elapsed_s=0.1,
                           worker_pid=1000 + n, pipelined_suggestion=None)


def _reply(*texts: str, visible: bool = True, ranks: tuple[int, ...] = ()) -> SuggestionReply:
    ranks = ranks or tuple(range(len(texts)))
    branches = tuple(Branch(rank, text, _spec(n=rank))
                     for rank, text in zip(ranks, texts, strict=True))
    return SuggestionReply(req_id=1, text=texts[0], visible=visible, suppressed_reason=None,
                           speculation=branches[0].speculation, branches=branches)


def _state(reply: SuggestionReply | None) -> SuggestionState:
    state = SuggestionState()
    state.update(state.generation, reply, None)
    return state


def test_the_top_matching_alternative_is_shown_and_down_up_cycle() -> None:
    state = _state(_reply(RUN, NEG, DIFF))
    assert state.text == RUN
    state.cycle(1)
    assert state.text == NEG
    state.cycle(1)
    state.cycle(1)
    assert state.text == RUN  # around
    state.cycle(-1)
    assert state.text == DIFF

    # typing narrows to the alternatives it leads to; the pick follows while it matches
    state.set_typed("s")
    assert [b.text for b in state.matching()] == [DIFF] and state.text == DIFF
    state.set_typed("r")
    assert state.text == RUN
    state.set_typed("a")
    state.cycle(1)  # one left: nothing to cycle
    assert state.text == NEG
    state.set_typed("x")
    assert state.current() is None and state.text is None


def test_an_older_service_without_branches_and_what_is_not_shown() -> None:
    plain = SuggestionReply(req_id=1, text=NEG, visible=True, suppressed_reason=None,
                            speculation=_spec("completed"))
    state = _state(plain)
    assert [b.text for b in state.branches()] == [NEG] and state.text == NEG
    assert _state(_reply(NEG, visible=False)).text is None  # before the display delay
    accepted = SuggestionReply(req_id=1, text=NEG, visible=True, suppressed_reason=None,
                               speculation=_spec("accepted"))
    assert _state(accepted).text is None  # just taken; its successor comes next
    # typing left only a lower-ranked one: it is shown, with its own rank
    shown = _state(_reply(NEG, ranks=(1,))).current()
    assert shown is not None and shown.rank == 1


def test_the_service_hears_the_latest_text_once() -> None:
    state = _state(None)
    state.set_typed("ad")
    assert state.to_tell() is None  # no suggestion: nothing to keep or kill
    state.update(state.generation, _reply(RUN, NEG), None)
    assert state.to_tell() == (state.generation, "ad")  # it came after the typing
    assert state.to_tell() is None  # told
    state.set_typed("a")
    state.set_typed("add")  # two keystrokes while one request is in flight: one telling
    assert state.to_tell() == (state.generation, "add")
    assert state.to_tell() is None
    state.update(state.generation, _reply(NEG, ranks=(1,)), None)  # the service's answer
    assert state.to_tell() is None  # fewer alternatives: nothing new to check
    state.update(state.generation, _reply(DIFF), None)  # a new suggestion
    assert state.to_tell() == (state.generation, "add")
    state.set_typed("")
    assert state.to_tell() == (state.generation, "")  # erased: keep them all again
    assert state.to_tell() is None


def test_nothing_typed_is_not_told_and_a_submit_starts_over() -> None:
    state = _state(_reply(RUN, NEG))
    assert state.to_tell() is None
    state.set_typed("r")
    generation, _ = state.to_tell() or (None, None)
    state.clear()  # the line was submitted
    assert state.generation != generation and state.typed == "" and state.reply is None
    assert not state.update(generation or 0, _reply(RUN), None)  # a late answer is dropped
    state.accepting = True  # Tab put the whole suggestion in the line: not typing
    assert state.set_typed(RUN) is False and state.typed == ""
