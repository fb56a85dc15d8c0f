"""The token estimator: what it counts, and cutting text to a token budget."""

from __future__ import annotations

from protocol.model import tokens
from protocol.model.tokens import (
    cut_to_tokens,
    estimate_json_tokens,
    estimate_messages,
    estimate_request,
    estimate_tokens,
)
from protocol.wire.chat import Message, ToolResult, ToolSpec


def test_words_digits_symbols_and_non_ascii_are_counted_by_class() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("hello") == 1  # a short word is one token
    assert estimate_tokens("internationalization") == 4  # 20 letters / 5
    assert estimate_tokens("1234567") == 3  # digits in groups of three
    assert estimate_tokens("a b") == 2  # a single space merges with the next word
    assert estimate_tokens("{}") == 2  # 2 symbols / 1.6, rounded up
    assert estimate_tokens("部署服务") == 4  # one per CJK character


RUSSIAN = (
    "Сервис сжимает историю разговора, когда следующий запрос не помещается в окно модели.\n"
    "Быстрая модель пишет краткое изложение старых сообщений, а последние ходы остаются "
    "целыми.\nЕсли поставщик отвечает, что запрос слишком длинный, история сжимается и "
    "запрос повторяется один раз.\nРезультат одного инструмента никогда не занимает больше "
    "четверти окна.\n"
)
RUSSIAN_CL100K, RUSSIAN_O200K = 145, 78  # counted with gpt-tokenizer (npm), 2026-12-02


def test_cyrillic_is_counted_by_runs_of_letters_not_one_a_letter() -> None:
    """One token a letter put Russian at twice cl100k's count (305 here) and four times
    o200k's, so a Russian session compacted at half its real window; by runs it stays
    above both counts, as the estimate means to, but far less."""
    assert estimate_tokens("мир") == 2  # 3 letters / 1.5
    estimate = estimate_tokens(RUSSIAN)
    assert RUSSIAN_CL100K <= estimate <= 1.5 * RUSSIAN_CL100K
    assert estimate > RUSSIAN_O200K


def test_more_text_never_costs_fewer_tokens() -> None:
    text = "def add(a, b):\n    return a + b  # 部署\n" * 20
    counts = [estimate_tokens(text[:n]) for n in range(0, len(text), 7)]
    assert counts == sorted(counts)


def test_cut_to_tokens_gives_the_longest_prefix_within_the_budget() -> None:
    text = "word " * 1000
    cut = cut_to_tokens(text, 100)
    assert text.startswith(cut) and estimate_tokens(cut) <= 100
    assert estimate_tokens(text[: len(cut) + 1]) > 100
    assert cut_to_tokens("short", 100) == "short"


def test_a_request_is_its_tools_system_and_messages_as_on_the_wire() -> None:
    tools = (ToolSpec("read_file", "Read a file.", {"type": "object"}),)
    history = [Message.user("hi"), Message.tool((ToolResult("c1", "read_file", output="x"),))]
    whole = estimate_request("You are helpful.", history, tools)
    assert whole == (
        estimate_json_tokens([t.to_openai() for t in tools])
        + estimate_json_tokens({"role": "system", "content": "You are helpful."})
        + estimate_messages(history)
    )
    assert estimate_messages(history) == estimate_messages(history[:1]) + estimate_messages(
        history[1:]
    )


def test_a_long_texts_remembered_estimate_is_the_estimate_of_that_exact_text() -> None:
    # Same length, one character apart: the remembered count of one is never the other's.
    words = "word " * 200
    digits = "word " * 199 + "1234 "
    assert len(words) == len(digits) >= tokens.CACHED_FROM_CHARS
    for _ in range(2):  # the second round reads the remembered estimates
        assert estimate_tokens(words) == 200
        assert estimate_tokens(digits) == 201
    odd = "\ud800部署" * 300  # a lone surrogate (as JSON may decode one) still hashes
    assert estimate_tokens(odd) == estimate_tokens(odd) == 900


def test_the_remembered_estimates_stay_bounded() -> None:
    base = "x" * tokens.CACHED_FROM_CHARS
    for n in range(tokens.CACHE_ENTRIES + 50):
        assert estimate_tokens(f"{base} {n}") == (104 if n < 1000 else 105)  # 102.4 + digits
    assert len(tokens._CACHE._tokens) == tokens.CACHE_ENTRIES
