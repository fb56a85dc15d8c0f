"""The single quote and regex scanners of worker.shell.lexer, and that every caller agrees."""

from __future__ import annotations

import pytest

from worker.shell import classify
from worker.shell.lexer import (
    ScanError,
    analyze_word,
    double_quote_end,
    regex_literal_end,
    scan,
    single_quote_end,
)


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
