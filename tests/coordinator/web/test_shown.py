"""What the page is sent: every string of every structure made inert, wherever it sits
(a struct's tuples included: a diff's files, the conversation, the branches, the steps)."""

from __future__ import annotations

import json
from typing import Any

from coordinator.web.shown import shown_json
from protocol.text.inert_text import find_hidden
from protocol.wire.control import FileChange, FileDiff, LiveActivity, LiveDiff, LiveSpeculationStep

# An invisible Hangul filler as an identifier (the "invisible backdoor" trick), tag
# characters spelling text no one sees, an Arabic letter mark and a carriage return.
HOSTILE = "const { timeout,\u3164} = q;\u061c\U000e0041\U000e0042\r\n"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []


def test_strings_inside_tuples_are_made_inert_too() -> None:
    diff = LiveDiff("spec-1", (FileDiff(FileChange("app\u3164.js", "created"), "+" + HOSTILE),),
                    "")
    step = LiveSpeculationStep("spec-1", LiveActivity("text", HOSTILE))
    for message in (diff, step):
        strings = _strings(json.loads(shown_json(message)))
        assert strings, message
        for text in strings:
            assert find_hidden(text, allow="\n\t") is None, text
    shown = json.loads(shown_json(diff))
    assert shown["files"][0]["diff"] == (
        "+const { timeout,\\u3164} = q;\\u061c\\U000e0041\\U000e0042\\r\n")
    assert shown["files"][0]["change"]["path"] == "app\\u3164.js"
