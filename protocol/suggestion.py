"""Next-prompt suggestions: the prompt, the structured-output schema, reply parsing and filters.

Shared by the coordinator's suggestion generator (after a main turn) and the worker's pipelined
suggestion (after a completed speculation), so both ask the model the same way and suppress the
same bad guesses (SPEC §5 "Pipelined suggestion", §6).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

__all__ = [
    "PIPELINED_RESPONSE_CHARS",
    "SINGLE_WORD_SUGGESTIONS",
    "SUGGESTION_PROMPT",
    "SUGGESTION_RESPONSE_FORMAT",
    "SUGGESTION_SCHEMA",
    "SUPPRESSION_REASONS",
    "filter_suggestion",
    "parse_suggestion_reply",
    "pipelined_prompt",
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

SUPPRESSION_REASONS: Final[tuple[str, ...]] = (
    "empty",
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


# --- filters (SPEC §6), first match wins -------------------------------------------------------

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


def filter_suggestion(text: str) -> str | None:
    """Why ``text`` must not be shown as a suggestion, or ``None`` if it may be shown.

    Checks run in the order of :data:`SUPPRESSION_REASONS` on the trimmed text; the first match
    wins. A text starting with ``/`` (a slash command) that passed the earlier checks is accepted
    at once, skipping every later check. Text with CJK characters is measured in characters
    (fewer than 2 / more than 30) instead of words.
    """
    trimmed = text.strip()
    if not trimmed:
        return "empty"
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


def pipelined_prompt(suggestion: str, assistant_text: str) -> str:
    """The request text for the suggestion that follows an accepted speculation.

    ``assistant_text`` is all visible model text of the speculation; when it is blank (the model
    only called tools) the prompt says ``(tool calls executed)``.
    """
    response = assistant_text.strip()[:PIPELINED_RESPONSE_CHARS] or "(tool calls executed)"
    return (
        f'The user just said: "{suggestion}"\n'
        f"The assistant responded: {response}\n"
        f"\n"
        f"{SUGGESTION_PROMPT}"
    )
