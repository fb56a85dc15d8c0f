"""Estimating tokens without the model's tokenizer.

The main chat needs to know, before it sends a request, whether the request fits the
model's context window. Exact counts would need the tokenizer of every model a person may
point specrun at; instead the last request's *reported* usage is taken as exact and only
what was added since is estimated (see ``docs/context.md``), so the estimate's error applies
to a few messages, not to the whole history.

The estimate is a character-class count: a run of ASCII letters costs one token per
``WORD_CHARS`` letters (at least one), a run of digits one per three (tokenizers split
numbers in groups of three), a single space nothing (it merges with the next word), any
other whitespace run one token, every other ASCII character one per ``SYMBOL_CHARS``
(punctuation merges less than words do), a run of Cyrillic letters one per
``CYRILLIC_CHARS`` (counted one a letter, Russian came out 65 % above cl100k and twice
o200k) and every other non-ASCII character one (CJK text is close to one token per
character). Measured against OpenAI's cl100k and o200k tokenizers
(the table in ``docs/context.md``) it is within +4 % .. +21 % on prose, code, JSON tool
results and git output, +9 % .. +37 % on Chinese, and -22 % on column-aligned listings
(``ls -la``): it over-counts more often than it under-counts, on purpose.

The scripted model counts a request with the same functions, so a test's window is
exact to the chat's own estimate.

A long text's estimate is remembered (``estimate_tokens``), keyed by a digest of the
text: the same messages are estimated again and again (every request the scripted model
counts carries the whole history; a compaction measures every message of the view), and
hashing a 10 KB tool result costs a hundredth of counting it.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from protocol.wire.chat import Message, ToolSpec, message_to_openai

WORD_CHARS = 5.0
SYMBOL_CHARS = 1.6
MESSAGE_OVERHEAD = 4  # role and separators a chat template adds around every message

CYRILLIC_CHARS = 1.5
_RUNS = re.compile(r"([A-Za-z]+)|([0-9]+)|(\s+)|([\u0400-\u04ff]+)|([^\x00-\x7f])")

CACHED_FROM_CHARS = 512  # shorter texts are counted faster than they are hashed
CACHE_ENTRIES = 4096  # digests (16 bytes each), not texts: well under a megabyte


class _EstimateCache:
    """The estimates of recently counted long texts, least recently used dropped first.
    Shared by the threads of one process (the embedded scripted model counts in its own)."""

    def __init__(self, entries: int) -> None:
        self._entries = entries
        self._tokens: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> int | None:
        with self._lock:
            tokens = self._tokens.get(key)
            if tokens is not None:
                self._tokens.move_to_end(key)
            return tokens

    def put(self, key: bytes, tokens: int) -> None:
        with self._lock:
            self._tokens[key] = tokens
            if len(self._tokens) > self._entries:
                self._tokens.popitem(last=False)


_CACHE = _EstimateCache(CACHE_ENTRIES)


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` is estimated to cost (see the module docstring)."""
    if len(text) < CACHED_FROM_CHARS:
        return _count(text)
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    tokens = _CACHE.get(key)
    if tokens is None:
        tokens = _count(text)
        _CACHE.put(key, tokens)
    return tokens


def _count(text: str) -> int:
    if not text:
        return 0
    estimate = 0.0
    counted = 0
    for run in _RUNS.finditer(text):
        letters, digits, spaces, cyrillic, _ = run.groups()
        counted += run.end() - run.start()
        if letters:
            estimate += max(1.0, len(letters) / WORD_CHARS)
        elif digits:
            estimate += -(-len(digits) // 3)
        elif spaces:
            estimate += 0.0 if spaces == " " else 1.0 + len(spaces) / 16
        elif cyrillic:
            estimate += max(1.0, len(cyrillic) / CYRILLIC_CHARS)
        else:
            estimate += 1.0
    return math.ceil(estimate + (len(text) - counted) / SYMBOL_CHARS)


def estimate_json_tokens(value: Any) -> int:
    """Tokens of a JSON value as it travels in a request body (one message, the tools)."""
    return estimate_tokens(msgspec.json.encode(value).decode()) + MESSAGE_OVERHEAD


def estimate_openai_messages(messages: Iterable[dict[str, Any]]) -> int:
    return sum(estimate_json_tokens(m) for m in messages)


def estimate_messages(messages: Sequence[Message]) -> int:
    """Tokens the chat messages add to a request (in their OpenAI wire form)."""
    return sum(estimate_openai_messages(message_to_openai(m)) for m in messages)


def estimate_request(
    system: str | None, history: Sequence[Message], tools: Sequence[ToolSpec]
) -> int:
    """Tokens of a whole request: the tools, the system message and the history."""
    total = estimate_json_tokens([t.to_openai() for t in tools]) if tools else 0
    if system:
        total += estimate_json_tokens({"role": "system", "content": system})
    return total + estimate_messages(history)


def cut_to_tokens(text: str, tokens: int) -> str:
    """The longest prefix of ``text`` (found by halving) estimated at most ``tokens``."""
    if estimate_tokens(text) <= tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if _count(text[:middle]) <= tokens:  # prefixes seen once: not worth remembering
            low = middle
        else:
            high = middle - 1
    return text[:low]
