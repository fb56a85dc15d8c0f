"""protocol.text.inert_text: every class of character a terminal would obey or hide comes out as
a visible escape, one character at a time, so a stream's chunking cannot matter."""

from __future__ import annotations

import itertools
import json
import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.text.inert_text import find_hidden, inert, inert_json, quote_name

ERASE_LINE = "\x1b[2K\x1b[1A"
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, ünïcode, 中文, emoji 🎉", "plain text, ünïcode, 中文, emoji 🎉"),
        (ERASE_LINE + "ok", "\\x1b[2K\\x1b[1Aok"),  # C0: ESC
        (OSC52, "\\x1b]52;c;ZWNobyBwd25lZA==\\x07"),  # OSC with BEL
        ("\x00\x08\x0b\x0c\x7f", "\\x00\\x08\\x0b\\x0c\\x7f"),  # NUL, BS, VT, FF, DEL
        ("a\rb", "a\\rb"),  # carriage return overwrites a line: always shown
        ("\x9b2J\x85\x90", "\\x9b2J\\x85\\x90"),  # C1: CSI, NEL, DCS
        ("\u202etxt.exe", "\\u202etxt.exe"),  # bidi override
        ("\u202a\u202b\u202c\u202d", "\\u202a\\u202b\\u202c\\u202d"),  # embeddings, pop
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),  # isolates
        ("\u200e\u200f\u061c", "\\u200e\\u200f\\u061c"),  # marks
        ("a\u200bb\u200cc\u200dd", "a\\u200bb\\u200cc\\u200dd"),  # zero width
        ("\u2060\u2061\u2062\u2063\u2064\ufeff", "\\u2060\\u2061\\u2062\\u2063\\u2064\\ufeff"),
        ("\xad\u180e\ufff9", "\\xad\\u180e\\ufff9"),  # other Cf
        ("\U000e0041\U000e007f", "\\U000e0041\\U000e007f"),  # tag characters (ASCII smuggling)
        ("\u2028\u2029", "\\u2028\\u2029"),  # line and paragraph separators
        ("\ud800x\udfff", "\\ud800x\\udfff"),  # lone surrogates
        ("\u3164\u115f\u1160\uffa0\u034f", "\\u3164\\u115f\\u1160\\uffa0\\u034f"),  # fillers
        ("a\tb\nc", "a\tb\nc"),  # multi-line text keeps tab and newline
        ("❤\ufe0f", "❤\ufe0f"),  # a variation selector only picks a glyph
        ("[bold red]x[/] :smile: \\x1b", "[bold red]x[/] :smile: \\x1b"),  # not its concern
    ],
)
def test_each_class_is_escaped(text: str, shown: str) -> None:
    assert inert(text) == shown


def test_one_line_escapes_newline_and_tab_too() -> None:
    assert inert("a\tb\nc\rd", multiline=False) == "a\\tb\\nc\\rd"


def test_every_control_format_separator_and_surrogate_of_this_python_is_escaped() -> None:
    """The fixed set holds every Cc, Cf, Cs, Zl and Zp code point of the running
    Python's Unicode database (checked here, not computed at import)."""
    missed = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Cs", "Zl", "Zp")
        and inert(chr(code), multiline=False) == chr(code)
    ]
    assert missed == []


@given(st.text(max_size=300))
def test_output_is_printable_and_idempotent(text: str) -> None:
    shown = inert(text)
    assert all(c in "\t\n" or c.isprintable() or unicodedata.category(c) in ("Zs", "Co", "Cn",
                                                                              "Mn")
               for c in shown)
    assert find_hidden(inert(text, multiline=False)) is None
    assert inert(shown) == shown


@given(st.text(alphabet=st.sampled_from("ab\x1b[]2K;\x07\u202e\u200b\n\t\r\x9b"), max_size=80),
       st.lists(st.integers(0, 80), max_size=10))
def test_chunking_cannot_matter(text: str, cuts: list[int]) -> None:
    """A stream cut anywhere, an escape sequence split across chunks included, shows the
    same as the whole text."""
    points = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    chunks = [text[a:b] for a, b in itertools.pairwise(points)]
    assert "".join(inert(c) for c in chunks) == inert(text)
    assert "\x1b" not in "".join(inert(c) for c in chunks)


def test_a_split_sequence_is_neutralised() -> None:
    assert inert("\x1b") + inert("[2K") == "\\x1b[2K"
    assert inert("\x1b]52;c;") + inert("aGk=\x07") == "\\x1b]52;c;aGk=\\x07"


def test_find_hidden() -> None:
    assert find_hidden("run the tests") is None
    assert find_hidden("run\nthe tests") == "\n"
    assert find_hidden("run\nthe tests", allow="\n") is None
    assert find_hidden("a\u202eb") == "\u202e"
    assert find_hidden("ok\u200b") == "\u200b"


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("src/calc.py", "src/calc.py"),
        ("a-b_c@d+e=f%g,h:i.txt", "a-b_c@d+e=f%g,h:i.txt"),
        ("my file.py", "'my file.py'"),
        ("-rf", "'-rf'"),
        ("café.py", "'café.py'"),
        ('say "hi".txt', "'say \"hi\".txt'"),
        ("it's.py", "$'it\\'s.py'"),
        ("back\\slash", "$'back\\\\slash'"),
        ("a\x1b[2Kb.py", "$'a\\x1b[2Kb.py'"),
        ("\u202egnp.exe", "$'\\u202egnp.exe'"),
        ("line\nbreak", "$'line\\nbreak'"),
        ("", "''"),
    ],
)
def test_quote_name(name: str, shown: str) -> None:
    assert quote_name(name) == shown
    assert find_hidden(quote_name(name)) is None


@given(st.dictionaries(st.text(max_size=5), st.text(max_size=40).filter(
    lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)), max_size=4))
def test_inert_json_is_the_same_value_with_nothing_to_obey(value: dict[str, str]) -> None:
    encoded = inert_json(json.dumps(value, ensure_ascii=False))
    assert json.loads(encoded) == value
    assert find_hidden(encoded) is None


def test_inert_json_writes_beyond_the_bmp_as_a_surrogate_pair() -> None:
    assert inert_json('"\U000e0041\u202e\x9b"') == '"\\udb40\\udc41\\u202e\\u009b"'
