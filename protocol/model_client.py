"""The OpenAI-compatible model client (the implementation lives in ``protocol.model``).

Import from here or from ``protocol.model``; both names stay stable.
"""

from protocol.model import (
    DASHSCOPE_CACHE_HEADER,
    PURPOSE_HEADER,
    PURPOSES,
    ChatRequest,
    ChatResult,
    ErrorKind,
    ModelClient,
    ModelError,
    Purpose,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    build_body,
    encode_body,
)

__all__ = [
    "DASHSCOPE_CACHE_HEADER",
    "PURPOSES",
    "PURPOSE_HEADER",
    "ChatRequest",
    "ChatResult",
    "ErrorKind",
    "ModelClient",
    "ModelError",
    "Purpose",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "build_body",
    "encode_body",
]
