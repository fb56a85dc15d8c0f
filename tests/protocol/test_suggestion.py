"""Suggestion prompt, schema, reply parsing, filters and the pipelined prompt (SPEC §5, §6)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.suggestion import (
    SINGLE_WORD_SUGGESTIONS,
    SUGGESTION_PROMPT,
    SUGGESTION_RESPONSE_FORMAT,
    SUGGESTION_SCHEMA,
    SUPPRESSION_REASONS,
    filter_suggestion,
    parse_suggestion_reply,
    pipelined_prompt,
)

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
