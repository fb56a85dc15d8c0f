"""Tool calls written as text: which blocks become calls, and that everything else stays
text word for word (the model's text is hostile input)."""

from __future__ import annotations

import json

import pytest

from protocol.model.local_endpoint import is_local_endpoint
from protocol.model.text_tool_calls import recover_tool_calls
from worker.tools import TOOL_SPECS, arguments_fit


def recovered(text: str, *, fits: bool = True) -> tuple[str, list[tuple[str, dict[str, object]]]]:
    left, calls = recover_tool_calls(text, TOOL_SPECS, arguments_fit if fits else None)
    return left, [(call.name, json.loads(call.arguments)) for call in calls]


@pytest.mark.parametrize("fits", [True, False])
def test_a_fenced_json_call_naming_an_offered_tool_is_a_call(fits: bool) -> None:
    text = (
        "I'll read the file first.\n\n```json\n"
        '{"name": "read_file", "arguments": {"file_path": "src/calc.py"}}\n```\n'
    )
    assert recovered(text, fits=fits) == (
        "I'll read the file first.",
        [("read_file", {"file_path": "src/calc.py"})],
    )


def test_hermes_tags_and_several_calls() -> None:
    text = (
        '<tool_call>\n{"name": "read_file", "arguments": {"file_path": "a.py"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "grep_search", "arguments": {"pattern": "def add"}}\n</tool_call>'
    )
    assert recovered(text) == (
        "",
        [("read_file", {"file_path": "a.py"}), ("grep_search", {"pattern": "def add"})],
    )


def test_an_unclosed_tag_at_the_end_still_counts() -> None:
    # A capped answer (max_tokens) can end right after the object.
    text = '<tool_call>\n{"name": "list_directory", "arguments": {}}'
    assert recovered(text) == ("", [("list_directory", {})])


def test_the_openai_shape_a_list_and_a_bare_answer() -> None:
    fenced_list = (
        "```\n[{\"function\": {\"name\": \"read_file\", \"arguments\": "
        "\"{\\\"file_path\\\": \\\"b.py\\\"}\"}}]\n```"
    )
    assert recovered(fenced_list) == ("", [("read_file", {"file_path": "b.py"})])
    bare = '{"name": "run_shell_command", "parameters": {"command": "pytest -q"}}'
    assert recovered(bare) == ("", [("run_shell_command", {"command": "pytest -q"})])


@pytest.mark.parametrize(
    "text",
    [
        # a tool that was not offered
        '```json\n{"name": "delete_everything", "arguments": {"path": "/"}}\n```',
        # arguments the tool's struct refuses (a required one missing, a wrong type)
        '```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```',
        '```json\n{"name": "read_file", "arguments": {"file_path": ["a.py"]}}\n```',
        '```json\n{"name": "read_file", "arguments": {"file_path": "a", "limit": "many"}}\n```',
        # arguments that are not an object
        '```json\n{"name": "read_file", "arguments": "a.py"}\n```',
        # JSON that is data, not a call; a call in another language's fence
        '```json\n{"file_path": "src/calc.py"}\n```',
        '```python\n{"name": "read_file", "arguments": {"file_path": "a.py"}}\n```',
        # prose that mentions a tool, broken JSON, a list with one bad call in it
        "Use read_file with file_path src/calc.py to see it.",
        '```json\n{"name": "read_file", "arguments": {"file_path": "a.py"\n```',
        '<tool_call>[{"name": "read_file", "arguments": {"file_path": "a"}}, {"name": "x"}]'
        "</tool_call>",
    ],
)
def test_anything_else_stays_text_word_for_word(text: str) -> None:
    assert recover_tool_calls(text, TOOL_SPECS, arguments_fit) == (text, ())


def test_the_schema_check_refuses_what_the_struct_refuses() -> None:
    # The coordinator has no tool structs: the schema generated from them decides there.
    for text in (
        '{"name": "read_file", "arguments": {"file_path": 7}}',
        '{"name": "read_file", "arguments": {"file_path": "a", "offset": 0}}',
        '{"name": "edit", "arguments": {"file_path": "a", "old_string": "x"}}',
    ):
        assert recover_tool_calls(text, TOOL_SPECS) == (text, ()), text
        assert recover_tool_calls(text, TOOL_SPECS, arguments_fit) == (text, ()), text
    lax = '{"name": "read_file", "arguments": {"file_path": "a", "limit": "10"}}'
    assert recover_tool_calls(lax, TOOL_SPECS)[1]
    assert recover_tool_calls(lax, TOOL_SPECS, arguments_fit)[1]


def test_no_tools_offered_means_no_calls() -> None:
    text = '{"name": "read_file", "arguments": {"file_path": "a.py"}}'
    assert recover_tool_calls(text, ()) == (text, ())


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://10.0.0.5:1234/v1", True),
        ("http://[::1]:8080/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://dashscope.aliyuncs.com/compatible-mode/v1", False),
        ("http://8.8.8.8/v1", False),
        ("not a url", False),
    ],
)
def test_which_endpoints_are_local(url: str, local: bool) -> None:
    assert is_local_endpoint(url) is local
