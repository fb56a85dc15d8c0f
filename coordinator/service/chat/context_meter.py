"""How full the main chat's context window is, and how large the next request will be.

The window: the ``contextWindow`` setting, else what the endpoint reports for the model
(``ModelClient.context_window``), else ``DEFAULT_WINDOW``; a provider's overflow error that
names a smaller window (or refuses a request estimated below the window) lowers it for
the rest of the service's life.

The next request: the last main answer's reported usage (prompt + completion tokens: the
request it answered and the answer itself, which the next request carries too) plus the
estimate (``protocol/model/tokens.py``) of the messages added since. Without a usage to
start from (a new service, an endpoint that reports none, right after a compaction) the
whole request is estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from protocol.model.tokens import estimate_messages, estimate_request
from protocol.model.tool_result_fit import tool_result_tokens
from protocol.wire.chat import Message, ToolSpec, Usage

DEFAULT_WINDOW = 32_768
MID_TURN_LIMIT = 0.95  # inside a turn, compact only before the window itself is reached

WindowSource = Literal["setting", "endpoint", "default", "provider"]


@dataclass
class ContextMeter:
    window: int
    source: WindowSource
    compact_at: float
    _anchor_tokens: int | None = None
    _anchor_length: int = 0  # history length when the anchor was reported
    last_estimate: int = 0  # of the most recent estimate, for status

    def estimate(
        self, system: str | None, history: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> int:
        """Tokens of the next request over ``history``."""
        if self._anchor_tokens is not None and self._anchor_length <= len(history):
            total = self._anchor_tokens + estimate_messages(history[self._anchor_length :])
        else:
            total = estimate_request(system, history, tools)
        self.last_estimate = total
        return total

    def reported(self, usage: Usage, history_length: int) -> None:
        """A main answer's usage, with the history length once the answer is in it."""
        if usage.prompt_tokens > 0:
            self._anchor_tokens = usage.prompt_tokens + usage.completion_tokens
            self._anchor_length = history_length
        else:
            self._anchor_tokens = None

    def forget(self) -> None:
        """The history changed other than by appending (compaction, reset)."""
        self._anchor_tokens = None

    @property
    def compact_threshold(self) -> int:
        return int(self.window * self.compact_at)

    @property
    def mid_turn_limit(self) -> int:
        return int(self.window * MID_TURN_LIMIT)

    @property
    def keep_tokens(self) -> int:
        """How large the kept tail may be: half the threshold, so after a compaction the
        chat has room for several turns before the next one."""
        return self.compact_threshold // 2

    @property
    def tool_result_tokens(self) -> int:
        return tool_result_tokens(self.window)

    def learn_limit(self, stated: int | None, refused_estimate: int) -> None:
        """A provider refused a request as too long: take the window it names, or else
        assume the window is a tenth below what that request was estimated at."""
        limit = stated if stated is not None and stated > 0 else int(refused_estimate * 0.9)
        if limit < self.window:
            self.window = max(1024, limit)
            self.source = "provider"
