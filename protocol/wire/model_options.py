"""How the model client treats one endpoint beyond where it is: output caps per purpose,
how long it waits for a first byte, and whether it reads tool calls written as text.

Settings make one (``Settings.model_options``); it crosses to a speculation's worker inside
its job (``ModelEndpoint.options``), so the worker's client behaves as the main chat's does.
"""

from __future__ import annotations

from typing import Literal

import msgspec

TextToolCalls = Literal["auto", "on", "off"]
"""``auto``: read tool calls written as text from local endpoints only (loopback and
private addresses: llama.cpp, Ollama, LM Studio, a vLLM on the LAN), where small models
write them so; ``on``/``off``: from every endpoint / from none."""


class OutputCaps(msgspec.Struct, frozen=True, kw_only=True):
    """``max_tokens`` of a request, by purpose. A model that loops must stop at a known
    length, not when the server's context is full (minutes on a CPU). A request whose
    caller asks for fewer keeps its own."""

    main: int = 4096
    speculation: int = 4096
    suggestion: int = 512  # also the pipelined suggestion: the same kind of answer
    recall: int = 1024
    compaction: int = 2000

    def for_purpose(self, purpose: str) -> int:
        if purpose in ("suggestion", "pipelined"):
            return self.suggestion
        if purpose == "speculation":
            return self.speculation
        if purpose == "recall":
            return self.recall
        if purpose == "compaction":
            return self.compaction
        return self.main


class ModelOptions(msgspec.Struct, frozen=True, kw_only=True):
    """``first_byte_timeout_s`` plus ``first_byte_s_per_1k_tokens`` for every thousand
    prompt tokens the server has not seen yet is how long a request may wait for its
    first byte: a CPU server sends nothing while it reads the prompt (1.5k tokens took
    30-40 s here), so a fixed limit fails exactly the long requests. After the first byte
    the client's between-bytes timeout applies. 100 s per 1k waits for a server that reads
    10 tokens a second: this machine's, loaded, read 6-14."""

    max_tokens: OutputCaps = msgspec.field(default_factory=OutputCaps)
    first_byte_timeout_s: float = 120.0
    first_byte_s_per_1k_tokens: float = 100.0
    text_tool_calls: TextToolCalls = "auto"
