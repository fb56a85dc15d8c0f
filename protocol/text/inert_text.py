"""Untrusted text made inert and visible before it reaches a terminal.

Model text, suggestions, tool arguments and results, file names, boundary details and log
lines may hold characters that a terminal obeys instead of showing: C0 and C1 controls
(ESC starts the CSI and OSC sequences that move the cursor, erase lines or write the
clipboard; U+009B is a CSI on its own), DEL, bidi overrides, isolates and marks (which
reorder what is shown), zero-width and other invisible format characters (which make two
different texts look the same), line and paragraph separators, and lone surrogates.

:func:`inert` replaces each such character by a visible escape in the notation of a
shell's ``$'...'`` quoting (``\\x1b``, ``\\u202e``, ``\\U000e0041``), one character at a
time: the result of a text is the concatenation of the results of its pieces, however a
stream was cut into chunks, so an escape sequence split across chunks is neutralised
like a whole one. The set is fixed here rather than computed from ``unicodedata`` at
import (a loop over every code point costs a short command's start-up); it holds every
code point of the Unicode categories Cc, Cf, Cs, Zl and Zp (a test checks that against
the running Python), plus the invisible fillers that are letters or marks by category
(U+034F, U+115F, U+1160, U+17B4, U+17B5, U+3164, U+FFA0) and the unassigned code points
reserved as invisible (U+FFF0-U+FFF8). Variation selectors stay: they only pick a glyph
for the character before them.

In multi-line text (``multiline=True``) newline and tab are kept; everything else in the
set, carriage return included, is escaped. In one-line text (file names, tool
arguments, suggestions) newline, tab and carriage return become ``\\n``, ``\\t``, ``\\r``.

:func:`quote_name` shows a file name so that odd but legal names are visibly one name.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["encodable", "find_hidden", "inert", "inert_json", "quote_name"]

# Every code point made visible, as a regex class body (see the module docstring).
_HIDDEN_BODY: Final = (
    r"\x0b-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    r"\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164"
    r"\ud800-\udfff\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
)
_MULTI_LINE: Final = re.compile(r"[\x00-\x08" + _HIDDEN_BODY + "]")
"""What is escaped in multi-line text: the set without newline (\\x0a) and tab (\\x09)."""
_ONE_LINE: Final = re.compile(r"[\x00-\x0a" + _HIDDEN_BODY + "]")
"""What is escaped in one-line text: the whole set."""

_NAMED: Final = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape_match(match: re.Match[str]) -> str:
    return _escape(match.group())


def inert(text: str, *, multiline: bool = True) -> str:
    """``text`` with every character a terminal would obey or hide shown as an escape.

    ``multiline`` keeps newline and tab (model text, tool output); without it they are
    escaped too (names, arguments, one-line messages). Idempotent: the escapes are
    printable ASCII. Markup is not this function's concern: rich interprets ``[...]``
    only in strings printed with markup on, and specrun's renderers put untrusted text
    in ``rich.text.Text`` objects, which never parse it."""
    pattern = _MULTI_LINE if multiline else _ONE_LINE
    return pattern.sub(_escape_match, text)


def find_hidden(text: str, *, allow: str = "") -> str | None:
    """The first character of ``text`` that :func:`inert` would escape on one line,
    except those in ``allow``; None when there is none."""
    for match in _ONE_LINE.finditer(text):
        if match.group() not in allow:
            return match.group()
    return None


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON writes a character beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def inert_json(encoded: str) -> str:
    """JSON text with every character :func:`inert` escapes written as a ``\\uXXXX``
    escape: the same JSON value, exactly (a decoder reads the same strings), but nothing
    in the bytes for a terminal to obey. JSON encoders escape only U+0000-U+001F; these
    characters can stand only inside strings, where a ``\\u`` escape means the same."""
    return _ONE_LINE.sub(_json_escape, encoded)


_PLAIN: Final = re.compile(r"[A-Za-z0-9@%+=:,./_-]+")


def quote_name(name: str) -> str:
    """A file name (or project-relative path) as shown to a person.

    Shown bare when it is made only of ASCII letters, digits and ``@%+=:,./_-`` and does
    not start with ``-``. Otherwise quoted like a shell argument: ``'my file.py'``,
    ``'-rf'``, ``'café.py'``; a name holding a quote, a backslash or a character
    :func:`inert` escapes is shown in ``$'...'`` form, where ``\\'`` and ``\\\\`` are a
    quote and a backslash and the other escapes are :func:`inert`'s
    (``$'a\\x1b[2Kb'``, ``$'\\u202egnp.exe'``)."""
    if _PLAIN.fullmatch(name) and not name.startswith("-"):
        return name
    if "'" in name or "\\" in name or _ONE_LINE.search(name):
        body = name.replace("\\", "\\\\").replace("'", "\\'")
        return "$'" + inert(body, multiline=False) + "'"
    return f"'{name}'"


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _surrogate_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as ``surrogateescape`` keeps it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def encodable(text: str) -> str:
    """``text`` with each lone surrogate written as an escape, so that it encodes as UTF-8
    (for the wire, the model provider, a JSON file). A file name or a file's bytes that
    are not UTF-8 reach Python with each undecodable byte as a lone surrogate
    (U+DC80-U+DCFF), shown here as ``\\xff``, the way :func:`inert` shows it; one of them
    in a tool result or a boundary used to fail the whole speculation or turn."""
    return _LONE_SURROGATE.sub(_surrogate_escape, text)
