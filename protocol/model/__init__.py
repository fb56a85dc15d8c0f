"""The OpenAI-compatible model client: request types, stream events, errors, client."""

from protocol.model import without_httpx_cli  # noqa: F401  (first: before httpx loads)
from protocol.model.client import DASHSCOPE_CACHE_HEADER, PURPOSE_HEADER, ModelClient
from protocol.model.errors import ErrorKind, ModelError
from protocol.model.request import (
    PURPOSES,
    ChatRequest,
    ChatResult,
    Purpose,
    RetryWait,
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
    "RetryWait",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "build_body",
    "encode_body",
]
