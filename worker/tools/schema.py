"""The JSON schema a model sees for a tool's arguments, generated from its ``ToolArgs`` struct.

msgspec writes full JSON Schema; function-calling providers accept a narrower dialect. The
schema is reshaped into it: one inline object (no ``$ref`` or ``$defs``, which several
providers refuse), an optional argument as its plain type (``null`` is still accepted on
decoding: it means absent), no ``title`` or ``default`` keys, and ``required`` always
present. Keys come in a fixed order (``type``, then constraints, then ``description``) so
the tools array is byte-identical from run to run.
"""

from __future__ import annotations

from typing import Any

import msgspec

from worker.tools.args import ToolArgs

__all__ = ["parameters_schema"]

_DROPPED = ("title", "default")


def parameters_schema(args_type: type[ToolArgs]) -> dict[str, Any]:
    """The ``parameters`` object of a tool whose arguments are ``args_type``."""
    (ref,), components = msgspec.json.schema_components([args_type])
    schema = _inline(ref, components)
    properties = {name: _property(prop) for name, prop in schema.get("properties", {}).items()}
    return {
        "type": "object",
        "properties": properties,
        "required": list(schema.get("required", [])),
    }


def _inline(node: Any, components: dict[str, Any]) -> Any:
    """``node`` with every ``$ref`` replaced by the component it points at (without its
    ``title``), the keys beside the ``$ref`` (a field's description) kept."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = components[ref.rsplit("/", 1)[-1]]
            beside = {key: value for key, value in node.items() if key != "$ref"}
            return _inline({**_untitled(target), **beside}, components)
        return {key: _inline(value, components) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(value, components) for value in node]
    return node


def _untitled(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "title"}


def _property(prop: dict[str, Any]) -> dict[str, Any]:
    """One argument's schema: ``X | None`` as ``X``, keys in the fixed order."""
    members = prop.get("anyOf")
    if members is not None:
        kept = [member for member in members if member != {"type": "null"}]
        if len(kept) == 1:
            prop = {**kept[0], **{k: v for k, v in prop.items() if k != "anyOf"}}
    prop = {key: value for key, value in prop.items() if key not in _DROPPED}
    first = {key: prop[key] for key in ("type",) if key in prop}
    last = {key: prop[key] for key in ("description",) if key in prop}
    middle = {key: value for key, value in prop.items() if key not in first and key not in last}
    return {**first, **middle, **last}
