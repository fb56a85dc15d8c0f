"""Suggestion prompt, schema, reply parsing, filters and the pipelined prompt (design §5, §6)."""

from __future__ import annotations

import unicodedata

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.model import ChatRequest, build_body
from protocol.prompts.prediction import (
    ALTERNATIVES_KEY,
    ALTERNATIVES_SCHEMA_NAME,
    DUPLICATE_REASON,
    SINGLE_WORD_SUGGESTIONS,
    SUGGESTION_PROMPT,
    SUGGESTION_RESPONSE_FORMAT,
    SUGGESTION_SCHEMA,
    SUPPRESSION_REASONS,
    filter_alternatives,
    filter_suggestion,
    is_typed_prefix,
    matches_prompt,
    normalize_prompt,
    parse_alternatives_reply,
    parse_suggestion_reply,
    pipelined_prompt,
    requested_alternatives,
    suggestion_prompt,
    suggestion_response_format,
    suggestion_schema,
)
from protocol.wire.chat import Message

# --- the prompt ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "needle",
    [
        "SUGGESTION MODE",
        "next",
        "not what you think they ought to do",
        '"I was about to type that."',
        "latest messages and the request that started",
        '"run the tests"',
        '"try it out"',
        "options",
        '"yes" or "go ahead"',
        '"commit this" or "push it"',
        "error",
        "misunderstood",
        '"continue"',
        '"looks good"',
        '"thanks"',
        "a question",
        "Let me",
        "I'll",
        "Here's",
        "new idea",
        "more than one sentence",
        "not obvious, say nothing",
        "2 to 12 words",
        "the way this user writes",
        "no quotes",
        "no explanation",
    ],
)
def test_prompt_covers_every_point_of_the_spec(needle: str) -> None:
    assert needle in SUGGESTION_PROMPT


def test_schema_shape_and_description() -> None:
    assert SUGGESTION_SCHEMA["type"] == "object"
    assert SUGGESTION_SCHEMA["required"] == ["suggestion"]
    prop = SUGGESTION_SCHEMA["properties"]["suggestion"]
    assert prop["type"] == "string"
    assert prop["description"] == (
        "The predicted next user input (2-12 words), or empty string if nothing obvious."
    )
    assert SUGGESTION_RESPONSE_FORMAT["json_schema"]["schema"] is SUGGESTION_SCHEMA
    msgspec.json.encode(SUGGESTION_RESPONSE_FORMAT)  # serialisable as a request field


# --- reply parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"suggestion": "run the tests"}', "run the tests"),
        ('  {"suggestion": "  run the tests "}\n', "run the tests"),
        ('{"suggestion": ""}', ""),
        ('{"other": 1}', ""),
        ('{"suggestion": 3}', ""),
        ('```json\n{"suggestion": "commit this"}\n```', "commit this"),
        ('"push it"', "push it"),
        ("run the tests", "run the tests"),
        ("  run the tests \n", "run the tests"),
        ("'run the tests'", "run the tests"),
        ("\u201crun the tests\u201d", "run the tests"),
        ("`run the tests`", "run the tests"),
        ('{"suggestion": "broken', '{"suggestion": "broken'),
        ('say "hi" to them', 'say "hi" to them'),
        ("", ""),
        ('"', '"'),
    ],
)
def test_parse_suggestion_reply(reply: str, expected: str) -> None:
    assert parse_suggestion_reply(reply) == expected


# --- filters ------------------------------------------------------------------------------------

FILTER_CASES: list[tuple[str, str | None]] = [
    # empty
    ("", "empty"),
    ("   \n\t ", "empty"),
    # hidden_characters: controls, bidi, invisible format characters, anywhere
    ("run the tests\x1b[2K", "hidden_characters"),
    ("\x1b]52;c;ZWNobyBwd25lZA==\x07run the tests", "hidden_characters"),
    ("run the \u202etests", "hidden_characters"),
    ("run the\u200b tests", "hidden_characters"),
    ("run the tests\x9b", "hidden_characters"),
    ("/commit\x1b[8m", "hidden_characters"),  # before the slash rule
    ("run the tests \x1f", "hidden_characters"),  # even where strip() would remove it
    ("run\tthe tests", None),  # a tab is shown as space
    # 1 done
    ("done", "done"),
    ("Done", "done"),
    ("  DONE  ", "done"),
    # 2 meta_text
    ("nothing found", "meta_text"),
    ("Nothing found.", "meta_text"),
    ("Nothing to suggest here", "meta_text"),
    ("no suggestion at this point", "meta_text"),
    ("No suggestions", "meta_text"),
    ("silence is best right now", "meta_text"),
    ("I will stay silent now", "meta_text"),
    ("better staying silent here", "meta_text"),
    ("she stays silent today", "meta_text"),
    ("silence", "meta_text"),
    ("...Silence!", "meta_text"),
    ("(silence)", "meta_text"),
    # 3 meta_wrapped
    ("(no obvious next step)", "meta_wrapped"),
    ("[waiting for the user]", "meta_wrapped"),
    ("(multi\nline)", "meta_wrapped"),
    # 4 error_message
    ("API Error: 500 internal", "error_message"),
    ("Prompt is too long for this model", "error_message"),
    ("request timed out after 30s", "error_message"),
    ("Invalid API key provided", "error_message"),
    ("Image was too large to process", "error_message"),
    # 5 prefixed_label
    ("Suggestion: run the tests", "prefixed_label"),
    ("user: commit this", "prefixed_label"),
    ("next_step:\tpush it", "prefixed_label"),
    # 6 too_few_words
    ("tests", "too_few_words"),
    ("refactor", "too_few_words"),
    ("done.", "too_few_words"),
    ("yes", None),
    ("Yes", None),
    ("yes.", None),
    ("OK!", None),
    ("push", None),
    ("commit", None),
    ("quit", None),
    ("no", None),
    # the slash rule: a one-word slash command passes at once
    ("/commit", None),
    ("/compact", None),
    ("/great*", None),  # would be has_formatting and evaluative, but later rules are skipped
    ("/review this please", None),
    ("/review looks good", "evaluative"),  # two words: the slash rule does not apply
    # 7 too_many_words
    ("one two three four five six seven eight nine ten eleven twelve", None),
    ("one two three four five six seven eight nine ten eleven twelve thirteen", "too_many_words"),
    # 8 too_long
    ("a" * 49 + " " + "b" * 49, None),  # 99 chars
    ("a" * 50 + " " + "b" * 49, "too_long"),  # 100 chars
    # 9 multiple_sentences
    ("fix it. Then run the tests", "multiple_sentences"),
    ("really? Run it", "multiple_sentences"),
    ("stop! Now commit", "multiple_sentences"),
    ("run the tests.", None),  # trailing punctuation alone is fine
    ("bump to v1.2 then push", None),  # no whitespace after the dot
    ("fix it. then run the tests", None),  # lower case after the dot
    # 10 has_formatting
    ("run **all** the tests", "has_formatting"),
    ("run the\ntests", "has_formatting"),
    ("run the\r\ntests", "has_formatting"),
    # 11 evaluative
    ("thanks for that", "evaluative"),
    ("thank you, now push", "evaluative"),
    ("looks good to me", "evaluative"),
    ("sounds good, go on", "evaluative"),
    ("that works for me", "evaluative"),
    ("ok that worked", "evaluative"),
    ("that's all for now", "evaluative"),
    ("nice, commit it", "evaluative"),
    ("Great, commit it", "evaluative"),
    ("perfect now push", "evaluative"),
    ("makes sense, go ahead", "evaluative"),
    ("awesome work there", "evaluative"),
    ("excellent now deploy", "evaluative"),
    ("greatest hits playlist please", None),  # word boundary
    ("that\u2019s all folks", "evaluative"),  # curly apostrophe
    # 12 ai_voice
    ("Let me run the tests", "ai_voice"),
    ("I'll run the tests", "ai_voice"),
    ("I\u2019ll run the tests", "ai_voice"),
    ("I've fixed the bug", "ai_voice"),
    ("I'm running the tests", "ai_voice"),
    ("I can run the tests", "ai_voice"),
    ("I would run the tests", "ai_voice"),
    ("I think we should run the tests", "ai_voice"),
    ("I notice the tests fail", "ai_voice"),
    ("Here's the plan", "ai_voice"),
    ("here is the fix", "ai_voice"),
    ("Here are the results", "ai_voice"),
    ("That's fixed now", "ai_voice"),
    ("This is ready to merge", "ai_voice"),
    ("this will fix it", "ai_voice"),
    ("You can run the tests", "ai_voice"),
    ("you should commit this", "ai_voice"),
    ("You could push it", "ai_voice"),
    ("Sure, run the tests", "ai_voice"),
    ("Of course, pushing now", "ai_voice"),
    ("Certainly pushing now", "ai_voice"),
    ("sure go ahead", None),  # "sure," needs the comma
    ("run the tests and let me know", None),  # only the start counts
    # plain good suggestions
    ("run the tests", None),
    ("  run the tests  ", None),
    ("commit this", None),
    ("go ahead", None),
    ("try it out", None),
    ("use option 2", None),
]


@pytest.mark.parametrize(("text", "reason"), FILTER_CASES)
def test_filter_suggestion(text: str, reason: str | None) -> None:
    assert filter_suggestion(text) == reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("运行测试", None),
        ("好", "too_few_words"),  # 1 char
        ("好的", None),  # 2 chars: CJK ignores the single-word rule
        ("テストを実行して", None),
        ("테스트 실행해줘", None),
        ("测" * 30, None),
        ("测" * 31, "too_many_words"),
        # CJK counts characters, not words: 13 "words" of CJK are fine under 30 chars
        (" ".join("测" * 13), None),
        ("好的。", None),
        ("done", "done"),  # non-CJK rules are unaffected
        ("谢谢 thanks", "evaluative"),  # later rules still apply to CJK text
        ("Let me 运行测试", "ai_voice"),
        ("/提交", None),
    ],
)
def test_filter_cjk(text: str, reason: str | None) -> None:
    assert filter_suggestion(text) == reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("done", "done"),  # "done" is also a too_few_words single word: done wins
        ("(done)", "meta_wrapped"),  # wrapped and one word: meta_wrapped wins
        ("nothing to suggest: stay silent", "meta_text"),  # meta over prefixed_label
        ("API error: thanks", "error_message"),  # error over prefixed_label and evaluative
        ("Note: looks good", "prefixed_label"),  # label over evaluative
        ("thanks", "too_few_words"),  # too few words over evaluative
        ("great. Let me now run all the tests", "multiple_sentences"),
        ("Let me look. Great", "multiple_sentences"),
        ("Let me **run** it", "has_formatting"),  # formatting over ai_voice
        ("Let me say thanks", "evaluative"),  # evaluative over ai_voice
        ("x" * 120, "too_few_words"),  # one long word: too_few_words over too_long
        ("Here's " + "word " * 13, "too_many_words"),
    ],
)
def test_first_match_wins(text: str, reason: str) -> None:
    assert filter_suggestion(text) == reason


def test_reasons_are_known_and_listed_in_order() -> None:
    seen = {filter_suggestion(t) for t, _ in FILTER_CASES} - {None}
    assert seen == set(SUPPRESSION_REASONS)
    assert SUPPRESSION_REASONS[0] == "empty"
    assert SUPPRESSION_REASONS[1:] == (
        "hidden_characters",
        "done",
        "meta_text",
        "meta_wrapped",
        "error_message",
        "prefixed_label",
        "too_few_words",
        "too_many_words",
        "too_long",
        "multiple_sentences",
        "has_formatting",
        "evaluative",
        "ai_voice",
    )


def test_single_word_allow_list_is_exactly_the_specs() -> None:
    assert sorted(SINGLE_WORD_SUGGESTIONS) == sorted(
        [
            *("yes", "yeah", "yep", "yea", "yup", "sure", "ok", "okay", "push", "commit"),
            *("deploy", "stop", "continue", "check", "exit", "quit", "no"),
        ]
    )
    for word in SINGLE_WORD_SUGGESTIONS:
        assert filter_suggestion(word) is None
        assert filter_suggestion(word.upper()) is None


# --- pipelined prompt ---------------------------------------------------------------------------


def test_pipelined_prompt_layout() -> None:
    prompt = pipelined_prompt("run the tests", "All 12 tests pass.")
    assert prompt == (
        'The user just said: "run the tests"\n'
        "The assistant responded: All 12 tests pass.\n"
        "\n" + SUGGESTION_PROMPT
    )


def test_pipelined_prompt_tool_calls_only() -> None:
    prompt = pipelined_prompt("run the tests", "  \n ")
    assert prompt.splitlines()[1] == "The assistant responded: (tool calls executed)"
    assert pipelined_prompt("x", "").splitlines()[1].endswith("(tool calls executed)")


def test_pipelined_prompt_cuts_response_at_500_chars() -> None:
    text = "a" * 499 + "bc" + "d" * 100
    prompt = pipelined_prompt("go", text)
    first, second, blank, rest = prompt.split("\n", 3)
    assert first == 'The user just said: "go"'
    assert second == "The assistant responded: " + "a" * 499 + "b"
    assert blank == ""
    assert rest == SUGGESTION_PROMPT


def test_pipelined_prompt_keeps_multiline_text() -> None:
    prompt = pipelined_prompt("go", "line one\nline two")
    assert prompt.startswith(
        'The user just said: "go"\nThe assistant responded: line one\nline two\n\n'
    )


# --- properties ---------------------------------------------------------------------------------


@given(st.text(max_size=200))
def test_filter_is_total(text: str) -> None:
    reason = filter_suggestion(text)
    assert reason is None or reason in SUPPRESSION_REASONS
    # surrounding whitespace never changes the verdict
    assert filter_suggestion(f"  {text}\n") == reason


@given(st.from_regex(r"/[a-z-]{1,20}", fullmatch=True))
def test_one_word_slash_commands_always_pass(command: str) -> None:
    assert filter_suggestion(command) is None


@given(
    st.text(
        alphabet=st.characters(
            blacklist_categories=("Cs",), blacklist_characters="\"'`\u201c\u201d\u2018\u2019"
        ),
        max_size=80,
    )
)
def test_parse_reply_round_trips_json(text: str) -> None:
    reply = msgspec.json.encode({"suggestion": text}).decode()
    assert parse_suggestion_reply(reply) == text.strip()


# --- several ranked alternatives: the request ---------------------------------------------------


def test_one_alternative_is_exactly_the_single_suggestion_request() -> None:
    # byte-identical requests keep provider prefix caches and recorded tests valid
    assert suggestion_prompt() is SUGGESTION_PROMPT
    assert suggestion_prompt(1) is SUGGESTION_PROMPT
    assert suggestion_schema(1) is SUGGESTION_SCHEMA
    assert suggestion_response_format(1) is SUGGESTION_RESPONSE_FORMAT
    assert pipelined_prompt("go on", "Done.", 1) == pipelined_prompt("go on", "Done.")
    assert requested_alternatives(SUGGESTION_PROMPT) == 1


def _body(prompt: str, schema: dict) -> bytes:
    request = ChatRequest(
        system="sys",
        history=(Message.user("fix it"), Message.assistant("Fixed."), Message.user(prompt)),
        model="fast",
        purpose="suggestion",
        json_schema=schema,
        json_schema_name="suggestion",
    )
    return msgspec.json.encode(build_body(request, stream=False))


def test_one_alternative_sends_the_same_bytes_as_before() -> None:
    assert _body(suggestion_prompt(1), suggestion_schema(1)) == _body(
        SUGGESTION_PROMPT, SUGGESTION_SCHEMA
    )


@pytest.mark.parametrize("n", [2, 3, 5])
def test_alternatives_prompt_extends_the_single_prompt(n: int) -> None:
    prompt = suggestion_prompt(n)
    assert prompt.startswith(SUGGESTION_PROMPT)  # the shared part stays a cacheable prefix
    added = prompt.removeprefix(SUGGESTION_PROMPT)
    for needle in (
        f"up to {n} different guesses",
        "most likely",
        "every rule above",
        "not one step reworded",
        "when nothing is obvious, give none",
        "This replaces the reply format above",
        '{"suggestions": [',
        '{"suggestions": []}',
    ):
        assert needle in added, needle
    assert requested_alternatives(prompt) == n
    assert suggestion_prompt(n) == prompt  # deterministic


def test_pipelined_prompt_can_ask_for_alternatives() -> None:
    prompt = pipelined_prompt("run the tests", "All pass.", 3)
    assert prompt.endswith(suggestion_prompt(3))
    assert prompt.startswith('The user just said: "run the tests"\n')
    assert requested_alternatives(prompt) == 3


def test_requested_alternatives_reads_the_last_marker_only_on_its_own_line() -> None:
    quoted = f"{suggestion_prompt(2)}\n{suggestion_prompt(4)}"
    assert requested_alternatives(quoted) == 4
    assert requested_alternatives("please [RANKED GUESSES: up to 3] maybe") == 1
    assert requested_alternatives("") == 1


@pytest.mark.parametrize("n", [2, 4])
def test_alternatives_schema(n: int) -> None:
    schema = suggestion_schema(n)
    assert schema["type"] == "object"
    assert schema["required"] == [ALTERNATIVES_KEY]
    assert schema["additionalProperties"] is False
    prop = schema["properties"][ALTERNATIVES_KEY]
    assert prop["type"] == "array"
    assert prop["items"] == {"type": "string"}
    assert prop["maxItems"] == n
    assert f"Up to {n}" in prop["description"]
    assert suggestion_schema(n) == schema and suggestion_schema(n) is not schema  # fresh copies
    fmt = suggestion_response_format(n)
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == ALTERNATIVES_SCHEMA_NAME
    assert fmt["json_schema"]["schema"] == schema
    msgspec.json.encode(fmt)


@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_the_number_of_alternatives_must_be_a_positive_integer(bad: object) -> None:
    for call in (
        suggestion_prompt,
        suggestion_schema,
        suggestion_response_format,
        lambda n: parse_alternatives_reply("x y", n),
    ):
        with pytest.raises(ValueError, match="integer >= 1"):
            call(bad)  # type: ignore[operator]


# --- several ranked alternatives: parsing what providers send ----------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"suggestions": ["run the tests", "commit this"]}', ["run the tests", "commit this"]),
        ('{"suggestions": ["a b", "c d", "e f", "g h"]}', ["a b", "c d", "e f"]),  # cut to n
        ('{"suggestions": []}', []),
        ('{"suggestions": ["  run it ", "", "   ", 7, null, ["x"]]}', ["run it"]),
        ('{"suggestions": "run the tests"}', ["run the tests"]),
        ('{"suggestions": [{"suggestion": "a b"}, {"text": "c d", "rank": 2}]}', ["a b", "c d"]),
        ('["run the tests", "push it"]', ["run the tests", "push it"]),
        ('```json\n{"suggestions": ["commit this"]}\n```', ["commit this"]),
        ('```\n["a b", "c d"]\n```', ["a b", "c d"]),
        ('Sure! Here they are:\n```json\n{"suggestions": ["x y"]}\n```\n', ["x y"]),
        ('My guesses: {"suggestions": ["try it out"]}', ["try it out"]),
        ('{"suggestion": "go ahead"}', ["go ahead"]),  # a model answering the old question
        ('{"suggestion": ""}', []),
        ('"push it"', ["push it"]),
        ("run the tests", ["run the tests"]),
        ("  'run the tests'  \n", ["run the tests"]),
        ("\u201crun the tests\u201d", ["run the tests"]),
        ('["\\"quoted\\" guess", "`ticked guess`"]', ['"quoted" guess', "ticked guess"]),
        (
            "1. run the tests\n2. commit this\n3. push it\n4. deploy",
            ["run the tests", "commit this", "push it"],
        ),
        ("- run the tests\n- commit this", ["run the tests", "commit this"]),
        ("My guesses:\n* run the tests\n* commit this", ["run the tests", "commit this"]),
        ("1) run the tests", ["run the tests"]),
        ("check items[0] first", ["check items[0] first"]),
        ('set {"debug": true} in the config', ['set {"debug": true} in the config']),
        # garbage
        ("", []),
        ("   \n ", []),
        ("I think the user will\nprobably want to run the tests.", []),
        ("- run the tests\nand then maybe commit", []),
        ('{"suggestions": ["run the te', []),
        ('["run the tests", "comm', []),
        ('{"other": ["a b"]}', []),
        ("42", []),
        ("null", []),
        ("true", []),
    ],
)
def test_parse_alternatives_reply(reply: str, expected: list[str]) -> None:
    assert parse_alternatives_reply(reply, 3) == expected


def test_parse_alternatives_reply_with_one_alternative() -> None:
    assert parse_alternatives_reply('{"suggestions": ["a b", "c d"]}', 1) == ["a b"]
    assert parse_alternatives_reply('{"suggestion": "a b"}', 1) == ["a b"]


_GUESS = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",), blacklist_characters="\"'`\u201c\u201d\u2018\u2019"
    ),
    max_size=40,
)


@given(st.text(max_size=300), st.integers(1, 6))
def test_parse_alternatives_is_total(reply: str, n: int) -> None:
    found = parse_alternatives_reply(reply, n)
    assert isinstance(found, list) and len(found) <= n
    assert all(isinstance(g, str) and g and g == g.strip() for g in found)


@given(
    st.lists(_GUESS, max_size=8), st.integers(1, 6), st.sampled_from(["object", "list", "fence"])
)
def test_parse_alternatives_round_trips_json(guesses: list[str], n: int, shape: str) -> None:
    value: object = {ALTERNATIVES_KEY: guesses} if shape != "list" else guesses
    reply = msgspec.json.encode(value).decode()
    if shape == "fence":
        reply = f"```json\n{reply}\n```"
    expected = [g.strip() for g in guesses if g.strip()][:n]
    assert parse_alternatives_reply(reply, n) == expected


# --- several ranked alternatives: filters ------------------------------------------------------


def test_filter_alternatives_keeps_rank_order_and_says_why() -> None:
    kept, suppressed = filter_alternatives(
        [
            "  run the tests ",
            "Looks good, thanks",
            "Run  the tests.",
            "commit this",
            "RUN THE TESTS",
            "",
            "push it",
        ]
    )
    assert kept == ["run the tests", "commit this", "push it"]
    assert suppressed == [
        ("Looks good, thanks", "evaluative"),
        ("Run  the tests.", DUPLICATE_REASON),
        ("RUN THE TESTS", DUPLICATE_REASON),
        ("", "empty"),
    ]


def test_filter_alternatives_does_not_let_a_suppressed_guess_shadow_a_later_one() -> None:
    # the first is suppressed (a label), so the second is no duplicate of anything kept
    kept, suppressed = filter_alternatives(["Note: run the tests", "run the tests"])
    assert kept == ["run the tests"]
    assert suppressed == [("Note: run the tests", "prefixed_label")]


def test_filter_alternatives_of_nothing() -> None:
    assert filter_alternatives([]) == ([], [])
    assert filter_alternatives(iter(["run the tests"])) == (["run the tests"], [])


@given(st.lists(st.text(max_size=40), max_size=8))
def test_filter_alternatives_partitions_the_guesses(guesses: list[str]) -> None:
    kept, suppressed = filter_alternatives(guesses)
    assert len(kept) + len(suppressed) == len(guesses)
    assert all(filter_suggestion(k) is None for k in kept)
    assert len({normalize_prompt(k) for k in kept}) == len(kept)
    reasons = {*SUPPRESSION_REASONS, DUPLICATE_REASON}
    assert all(reason in reasons for _, reason in suppressed)
    # rank order: kept texts appear in the order they were given
    positions = [next(i for i, g in enumerate(guesses) if g.strip() == k) for k in kept]
    assert positions == sorted(positions)


# --- normalization, typed prefixes and matches --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("Run the tests", "run the tests"),
        ("  run\tthe \n tests  ", "run the tests"),
        ("run the tests.", "run the tests"),
        ("run the tests!!", "run the tests"),
        ("run the tests\u2026", "run the tests"),
        ("run the tests . ", "run the tests"),
        ("push it?", "push it?"),
        ("don\u2019t push", "don't push"),
        ("\uff32un the tests\uff01", "run the tests"),  # full-width letters and "！"
        ("run\u00a0the tests", "run the tests"),
        ("STRASSE", "strasse"),
        ("Stra\u00dfe", "strasse"),
        ("\u30c6\u30b9\u30c8\u3092\u5b9f\u884c\u3002", "\u30c6\u30b9\u30c8\u3092\u5b9f\u884c"),
        ("fix v1.2 now", "fix v1.2 now"),
        ("...", ""),
        ("", ""),
    ],
)
def test_normalize_prompt(text: str, normal: str) -> None:
    assert normalize_prompt(text) == normal


@pytest.mark.parametrize(
    ("typed", "suggestion", "match"),
    [
        ("run the tests", "run the tests", True),
        ("Run the tests.", "run the tests", True),
        ("  RUN   THE TESTS  ", "run the tests", True),
        ("run the tests", "Run the tests!", True),
        ("push it?", "push it", False),
        ("run the test", "run the tests", False),
        ("run the tests now", "run the tests", False),
        ("", "run the tests", False),
        ("", "", False),
        ("...", "!", False),
    ],
)
def test_matches_prompt(typed: str, suggestion: str, match: bool) -> None:
    assert matches_prompt(typed, suggestion) is match


@pytest.mark.parametrize(
    ("typed", "alive"),
    [
        ("", True),
        ("   ", True),
        ("r", True),
        ("Run  Th", True),
        ("run the ", True),
        ("run the  tests", True),
        ("run the tests", True),
        ("run the tests ", True),
        ("run the tests.", True),
        (" run", True),
        ("run thereafter", False),
        ("run the tests now", False),
        ("run the tests?", False),
        ("ran", False),
        ("run  x", False),
        ("runthe", False),
    ],
)
def test_is_typed_prefix(typed: str, alive: bool) -> None:
    assert is_typed_prefix(typed, "Run the tests") is alive


def test_a_finished_word_must_be_finished_in_the_guess_too() -> None:
    assert is_typed_prefix("run the", "run thereafter")
    assert not is_typed_prefix("run the ", "run thereafter")


def test_a_blank_guess_keeps_nothing_alive() -> None:
    assert not is_typed_prefix("", "   ")
    assert not is_typed_prefix("x", "")


_NFC_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40).map(
    lambda t: unicodedata.normalize("NFKC", t)
)


@given(_NFC_TEXT)
def test_normalize_is_idempotent(text: str) -> None:
    once = normalize_prompt(text)
    assert normalize_prompt(once) == once


@given(_NFC_TEXT, st.data())
def test_every_prefix_of_a_guess_keeps_it_alive(suggestion: str, data: st.DataObject) -> None:
    if not normalize_prompt(suggestion):
        return
    cut = data.draw(st.integers(0, len(suggestion)))
    assert is_typed_prefix(suggestion[:cut], suggestion)


@given(_NFC_TEXT, _NFC_TEXT)
def test_a_match_is_symmetric_and_keeps_the_guess_alive(a: str, b: str) -> None:
    assert matches_prompt(a, b) is matches_prompt(b, a)
    if matches_prompt(a, b):
        assert is_typed_prefix(a, b)
    assert matches_prompt(a, a) is bool(normalize_prompt(a))
