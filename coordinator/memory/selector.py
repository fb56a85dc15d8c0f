"""The model side query that picks memories for a user query.

The fast model sees only each memory's type, path, age and one-line description (the manifest)
and answers ``{"selected_memories": [<path>, …]}``. The answer is validated strictly: anything
other than a list of at most five known paths is a :class:`SelectorError`, which recall turns
into the lexical fallback.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from protocol.model.request import ChatRequest, ChatResult
from protocol.wire.chat import Message

from .store import MemoryDoc

MAX_SELECTED = 5
MANIFEST_MAX_BYTES = 25_000
DESCRIPTION_MAX_CHARS = 512
SELECTOR_MAX_TOKENS = 1_024

SELECTOR_SYSTEM_PROMPT = """\
You decide which saved memory files a coding assistant should read before it works on a \
user's request.

Each memory is listed with its type, its path, when it was last changed and a one-line \
description. Judge every file by its name (the path) and its description alone.

How to choose:
- Choose at most 5 files.
- Choose a file only when you are confident it will help the assistant with this specific \
request; a file that is merely on a related topic does not qualify.
- If you are unsure about a file, leave it out.
- Choosing no files is a normal, correct answer when nothing clearly fits.
- Copy each chosen path exactly as it appears in the list.

Reply with JSON only, in this shape: {"selected_memories": ["<path>", ...]}"""

SELECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "selected_memories": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": MAX_SELECTED,
            "description": "Absolute paths of the chosen memory files, copied from the list; "
            "empty when none clearly helps.",
        }
    },
    "required": ["selected_memories"],
    "additionalProperties": False,
}


class SideQueryModel(Protocol):
    """The one model call recall needs (``protocol.model.ModelClient`` satisfies it)."""

    async def complete(self, req: ChatRequest) -> ChatResult: ...


class SelectorError(Exception):
    """The model's selection could not be used (bad JSON, wrong shape, unknown path, > 5)."""


def iso_mtime(mtime: float) -> str:
    return dt.datetime.fromtimestamp(mtime, tz=dt.UTC).isoformat(timespec="seconds")


def manifest_line(doc: MemoryDoc) -> str:
    description = doc.description
    if len(description) > DESCRIPTION_MAX_CHARS:
        description = description[: DESCRIPTION_MAX_CHARS - 1].rstrip() + "…"
    return f"- [{doc.type}] {doc.path} ({iso_mtime(doc.mtime)}): {description}"


def build_manifest(
    docs: Sequence[MemoryDoc], max_bytes: int = MANIFEST_MAX_BYTES
) -> tuple[str, list[MemoryDoc]]:
    """The manifest lines within ``max_bytes`` UTF-8 bytes and the docs that made it in.

    Docs are taken in the given order (newest first from the store); a line that does not fit
    is skipped and a later, shorter one may still fit.
    """
    lines: list[str] = []
    listed: list[MemoryDoc] = []
    used = 0
    for doc in docs:
        line = manifest_line(doc)
        cost = len(line.encode("utf-8")) + (1 if lines else 0)  # joining newline
        if used + cost > max_bytes:
            continue
        lines.append(line)
        listed.append(doc)
        used += cost
    return "\n".join(lines), listed


def build_user_message(query: str, manifest: str) -> str:
    return f"Query: {query.strip()}\n\nAvailable memories:\n{manifest}"


def build_request(query: str, manifest: str, model_name: str) -> ChatRequest:
    return ChatRequest(
        system=SELECTOR_SYSTEM_PROMPT,
        history=(Message.user(build_user_message(query, manifest)),),
        model=model_name,
        purpose="recall",
        temperature=0.0,
        enable_thinking=False,
        json_schema=SELECTION_SCHEMA,
        json_schema_name="memory_selection",
        max_tokens=SELECTOR_MAX_TOKENS,
    )


_FENCE_RE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_selection(text: str, listed: Sequence[MemoryDoc]) -> list[MemoryDoc]:
    """The docs the answer names, in the model's order; :class:`SelectorError` if invalid."""
    raw = text.strip()
    fenced = _FENCE_RE.match(raw)
    if fenced:
        raw = fenced.group(1)
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise SelectorError(f"selector answer is not JSON: {raw[:80]!r}") from exc
    if not isinstance(value, dict) or "selected_memories" not in value:
        raise SelectorError("selector answer is not an object with 'selected_memories'")
    paths = value["selected_memories"]
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise SelectorError("'selected_memories' is not an array of strings")
    unique = list(dict.fromkeys(p.strip() for p in paths))
    if len(unique) > MAX_SELECTED:
        raise SelectorError(f"selector chose {len(unique)} memories, more than {MAX_SELECTED}")
    known = {d.path: d for d in listed}
    unknown = [p for p in unique if p not in known]
    if unknown:
        raise SelectorError(f"selector chose unknown path(s): {', '.join(unknown[:3])}")
    return [known[p] for p in unique]


async def select_memories(
    model: SideQueryModel, model_name: str, query: str, docs: Sequence[MemoryDoc]
) -> list[MemoryDoc]:
    """Ask the model; the chosen docs (possibly none). Raises ``ModelError``/``SelectorError``."""
    manifest, listed = build_manifest(docs)
    if not listed:
        raise SelectorError("no memory fits in the manifest budget")
    result = await model.complete(build_request(query, manifest, model_name))
    if result.refusal is not None:
        # A refusal is no selection (not "nothing is relevant"): the lexical ranking decides.
        raise SelectorError(f"the selector model refused: {result.refusal[:80]!r}")
    return parse_selection(result.message.text, listed)
