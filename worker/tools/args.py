"""A tool's arguments as a typed ``msgspec.Struct``: the one declaration that the model's
schema is generated from (``worker.tools.schema``), that a call's JSON is decoded into, and
that names the path arguments the gate checks and rewrites.

Decoding is lax where models are known to slip (``"10"`` or ``10.0`` for an integer,
``"true"`` for a boolean), a ``null`` counts as an absent argument, and keys the tool does not
know are ignored. Anything else is a :class:`ToolError` whose message names the argument, in
the words the model has always read.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, TypeVar

import msgspec

from protocol.wire.json_depth import too_deep
from worker.tools.errors import ToolError

__all__ = ["PathArg", "PathUse", "ToolArgs", "decode_arguments", "path_fields"]

PathUse = Literal["read", "write"]


@dataclass(frozen=True, slots=True)
class PathArg:
    """Marks a string field as a path, in its ``Annotated`` metadata:
    ``file_path: Annotated[str, PathArg("write"), Meta(description=...)]``.

    ``use`` says what the tool does there: ``read`` paths are checked against the read rule
    and resolved through a speculation's overlay, ``write`` paths against the protected paths
    and redirected into the overlay. ``glob``: the field is a glob pattern taken relative to
    the tool's other read path; its literal directory prefix is where the tool reads (the
    gate checks it, never rewrites it)."""

    use: PathUse
    glob: bool = False


class ToolArgs(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every tool's argument struct. ``kw_only`` keeps the fields, and so the
    schema's properties, in the order they are written whatever their defaults."""


Args = TypeVar("Args", bound=ToolArgs)


@cache
def path_fields(args_type: type[ToolArgs]) -> Mapping[str, PathArg]:
    """The fields of ``args_type`` declared as paths, in field order. A declaration on a
    field that is not a string is a mistake in the tool, refused here."""
    hints = typing.get_type_hints(args_type, include_extras=True)
    found: dict[str, PathArg] = {}
    for name in args_type.__struct_fields__:
        for part in _annotated_parts(hints[name]):
            marks = [meta for meta in part.__metadata__ if isinstance(meta, PathArg)]
            if marks and part.__origin__ is not str:
                raise TypeError(f"{args_type.__name__}.{name}: a path argument is a string")
            if marks:
                found[name] = marks[0]
    return found


def _annotated_parts(hint: Any) -> list[Any]:
    """``hint`` itself or the members of its union that are ``Annotated``."""
    if hasattr(hint, "__metadata__"):
        return [hint]
    return [arg for arg in typing.get_args(hint) if hasattr(arg, "__metadata__")]


# --- decoding ----------------------------------------------------------------------------------


def decode_arguments(tool: str, text: str, args_type: type[Args]) -> Args:
    """A call's JSON arguments as ``args_type``, or a ``ToolError`` saying what is wrong."""
    text = text or "{}"  # no arguments at all
    deep = too_deep(text)
    if deep is not None:
        raise ToolError(f"Invalid arguments for {tool}: {deep}.")
    try:
        return msgspec.json.decode(text, type=args_type, strict=False)
    except msgspec.ValidationError as exc:
        problem = exc  # found before the end of the text: the rest may not even be JSON
    except msgspec.DecodeError as exc:
        raise ToolError(f"Invalid arguments for {tool}: not valid JSON ({exc})") from None
    try:
        raw = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise ToolError(f"Invalid arguments for {tool}: not valid JSON ({exc})") from None
    trimmed = _trimmed(raw, args_type)
    if trimmed is not None:
        return trimmed
    raise ToolError(f"Invalid arguments for {tool}: {_explain(problem, raw, args_type)}")


def _trimmed(raw: Any, args_type: type[Args]) -> Args | None:
    """The arguments with the blanks around a number or boolean given as a string dropped
    (``" 10 "``), when that is all that kept them from decoding; else ``None``."""
    if not isinstance(raw, dict):
        return None
    trimmed = {
        key: value.strip()
        if isinstance(value, str) and _field_type(args_type, key) in _LAX
        else value
        for key, value in raw.items()
    }
    if trimmed == raw:
        return None
    try:
        return msgspec.convert(trimmed, args_type, strict=False)
    except msgspec.ValidationError:
        return None


_MISSING = re.compile(r"Object missing required field `([^`]*)`")
_AT = re.compile(r" - at `\$\.([^`\[]*)`$")
_AT_LEAST = re.compile(r"^Expected `[^`]*` >= (-?\d+)")
_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", float: "a number"}
_LAX = (int, bool, float)


def _explain(exc: msgspec.ValidationError, raw: Any, args_type: type[ToolArgs]) -> str:
    """msgspec's complaint in the old checker's words: ``'key' is required``, ``'key' must be
    an integer, got "ten"``, ``'key' must be at least 1``."""
    message = str(exc)
    missing = _MISSING.match(message)
    if missing:
        return f"'{missing.group(1)}' is required"
    if message.startswith("Expected `object`"):
        return "expected a JSON object"
    at = _AT.search(message)
    if at is None:
        return message
    key = at.group(1)
    value = raw.get(key) if isinstance(raw, dict) else None
    if value is None:
        return f"'{key}' is required"
    minimum = _AT_LEAST.match(message)
    if minimum:
        return f"'{key}' must be at least {minimum.group(1)}"
    expected = _TYPE_NAMES.get(_field_type(args_type, key), "of another type")
    return f"'{key}' must be {expected}, got {msgspec.json.encode(value).decode()[:80]}"


def _field_type(args_type: type[ToolArgs], key: str) -> Any:
    return _field_types(args_type).get(key)


@cache
def _field_types(args_type: type[ToolArgs]) -> Mapping[str, Any]:
    """Argument name → its scalar Python type (``msgspec.inspect`` takes milliseconds)."""
    info = msgspec.inspect.type_info(args_type)
    assert isinstance(info, msgspec.inspect.StructType)
    return {field.encode_name: _plain(field.type) for field in info.fields}


def _plain(info: msgspec.inspect.Type) -> Any:
    """The Python type of a scalar field's type info, through ``| None`` and metadata."""
    if isinstance(info, msgspec.inspect.Metadata):
        return _plain(info.type)
    if isinstance(info, msgspec.inspect.UnionType):
        members = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        return _plain(members[0]) if len(members) == 1 else None
    kinds: dict[type[msgspec.inspect.Type], type] = {
        msgspec.inspect.StrType: str,
        msgspec.inspect.IntType: int,
        msgspec.inspect.BoolType: bool,
        msgspec.inspect.FloatType: float,
    }
    return kinds.get(type(info))
