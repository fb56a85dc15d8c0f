"""Predicting the next prompt: the prompt, the structured-output schema, reply parsing and filters.

Shared by the coordinator's prediction (after a main turn) and the worker's pipelined
suggestion (after a completed speculation), so both ask the model the same way and suppress the
same bad guesses (design §5 "Pipelined suggestion", §6).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any, Final, get_args

import msgspec

from protocol.text.inert_text import find_hidden
from protocol.wire.work import FilterReason

__all__ = [
    "ALTERNATIVES_KEY",
    "ALTERNATIVES_SCHEMA_NAME",
    "DUPLICATE_REASON",
    "PIPELINED_RESPONSE_CHARS",
    "SINGLE_WORD_SUGGESTIONS",
    "SUGGESTION_PROMPT",
    "SUGGESTION_RESPONSE_FORMAT",
    "SUGGESTION_SCHEMA",
    "SUPPRESSION_REASONS",
    "FilterReason",
    "filter_alternatives",
    "filter_suggestion",
    "is_typed_prefix",
    "matches_prompt",
    "normalize_prompt",
    "parse_alternatives_reply",
    "parse_suggestion_reply",
    "pipelined_prompt",
    "requested_alternatives",
    "suggestion_prompt",
    "suggestion_response_format",
    "suggestion_schema",
]

SUGGESTION_PROMPT: Final[str] = """\
[SUGGESTION MODE]
Step out of the assistant role for this one reply. Your only job now is to guess the next \
message the user will type into this chat.

Guess what the user would naturally write next, not what you think they ought to do. A good \
guess passes one test: on seeing it, the user thinks "I was about to type that."

How to guess:
- Start from the user's own words: their latest messages and the request that started this \
work. The assistant's last reply matters only as the thing they are reacting to.
- Typical cases:
  - a fix they asked for is finished and they wanted tests run -> "run the tests"
  - new code was just written -> "try it out"
  - the assistant laid out options -> the option this user would most likely pick
  - the assistant asked whether to keep going -> "yes" or "go ahead"
  - the task is done and the follow-up is obvious -> "commit this" or "push it"
  - the last turn ended in an error, or the assistant misunderstood the user -> say nothing
- Be concrete: "run the tests" is better than "continue".

Never suggest:
- a verdict or thanks, such as "looks good" or "thanks"
- a question
- words in the assistant's voice, such as "Let me...", "I'll..." or "Here's..."
- a new idea or task the user has not asked about
- more than one sentence

When the next step is not obvious, say nothing; an empty reply is a good answer. Otherwise \
write 2 to 12 words, phrased the way this user writes (their casing, their brevity, their \
language).

Reply with the suggestion text alone: no quotes, no label, no explanation.
"""

SUGGESTION_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "suggestion": {
            "type": "string",
            "description": (
                "The predicted next user input (2-12 words), or empty string if nothing obvious."
            ),
        }
    },
    "required": ["suggestion"],
    "additionalProperties": False,
}
"""JSON schema of the structured answer. Treat as read-only (it is shared)."""

SUGGESTION_RESPONSE_FORMAT: Final[dict[str, Any]] = {
    "type": "json_schema",
    "json_schema": {"name": "next_user_input", "strict": True, "schema": SUGGESTION_SCHEMA},
}
"""The OpenAI ``response_format`` value that asks for :data:`SUGGESTION_SCHEMA`."""

PIPELINED_RESPONSE_CHARS: Final = 500
"""How much of the speculated assistant text the pipelined prompt quotes."""

SINGLE_WORD_SUGGESTIONS: Final[frozenset[str]] = frozenset(
    (
        *("yes", "yeah", "yep", "yea", "yup", "sure", "ok", "okay"),
        *("push", "commit", "deploy", "stop", "continue", "check", "exit", "quit", "no"),
    )
)
"""One-word replies a user really types; any other single word is suppressed."""

SUPPRESSION_REASONS: Final[tuple[FilterReason, ...]] = get_args(FilterReason)
"""Every reason :func:`filter_suggestion` can return, in the order the checks run."""

# --- reply parsing ---------------------------------------------------------------------------

_QUOTE_PAIRS: Final = (
    ('"', '"'),
    ("'", "'"),
    ("`", "`"),
    ("\u201c", "\u201d"),
    ("\u2018", "\u2019"),
)
_FENCE = re.compile(r"^```[\w-]*\s*\n(.*?)\n?```$", re.DOTALL)


def _unquote(text: str) -> str:
    text = text.strip()
    changed = True
    while changed and len(text) >= 2:
        changed = False
        for left, right in _QUOTE_PAIRS:
            if text.startswith(left) and text.endswith(right):
                text = text[len(left) : len(text) - len(right)].strip()
                changed = True
                break
    return text


def parse_suggestion_reply(text: str) -> str:
    """The suggestion inside a model reply.

    A JSON object (optionally in a code fence) yields its ``suggestion`` string; an object without
    one yields ``""`` (nothing to suggest). A JSON string literal yields that string. Anything else
    is taken as raw text: trimmed, with surrounding quotes removed.
    """
    raw = text.strip()
    fenced = _FENCE.match(raw)
    candidate = fenced.group(1).strip() if fenced else raw
    if candidate[:1] in ("{", '"'):
        try:
            value = msgspec.json.decode(candidate)
        except msgspec.DecodeError:
            value = None
        if isinstance(value, dict):
            found = value.get("suggestion")
            return _unquote(found) if isinstance(found, str) else ""
        if isinstance(value, str):
            return _unquote(value)
    return _unquote(candidate if fenced else raw)


# --- filters (design §6), first match wins -------------------------------------------------------

_META_SILENCE = re.compile(r"\bsilence is\b|\bstay(s|ing)? silent\b")
_META_ONLY_SILENCE = re.compile(r"^\W*silence\W*$")
_WRAPPED = re.compile(r"^\(.*\)$|^\[.*\]$", re.DOTALL)
_ERROR_PREFIXES: Final = (
    "api error:",
    "prompt is too long",
    "request timed out",
    "invalid api key",
    "image was too large",
)
_PREFIXED_LABEL = re.compile(r"^\w+:\s")
_MULTIPLE_SENTENCES = re.compile(r"[.!?]\s+[A-Z]")
_EVALUATIVE = re.compile(
    r"\b(thanks|thank you|looks good|sounds good|that works|that worked|that's all|nice|great"
    r"|perfect|makes sense|awesome|excellent)\b"
)
_AI_VOICE = re.compile(
    r"^(let me|i'll|i've|i'm|i can|i would|i think|i notice|here's|here is|here are|that's"
    r"|this is|this will|you can|you should|you could|sure,|of course|certainly)",
    re.IGNORECASE,
)
_CJK = re.compile("[\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7af]")
_CJK_MIN_CHARS: Final = 2
_CJK_MAX_CHARS: Final = 30
_MAX_WORDS: Final = 12
_MAX_CHARS: Final = 100
_SINGLE_WORD_TRAILING = ".!"


def _is_too_few_words(words: list[str]) -> bool:
    if len(words) >= 2:
        return False
    return words[0].lower().rstrip(_SINGLE_WORD_TRAILING) not in SINGLE_WORD_SUGGESTIONS


def filter_suggestion(text: str) -> FilterReason | None:
    """Why ``text`` must not be shown as a suggestion, or ``None`` if it may be shown.

    Checks run in the order of :data:`SUPPRESSION_REASONS` on the trimmed text
    (``hidden_characters`` on the text as given); the first match wins. A text starting with
    ``/`` (a slash command) that passed the earlier checks is accepted at once, skipping every
    later check. Text with CJK characters is measured in characters
    (fewer than 2 / more than 30) instead of words.
    """
    trimmed = text.strip()
    if not trimmed:
        return "empty"
    # A control, bidi or invisible character would make what is shown differ from what
    # Tab sends (cursor movement hiding half of it, reordered or look-alike text): such
    # a guess is never shown, escaped or not. Line breaks are has_formatting's business.
    if find_hidden(text, allow="\t\n\r") is not None:
        return "hidden_characters"
    # Curly apostrophes count as straight ones ("I’ll" is still assistant voice).
    lower = trimmed.lower().replace("\u2019", "'")
    words = trimmed.split()

    if lower == "done":
        return "done"
    if (
        lower in ("nothing found", "nothing found.")
        or lower.startswith(("nothing to suggest", "no suggestion"))
        or _META_SILENCE.search(lower)
        or _META_ONLY_SILENCE.match(lower)
    ):
        return "meta_text"
    if _WRAPPED.match(trimmed):
        return "meta_wrapped"
    if lower.startswith(_ERROR_PREFIXES):
        return "error_message"
    if _PREFIXED_LABEL.match(trimmed):
        return "prefixed_label"
    if trimmed.startswith("/") and len(words) < 2:
        return None  # a slash command: nothing later applies
    if _CJK.search(trimmed):
        if len(trimmed) < _CJK_MIN_CHARS:
            return "too_few_words"
        if len(trimmed) > _CJK_MAX_CHARS:
            return "too_many_words"
    else:
        if _is_too_few_words(words):
            return "too_few_words"
        if len(words) > _MAX_WORDS:
            return "too_many_words"
    if len(trimmed) >= _MAX_CHARS:
        return "too_long"
    if _MULTIPLE_SENTENCES.search(trimmed):
        return "multiple_sentences"
    if "\n" in trimmed or "\r" in trimmed or "*" in trimmed:
        return "has_formatting"
    if _EVALUATIVE.search(lower):
        return "evaluative"
    if _AI_VOICE.match(trimmed.replace("\u2019", "'")):
        return "ai_voice"
    return None


# --- pipelined suggestion ----------------------------------------------------------------------


def pipelined_prompt(suggestion: str, assistant_text: str, n: int = 1) -> str:
    """The request text for the suggestion that follows an accepted speculation.

    ``assistant_text`` is all visible model text of the speculation; when it is blank (the model
    only called tools) the prompt says ``(tool calls executed)``. ``n`` > 1 asks for that many
    ranked alternatives (see :func:`suggestion_prompt`); ``n == 1`` gives today's text exactly.
    """
    response = assistant_text.strip()[:PIPELINED_RESPONSE_CHARS] or "(tool calls executed)"
    return (
        f'The user just said: "{suggestion}"\n'
        f"The assistant responded: {response}\n"
        f"\n"
        f"{suggestion_prompt(n)}"
    )


# --- several ranked alternatives in one request (speculationBranches > 1) ---------------------
#
# With N == 1 every helper below returns the single-suggestion objects above unchanged, so that
# request stays byte for byte what it always was (provider prefix caches, recorded tests). With
# N > 1 the prompt grows by one section at its end (the shared part stays a cacheable prefix) and
# the structured answer becomes a ranked list.

ALTERNATIVES_KEY: Final = "suggestions"
"""The key of the ranked list in the structured answer for N > 1."""

ALTERNATIVES_SCHEMA_NAME: Final = "next_user_inputs"
"""The ``json_schema`` name of :func:`suggestion_response_format` for N > 1."""

DUPLICATE_REASON: Final = "duplicate"
"""The reason :func:`filter_alternatives` gives a guess equal (normalized) to a better-ranked one.

Not in :data:`SUPPRESSION_REASONS`, which lists what :func:`filter_suggestion` can say."""

_ALTERNATIVES_MARKER = re.compile(r"^\[RANKED GUESSES: up to (\d{1,4})\]$", re.MULTILINE)


def _check_count(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of alternatives must be an integer >= 1, got {n!r}")


def _alternatives_addition(n: int) -> str:
    # The first line is also the marker `requested_alternatives` finds again, so a server
    # without structured output (or the scripted model) can tell how many guesses are wanted.
    return f"""\
[RANKED GUESSES: up to {n}]
This time, instead of a single guess, give up to {n} different guesses, ranked: the one the \
user is most likely to type first, then the next most likely, and so on.
- Each guess must pass every rule above on its own: the user's voice, 2 to 12 words, one \
sentence, nothing the user has not asked for.
- Make them different next steps, not one step reworded.
- Fewer guesses are better than weak ones; when nothing is obvious, give none.

This replaces the reply format above. Reply with one JSON object and nothing else, the guesses \
as plain strings in rank order: {{"{ALTERNATIVES_KEY}": ["first guess", "second guess"]}}. With \
no guess: {{"{ALTERNATIVES_KEY}": []}}.
"""


def suggestion_prompt(n: int = 1) -> str:
    """The suggestion prompt asking for up to ``n`` ranked guesses.

    ``n == 1`` is :data:`SUGGESTION_PROMPT` itself. For ``n > 1`` one section is appended (the
    single-guess rules stay word for word in front of it, so the two requests share a prefix):
    give up to ``n`` distinct guesses, most likely first, each under the same rules, as one JSON
    object ``{"suggestions": [...]}``; the format is spelled out in the text because a server
    without structured output gets the same prompt with no schema.
    """
    _check_count(n)
    if n == 1:
        return SUGGESTION_PROMPT
    return f"{SUGGESTION_PROMPT}\n{_alternatives_addition(n)}"


def requested_alternatives(prompt: str) -> int:
    """How many guesses a suggestion prompt asks for: ``n`` of :func:`suggestion_prompt`.

    Reads the marker line of the alternatives section (the last one, if a conversation quotes
    an earlier prompt); 1 when there is none. Lets a server that only sees the text (the
    scripted model on a request without ``response_format``) answer in the right shape.
    """
    found = _ALTERNATIVES_MARKER.findall(prompt)
    return max(1, int(found[-1])) if found else 1


def suggestion_schema(n: int = 1) -> dict[str, Any]:
    """The JSON schema of the structured answer for up to ``n`` guesses.

    ``n == 1`` is :data:`SUGGESTION_SCHEMA` itself (shared: do not mutate). For ``n > 1`` a new
    dict each call: an object with one required key, ``suggestions``, a list of at most ``n``
    strings. Providers that ignore ``maxItems`` are harmless: the parser cuts to ``n`` anyway.
    """
    _check_count(n)
    if n == 1:
        return SUGGESTION_SCHEMA
    return {
        "type": "object",
        "properties": {
            ALTERNATIVES_KEY: {
                "type": "array",
                "description": (
                    f"Up to {n} predicted next user inputs (2-12 words each), most likely "
                    "first; an empty list if nothing obvious."
                ),
                "items": {"type": "string"},
                "maxItems": n,
            }
        },
        "required": [ALTERNATIVES_KEY],
        "additionalProperties": False,
    }


def suggestion_response_format(n: int = 1) -> dict[str, Any]:
    """The OpenAI ``response_format`` value for :func:`suggestion_schema` ``(n)``.

    ``n == 1`` is :data:`SUGGESTION_RESPONSE_FORMAT` itself; ``n > 1`` is named
    :data:`ALTERNATIVES_SCHEMA_NAME` so a request log tells the two apart.
    """
    _check_count(n)
    if n == 1:
        return SUGGESTION_RESPONSE_FORMAT
    return {
        "type": "json_schema",
        "json_schema": {
            "name": ALTERNATIVES_SCHEMA_NAME,
            "strict": True,
            "schema": suggestion_schema(n),
        },
    }


# --- parsing the alternatives answer -----------------------------------------------------------

_FENCE_ANYWHERE = re.compile(r"```[\w-]*[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)
_JSON_OPENING = re.compile(r'^(?:\{\s*["}]|\[\s*["\[{\]])')
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*\u2022])\s+(?P<item>\S.*)$")
_ITEM_KEYS: Final = ("suggestion", "text")


class _NotJson:
    pass


_NOT_JSON: Final = _NotJson()


def _decode(text: str) -> Any:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return _NOT_JSON


def _looks_like_answer(value: Any) -> bool:
    if isinstance(value, dict):
        return ALTERNATIVES_KEY in value or "suggestion" in value
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _embedded_json(text: str) -> Any:
    """An answer-shaped JSON object or list inside prose ("Here you go: {...}"), else
    :data:`_NOT_JSON`; "check items[0] first" is a guess, not JSON with a list in it."""
    for opening, closing in (("{", "}"), ("[", "]")):
        start, end = text.find(opening), text.rfind(closing)
        if 0 <= start < end:
            value = _decode(text[start : end + 1])
            if _looks_like_answer(value):
                return value
    return _NOT_JSON


def _json_items(value: Any) -> list[Any]:
    if isinstance(value, dict):
        for key in (ALTERNATIVES_KEY, "suggestion"):
            if key in value:
                found = value[key]
                return found if isinstance(found, list) else [found]
        return []
    if isinstance(value, list):
        return value
    return [value]


def _item_text(item: Any) -> str:
    if isinstance(item, dict):  # [{"suggestion": "..."}, ...] or [{"text": "...", "rank": 1}]
        item = next((item[k] for k in _ITEM_KEYS if isinstance(item.get(k), str)), None)
    return _unquote(item) if isinstance(item, str) else ""


def _plain_text_items(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) == 1:
        item = _LIST_ITEM.match(lines[0])
        return [item["item"] if item else lines[0]]
    items: list[str] = []
    for line in lines:
        item = _LIST_ITEM.match(line)
        if item:
            items.append(item["item"])
        elif items:  # prose after the list started: not a list we can trust
            return []
    return items  # a list, maybe after one line of preamble ("My guesses:")


def parse_alternatives_reply(text: str, n: int) -> list[str]:
    """The ranked guesses in a model reply to the ``n``-alternatives request, best first.

    Providers do not all honour the schema, so this takes what they actually send:

    - the structured answer ``{"suggestions": [...]}`` (also inside a code fence, or inside a
      sentence of prose); a list item may itself be an object with a ``suggestion`` or ``text``;
    - a bare JSON list of strings, a JSON string, or the single-guess object
      ``{"suggestion": "..."}`` (a model that answered the old question);
    - plain text: one line is one guess; a bulleted or numbered list gives its items;
    - anything else (JSON of another shape, half a JSON document, several lines of prose) is
      garbage and gives ``[]``; so is an empty reply.

    Each guess is trimmed and unquoted; blank ones are dropped; at most ``n`` are returned (the
    first ones: the model ranks). The guesses are not filtered: see :func:`filter_alternatives`.
    """
    _check_count(n)
    raw = text.strip()
    fenced = _FENCE_ANYWHERE.search(raw)
    candidate = fenced.group(1).strip() if fenced else raw
    value = _decode(candidate)
    if value is _NOT_JSON:
        value = _embedded_json(candidate)
    if value is not _NOT_JSON:
        items = [_item_text(item) for item in _json_items(value)]
    elif _JSON_OPENING.match(candidate):
        items = []  # JSON that does not decode, e.g. cut off by a token limit
    else:
        items = [_unquote(item) for item in _plain_text_items(candidate)]
    return [item for item in items if item][:n]


def filter_alternatives(texts: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Split ranked guesses into the ones to use and the ones suppressed, keeping rank order.

    Each guess goes through :func:`filter_suggestion` (the same rules as a single suggestion);
    one that passes but equals a better-ranked kept guess after :func:`normalize_prompt` is
    suppressed as :data:`DUPLICATE_REASON` (two workers speculating the same prompt would only
    waste tokens). Returns ``(kept, suppressed)``: ``kept`` holds the trimmed texts in rank
    order, ``suppressed`` ``(text, reason)`` pairs with the texts as given.
    """
    kept: list[str] = []
    suppressed: list[tuple[str, str]] = []
    seen: set[str] = set()
    for text in texts:
        reason: str | None = filter_suggestion(text)
        key = normalize_prompt(text)
        if reason is None and key in seen:
            reason = DUPLICATE_REASON
        if reason is not None:
            suppressed.append((text, reason))
            continue
        seen.add(key)
        kept.append(text.strip())
    return kept, suppressed


# --- comparing what the user types with a guess ------------------------------------------------

_QUOTE_FOLD: Final = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_TRAILING_STOPS: Final = ".!\u3002"  # after NFKC: "…" is "...", "！" is "!"


def _fold(text: str) -> str:
    """Case-, width- and whitespace-folded text; a trailing whitespace run stays as one space.

    Folding works (nearly) character by character: NFKC, casefold, curly quotes made
    straight; so the fold of a prefix of a text is a prefix of the fold of the text. Keeping
    the trailing space tells a finished word ("run the ") from one being typed ("run the").
    """
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_QUOTE_FOLD)
    words = folded.split()
    if not words:
        return ""
    return " ".join(words) + (" " if folded[-1].isspace() else "")


def normalize_prompt(text: str) -> str:
    """The form in which a typed prompt and a suggestion are compared.

    Unicode-compatibility folded (NFKC: full-width letters, non-breaking spaces), casefolded,
    curly quotes made straight, whitespace runs collapsed to one space, trimmed. Trailing
    ``.`` and ``!`` (also ``…``, ``。``) are dropped: "Run the tests." is the same request as
    "run the tests". A trailing ``?`` is kept: "push it?" asks whether to push, it does not say
    to, so it must not accept a speculation that already pushed.
    """
    return _fold(text).rstrip(" " + _TRAILING_STOPS)


def matches_prompt(typed: str, suggestion: str) -> bool:
    """Whether a submitted prompt counts as accepting ``suggestion``.

    True when both normalize (:func:`normalize_prompt`) to the same non-empty text, so typing a
    guess out by hand, in another case or with a final period, accepts its speculation instead
    of paying for the same work again. An empty prompt never matches.
    """
    expected = normalize_prompt(suggestion)
    return bool(expected) and normalize_prompt(typed) == expected


def is_typed_prefix(typed: str, suggestion: str) -> bool:
    """Whether what the user has typed so far still leads to ``suggestion``.

    While it does, the speculation of that guess is kept running; the first keystroke that
    diverges should abort it. Comparison is on folded text (case, width, whitespace runs and
    curly quotes ignored, leading whitespace too), so "Run  the" keeps "run the tests" alive.
    A typed text ending in whitespace has finished its last word: "run the " leads to "run the
    tests" but not to "run thereafter". Nothing typed yet (empty or blank) leads anywhere; a
    text that :func:`matches_prompt` the guess is a prefix of it; a blank guess has no prefix.
    """
    target = normalize_prompt(suggestion)
    if not target:
        return False
    folded = _fold(typed)
    return not folded or target.startswith(folded) or normalize_prompt(typed) == target
