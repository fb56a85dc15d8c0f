"""Scenario files of the scripted model: schema, loading and clear errors.

A scenario is YAML (or JSON) decoded into typed structs. Whatever is wrong with a
file surfaces as one :class:`ScenarioError` naming the file and the field, e.g.
``scenario fix.yaml: rules[2].reply.latency_ms: expected an integer >= 0, got 'fast'``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import yaml
from msgspec import inspect as mi

from protocol.model import PURPOSES, Purpose

NonNegInt = Annotated[int, msgspec.Meta(ge=0)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
NonNegFloat = Annotated[float, msgspec.Meta(ge=0)]
ErrorStatus = Annotated[int, msgspec.Meta(ge=400, le=599)]

DEMO_SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "demo.yaml"


class When(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Conditions of a rule; all given ones must hold.

    ``last_user``: regex searched in the request's last message when that message
    is the user's. ``turn_user``: regex searched in the user message that started
    the current turn (the latest user message; reminder-only messages skipped), also
    while tool results follow it. ``last_tool``: the last message is a result of this
    tool (any result of the trailing group of tool results). ``prompt_contains``:
    substring of any message. ``system_contains``: substring of the system message.
    ``purpose``: the ``X-Specrun-Purpose`` header. A reminder-only user message right
    after tool results counts as part of those results.
    """

    purpose: Purpose | None = None
    last_user: str | None = None
    turn_user: str | None = None
    last_tool: str | None = None
    prompt_contains: str | None = None
    system_contains: str | None = None


class ToolCallReply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``arguments``: an object, or its JSON text as the model would stream it (a
    malformed or hostile text a mapping cannot hold, nested a thousand deep say)."""

    name: str
    arguments: dict[str, Any] | str = {}
    id: str | None = None

    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return msgspec.json.encode(self.arguments).decode()


class UsageReply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    prompt_tokens: NonNegInt | None = None
    completion_tokens: NonNegInt | None = None
    cached_tokens: NonNegInt | None = None


class Reply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the model answers: text, tool calls, both, or a JSON value as the text.

    ``select_memories`` answers a memory-recall request: ``{"selected_memories":
    [...]}`` with the paths of the manifest lines (``- [type] /path (mtime): …``) of
    the last user message that contain any of these words (case-insensitive, ≤ 5).

    ``suggestions`` answers a next-prompt request with ranked guesses, best first.
    A request for N > 1 alternatives (its ``response_format`` schema has a
    ``suggestions`` list, or, without a schema, its last user message carries the
    ``[RANKED GUESSES: up to N]`` line of the alternatives prompt) gets
    ``{"suggestions": [...]}`` cut to N (the schema's ``maxItems``, else the prompt's
    N); a single-suggestion request gets ``{"suggestion": <the first, or "">}``.
    A rule without ``suggestions`` that scripts one suggestion, as ``json:
    {suggestion: X}`` or as a plain ``text`` (no tool calls), answers an alternatives
    request with ``{"suggestions": [X]}`` (``[]`` when X is empty), so scenarios
    written for one suggestion keep working. Any other ``json`` is sent as written,
    to script exactly what a misbehaving provider sends.
    """

    text: str | None = None
    tool_calls: list[ToolCallReply] = []
    json: Any = msgspec.field(default=msgspec.UNSET)
    select_memories: list[str] | None = None
    suggestions: list[str] | None = None
    thinking: str | None = None
    latency_ms: NonNegInt | None = None
    chunk_ms: NonNegInt | None = None
    usage: UsageReply | None = None
    finish_reason: str | None = None
    refusal: str | None = None  # the model declines (OpenAI's `refusal` field)

    @property
    def has_json(self) -> bool:
        return self.json is not msgspec.UNSET


class Fail(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Answer ``status`` for the first ``times`` matches, then the rule's reply.
    ``body``: the exact JSON error body to send (a provider's own shape), instead of
    the scripted one built from ``message``."""

    status: ErrorStatus = 500
    times: PositiveInt = 1
    retry_after: NonNegFloat | None = None
    message: str | None = None
    body: Any = msgspec.field(default=msgspec.UNSET)


class Rule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One rule: ``when`` + ``reply``, or a ``default`` reply that matches anything.

    ``times`` limits how often the rule matches (failures do not count); ``stall``
    sends the first chunk and then nothing until the client goes away.
    """

    when: When | None = None
    reply: Reply | None = None
    default: Reply | None = None
    times: PositiveInt | None = None
    fail: Fail | None = None
    stall: bool = False
    name: str | None = None

    @property
    def answer(self) -> Reply:
        answer = self.reply if self.reply is not None else self.default
        assert answer is not None  # checked when the scenario is loaded
        return answer


OverflowStyle = Literal["openai", "vllm", "dashscope", "llamacpp", "ollama", "anthropic"]


class Scenario(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A whole scenario. ``latency_ms``/``chunk_ms`` are defaults for every reply;
    ``models`` is what ``GET /v1/models`` lists.

    ``context_window``: the model plays a context window of this many tokens. A request
    estimated (with specrun's own estimator, ``protocol/model/tokens.py``) above it is
    refused with HTTP 400 and the error body of ``overflow_style``'s provider, before any
    rule is matched; every answer's usage is then counted with the same estimator, so a
    test knows exactly what the chat believes. ``GET /v1/models`` reports the window as
    vLLM does (``max_model_len``)."""

    name: str = "scenario"
    description: str = ""
    latency_ms: NonNegInt = 0
    chunk_ms: NonNegInt = 2
    models: list[str] = msgspec.field(default_factory=lambda: ["scripted"])
    context_window: PositiveInt | None = None
    overflow_style: OverflowStyle = "openai"
    rules: list[Rule] = []


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the field."""

    def __init__(self, source: str, problem: str, field: str | None = None) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        where = f"{field}: " if field else ""
        super().__init__(f"scenario {source}: {where}{problem}")


# --------------------------------------------------------------------- loading


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read and validate a scenario file (``.json`` as JSON, anything else as YAML)."""
    source = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ScenarioError(source, f"cannot read the file ({exc.strerror or exc})") from None
    return parse_scenario(data, source=source, json=source.endswith(".json"))


def parse_scenario(data: bytes | str, *, source: str = "<text>", json: bool = False) -> Scenario:
    """Validate scenario text (YAML, or JSON with ``json=True``)."""
    if json:
        try:
            raw = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise ScenarioError(source, f"not valid JSON ({exc})") from None
    else:
        try:
            raw = yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise ScenarioError(source, _yaml_problem(exc)) from None
    if raw is None:
        raise ScenarioError(source, "the file is empty; expected a mapping with `rules`")
    return scenario_from_obj(raw, source=source)


def scenario_from_obj(raw: Any, *, source: str = "<dict>") -> Scenario:
    """Validate an already decoded scenario (a mapping, e.g. built in a test)."""
    if isinstance(raw, Scenario):
        _check(raw, source)
        return raw
    if not isinstance(raw, Mapping):
        raise ScenarioError(
            source, f"expected a mapping with `rules` at the top level, got {_describe(raw)}"
        )
    try:
        scenario = msgspec.convert(raw, Scenario)
    except msgspec.ValidationError as exc:
        field, problem = _explain(str(exc), raw)
        raise ScenarioError(source, problem, field) from None
    _check(scenario, source)
    return scenario


def _check(scenario: Scenario, source: str) -> None:
    """Rules the types cannot say: one reply per rule, regexes compile, and so on."""
    for i, rule in enumerate(scenario.rules):
        at = f"rules[{i}]"
        if rule.reply is not None and rule.default is not None:
            raise ScenarioError(source, "give either `reply` or `default`, not both", at)
        if rule.reply is None and rule.default is None:
            raise ScenarioError(
                source, "missing `reply` (or `default` for a rule that matches anything)", at
            )
        if rule.default is not None and rule.when is not None:
            raise ScenarioError(source, "a `default` rule matches anything; drop its `when`", at)
        reply, key = (rule.reply, "reply") if rule.reply is not None else (rule.default, "default")
        assert reply is not None
        contents = [
            name
            for name, given in (
                ("text", reply.text is not None),
                ("json", reply.has_json),
                ("select_memories", reply.select_memories is not None),
                ("suggestions", reply.suggestions is not None),
                ("refusal", reply.refusal is not None),
            )
            if given
        ]
        if not contents and not reply.tool_calls:
            raise ScenarioError(
                source,
                "give at least one of `text`, `tool_calls`, `json`, `select_memories`, "
                "`suggestions` or `refusal`",
                f"{at}.{key}",
            )
        if len(contents) > 1:
            raise ScenarioError(
                source, f"`{contents[0]}` and `{contents[1]}` exclude each other", f"{at}.{key}"
            )
        if reply.suggestions is not None and reply.tool_calls:
            raise ScenarioError(
                source, "`suggestions` and `tool_calls` exclude each other", f"{at}.{key}"
            )
        for attr in ("last_user", "turn_user"):
            pattern = getattr(rule.when, attr, None)
            if pattern is None:
                continue
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ScenarioError(
                    source, f"not a valid regular expression ({exc})", f"{at}.when.{attr}"
                ) from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"YAML syntax error at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return f"YAML syntax error: {problem}"


# ------------------------------------------------------- explaining msgspec errors

_AT = re.compile(r"^(?P<msg>.*?)(?: - at `(?P<key>key` in `)?(?P<path>\$[^`]*)`)?$", re.S)
_TOKEN = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]")
_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "object": "a mapping",
    "array": "a list",
}


def _path_tokens(path: str) -> list[str | int]:
    return [name if name else int(index) for name, index in _TOKEN.findall(path[1:])]


def _field_name(tokens: list[str | int]) -> str:
    out = ""
    for token in tokens:
        out += f"[{token}]" if isinstance(token, int) else (f".{token}" if out else token)
    return out


def _lookup(raw: Any, tokens: list[str | int]) -> Any:
    value = raw
    for token in tokens:
        in_list = isinstance(token, int) and isinstance(value, list) and token < len(value)
        in_map = isinstance(token, str) and isinstance(value, Mapping) and token in value
        if not (in_list or in_map):
            return msgspec.UNSET
        value = value[token]
    return value


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:39] + "…")
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


def _type_words(spec: str) -> str:
    words = []
    for part in (p.strip() for p in spec.split("|")):
        if part == "null":
            continue
        words.append(_TYPE_WORDS.get(part, part))
    return " or ".join(words) or "null"


def _struct_at(tokens: list[str | int]) -> mi.StructType | None:
    """The struct type that the field path points into (for listing its fields)."""
    current: mi.Type = mi.type_info(Scenario)
    for token in tokens:
        current = _unwrap(current)
        if isinstance(token, int) and isinstance(current, mi.ListType):
            current = current.item_type
        elif isinstance(token, str) and isinstance(current, mi.StructType):
            match = [f for f in current.fields if f.encode_name == token]
            if not match:
                return None
            current = match[0].type
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, mi.StructType) else None


def _unwrap(t: mi.Type) -> mi.Type:
    if isinstance(t, mi.UnionType):
        for member in t.types:
            if isinstance(member, mi.StructType | mi.ListType):
                return member
    return t


def _explain(message: str, raw: Any) -> tuple[str | None, str]:
    """(field, problem) for a msgspec validation message."""
    m = _AT.match(message)
    assert m is not None  # the pattern matches any text
    msg, path, is_key = m["msg"], m["path"] or "$", bool(m["key"])
    tokens = _path_tokens(path)
    field = _field_name(tokens) or None
    value = _lookup(raw, tokens)

    if is_key:
        return field, "every key must be a string"
    if found := re.match(r"Object contains unknown field `(.+)`$", msg):
        struct = _struct_at(tokens)
        known = ", ".join(f.encode_name for f in struct.fields) if struct else ""
        extra = f" (expected one of: {known})" if known else ""
        return field, f"unknown field `{found[1]}`{extra}"
    if found := re.match(r"Object missing required field `(.+)`$", msg):
        return field, f"missing required field `{found[1]}`"
    if found := re.match(r"Invalid enum value (.+)$", msg):
        struct_field = tokens[-1] if tokens else None
        allowed = ", ".join(PURPOSES) if struct_field == "purpose" else ""
        extra = f"one of {allowed}" if allowed else "a known value"
        return field, f"expected {extra}, got {found[1]}"
    if found := re.match(r"Expected `([^`]+)`(.*?)(?:, got `[^`]+`)?$", msg):
        bound = found[2].strip()
        expected = _type_words(found[1]) + (f" {bound}" if bound else "")
        got = _describe(value) if value is not msgspec.UNSET else "something else"
        return field, f"expected {expected}, got {got}"
    return field, msg[:1].lower() + msg[1:]
