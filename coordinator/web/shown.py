"""What the page is sent: the service's structures as JSON values with every string made
inert by the rule the terminal uses (``protocol.text.inert_text.inert``: controls, bidi and
invisible characters as visible escapes). The page then shows them as text nodes only,
so a hostile name or line is seen exactly as `specrun` prints it, and never obeyed."""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.text.inert_text import inert


def _boundary_words(boundary: dict[str, Any]) -> str:
    """A speculation's boundary in words, as the terminal says it (the raw ``code:detail``
    is an internal label; the page keeps it in ``boundary_reason``)."""
    from coordinator.boundary_text import describe_boundary
    from protocol.wire.boundary import BoundaryReason

    try:
        reason = msgspec.convert(boundary, BoundaryReason)
    except msgspec.ValidationError:  # a code this side does not know: its own words
        return str(boundary.get("code", "")).replace("_", " ")
    return describe_boundary(reason)


def _model_text(value: dict[Any, Any]) -> bool:
    """A conversation's model entry (``TranscriptEntry``), or a speculation's text step
    (``LiveActivity``, which has a ``call_id``)."""
    kind = value.get("kind")
    return isinstance(value.get("text"), str) and (
        kind == "model" or (kind == "text" and "call_id" in value))


def _inert_tree(value: Any) -> Any:
    if isinstance(value, dict) and isinstance(value.get("boundary"), dict) and (
            "boundary_reason" in value):
        return {**{k: _inert_tree(v) for k, v in value.items()},
                "boundary_words": inert(_boundary_words(value["boundary"]))}
    if isinstance(value, dict) and _model_text(value):
        # the model's text also as sanitized markdown (``markdown_view``)
        from coordinator.web.markdown_view import markdown_html

        return {**{k: _inert_tree(v) for k, v in value.items()},
                "html": markdown_html(value["text"])}
    if isinstance(value, str):
        return inert(value)  # newline and tab kept: diffs and model text span lines
    # msgspec.to_builtins keeps a struct's tuples as tuples: the files of a diff, the
    # conversation, the steps and the branches are all tuples, and were once passed
    # through untouched.
    if isinstance(value, (list, tuple)):
        return [_inert_tree(item) for item in value]
    if isinstance(value, dict):
        return {_inert_tree(key): _inert_tree(item) for key, item in value.items()}
    return value


_ENCODER = msgspec.json.Encoder()


def shown_json(message: Any, extra: dict[str, object] | None = None) -> bytes:
    """``message`` (a msgspec struct) as the page's JSON, every string inert; ``extra``:
    fields added as they are (the sanitized HTML of a streaming reply, ``streamed_reply``)."""
    shown = _inert_tree(msgspec.to_builtins(message, str_keys=True))
    if extra:
        shown.update(extra)
    return _ENCODER.encode(shown)
