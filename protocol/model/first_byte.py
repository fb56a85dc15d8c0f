"""How long a request may wait for its first byte: longer the more of its prompt the
server has not read yet.

A server on a CPU reads the prompt before it sends anything (llama.cpp here: 37-52 prompt
tokens a second, so 4k cold tokens take about 100 s), while one that holds the prompt's
prefix in its cache answers a long request at once. The client remembers the last request
whose answer began (the prefix a server's cache most likely holds) and counts as unread
only what a new request adds after the part it shares with that one. The count is the
client's estimate (``tokens.py``, which errs high), and a deadline too long only delays a
failure that is already rare, so it is never made shorter by guessing a cache hit.
"""

from __future__ import annotations

from protocol.model.request import ChatRequest
from protocol.model.tokens import estimate_messages, estimate_request
from protocol.wire.model_options import ModelOptions


class PromptMemory:
    """The prompt of the last request that got an answer from this client's endpoint."""

    def __init__(self) -> None:
        self._last: ChatRequest | None = None

    def answered(self, req: ChatRequest) -> None:
        self._last = req

    def unread_tokens(self, req: ChatRequest) -> int:
        """Estimated prompt tokens of ``req`` past what it shares with the last answered
        request (all of them when system or tools differ: they come first)."""
        last = self._last
        if last is None or last.system != req.system or last.tools != req.tools:
            return estimate_request(req.system, req.history, req.tools)
        shared = 0
        for mine, theirs in zip(req.history, last.history, strict=False):
            if mine != theirs:
                break
            shared += 1
        return estimate_messages(req.history[shared:])


def first_byte_s(options: ModelOptions, unread_tokens: int) -> float:
    """Seconds to wait for the first byte of a request with ``unread_tokens`` to read."""
    return options.first_byte_timeout_s + options.first_byte_s_per_1k_tokens * (
        max(0, unread_tokens) / 1000
    )
