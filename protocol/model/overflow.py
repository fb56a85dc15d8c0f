"""Recognizing a provider's "the request does not fit the context window" answer.

Providers say it in their own words, all as HTTP 400 (a few as 413):

* OpenAI: ``"code": "context_length_exceeded"``;
* vLLM (and SGLang): "This model's maximum context length is 32768 tokens. However, you
  requested ...";
* DashScope: "Range of input length should be [1, 30720]";
* llama.cpp's server: ``"type": "exceed_context_size_error"``, "the request exceeds the
  available context size, try increasing it";
* Ollama (``truncate: false``): "the input length exceeds the context length";
* Anthropic: "prompt is too long: 208310 tokens > 200000 maximum", as gateways (LiteLLM,
  OpenRouter, Bedrock's "Input is too long for requested model") pass it on, LiteLLM
  naming its ``ContextWindowExceededError``;
* Gemini: "The input token count (N) exceeds the maximum number of tokens allowed (M)";
  Mistral: "... too large for model with N maximum context length"; SGLang: "... is longer
  than the model's context length (N tokens)"; xAI: "maximum prompt length is N"; TGI:
  "`inputs` tokens + `max_new_tokens` must be <= N"; Moonshot: "exceeded model token limit";
* others phrase it as "context length exceeded", "prompt is too long" or "too many tokens".

Telling it apart from any other bad request matters: it is the one 400 that compacting
the history fixes.
"""

from __future__ import annotations

import re
from typing import Any

OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})

_OVERFLOW_TEXT = re.compile(
    r"maximum context length is \d+"
    r"|range of input length should be"
    r"|exceeds? the available context size"
    r"|input length exceeds (?:the )?(?:maximum )?context length"
    r"|contextwindowexceeded"
    r"|input is too long for (?:the )?requested model"
    r"|input token count.{0,40}exceeds the maximum number of tokens"
    r"|too large for model with \d+ maximum context length"
    r"|longer than the model's context length"
    r"|maximum prompt length is \d+"
    r"|`inputs` tokens \+ `max_new_tokens` must be <="
    r"|exceeded model token limit"
    r"|context[ _]length[ _]exceeded"
    r"|context window (?:is )?(?:full|exceeded)"
    r"|prompt is too long"
    r"|input (?:is )?too long for (?:the )?(?:model|context)"
    r"|too many (?:input )?tokens",
    re.IGNORECASE,
)


def is_context_overflow(status: int, payload: Any, text: str) -> bool:
    """Whether an error answer (its status, decoded JSON body or None, and its text)
    says the request was longer than the model's context window."""
    if status not in (400, 413, 422):
        return False
    error = payload.get("error") if isinstance(payload, dict) else None
    for holder in (error, payload):
        if isinstance(holder, dict):
            for key in ("code", "type"):
                if str(holder.get(key, "")).lower() in OVERFLOW_CODES:
                    return True
    return _OVERFLOW_TEXT.search(text) is not None


_STATED = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"range of input length should be \[\d+,\s*(\d+)\]", re.IGNORECASE),
    re.compile(r"context (?:window|size|length) (?:is|of) (\d+)", re.IGNORECASE),
    re.compile(r"\d+ tokens > (\d+) maximum", re.IGNORECASE),
    re.compile(r"maximum number of tokens allowed \((\d+)\)", re.IGNORECASE),
    re.compile(r"too large for model with (\d+) maximum context length", re.IGNORECASE),
    re.compile(r"model's context length \((\d+) tokens\)", re.IGNORECASE),
    re.compile(r"maximum prompt length is (\d+)", re.IGNORECASE),
    re.compile(r"`max_new_tokens` must be <= (\d+)", re.IGNORECASE),
    re.compile(r"exceeded model token limit: (\d+)", re.IGNORECASE),
)


def window_in_body(payload: Any) -> int | None:
    """The window a structured error body gives (llama.cpp's ``n_ctx``)."""
    error = payload.get("error") if isinstance(payload, dict) else None
    value = error.get("n_ctx") if isinstance(error, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def stated_window(text: str) -> int | None:
    """The window size an overflow error's text names, if it names one."""
    for pattern in _STATED:
        found = pattern.search(text)
        if found is not None:
            return int(found[1])
    return None
