"""The single quote and regex scanners of worker.shell.lexer, and that every caller agrees."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.shell import classify
from worker.shell.lexer import (
    ScanError,
    analyze_word,
    double_quote_end,
    regex_literal_end,
    scan,
    single_quote_end,
    skip_to,
)


def _one_by_one(s: str, i: int, stops: str) -> int:
    """The loop every reader of the lexer used to write out for itself."""
    while i < len(s):
        c = s[i]
        if c == "\\" and "\\" not in stops:
            i += 2
            continue
        if c in stops:
            return i
        i += 1
    return len(s)


def test_skip_to_steps_over_escapes_and_stops_where_told() -> None:
    assert skip_to('ab\\"c"d', 0, '"') == 5
    assert skip_to("ab\\", 0, '"') == 3  # a lone backslash at the end: stepped over
    assert skip_to("a\\b", 0, "\\b") == 1  # the caller reads backslashes itself
    assert skip_to("x-^]y", 0, "]") == 3  # characters a regex class would read
    assert skip_to("x-^]y", 0, "^-") == 1
    assert skip_to("abc", 3, "a") == 3


_CHARS = st.text(alphabet="ab\\\"'`$(){}[]^-\n ;&|<>", max_size=40)


@given(_CHARS, st.text(alphabet="\\\"'`$(){}[]^-\n ;&|<>", min_size=1, max_size=5))
def test_skip_to_is_the_loop_it_replaced(text: str, stops: str) -> None:
    for start in range(len(text) + 1):
        assert skip_to(text, start, stops) == _one_by_one(text, start, stops)


def test_quote_ends() -> None:
    assert single_quote_end("'ab'c", 0) == 4
    assert double_quote_end('"a\\"b"c', 0) == 6
    with pytest.raises(ScanError):
        single_quote_end("'ab", 0)
    with pytest.raises(ScanError):
        double_quote_end('"ab\\"', 0)


@pytest.mark.parametrize("text", ['ls "abc', 'ls $(echo "x)', 'ls <"abc', "ls <'abc"])
def test_unterminated_quotes_are_errors_everywhere(text: str) -> None:
    """Once, the paren skipper ran past an unterminated '"' that the word reader refused."""
    assert scan(text).error is not None
    assert not classify(text).read_only


def test_analyze_word_unterminated_is_not_literal() -> None:
    assert analyze_word('"/dev/null').literal_value() is None
    assert analyze_word("'/dev/null").literal_value() is None
    assert analyze_word('"/dev/null"').literal_value() == "/dev/null"


def test_regex_literal_end_two_readings() -> None:
    assert regex_literal_end("a/b", 0, "/", brackets=True) == 2
    assert regex_literal_end("[/]/x", 0, "/", brackets=True) == 4
    assert regex_literal_end("[/]/x", 0, "/", brackets=False) == 2
    assert regex_literal_end("[]/]/", 0, "/", brackets=True) == 5
    assert regex_literal_end("[^]/]/", 0, "/", brackets=True) == 6
    assert regex_literal_end("[[:alpha:]/]/", 0, "/", brackets=True) == 13
    for bad in ("abc", "a\nb/", "a\\"):
        with pytest.raises(ScanError):
            regex_literal_end(bad, 0, "/", brackets=True)
