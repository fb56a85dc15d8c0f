"""Conservative reader of sed scripts: finds commands that write files or run programs.

The parser follows GNU sed's grammar closely enough to locate every command letter. A regex may
be read two ways: GNU sed (4.9 here) treats a delimiter inside a bracket expression as part of
the regex (``s/[^/]*$//``), a simpler sed would end the regex there. The script is read both ways
and accepted only when neither reading holds a forbidden command; a reading that is a syntax
error is harmless (sed compiles the whole script before running any of it).
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.shell.lexer import ScanError, WordInfo, regex_literal_end
from worker.shell.option_table import OptionTable, Refused, parse_options
from worker.shell.options import static_args_problem

# Commands that write files (w, W), read files (r, R) or execute (e).
_FORBIDDEN_COMMANDS = frozenset("rRwWe")
_SIMPLE_COMMANDS = frozenset("=dDgGhHnNpPxzF")
_NUMBER_COMMANDS = frozenset("lLqQ")
_S_FLAGS_OK = frozenset("gpiImM0123456789")



class _SedError(Exception):
    """A syntax error in the script (sed would refuse to run it)."""


class _SedForbidden(_SedError):
    """A command that writes, reads other files or executes."""


def _check_delimiter(delim: str) -> None:
    """Refuse delimiters whose reading differs between seds (or that sed reads as syntax).

    A bracket as the delimiter (``s[a[b[``), a letter, a digit, a blank or a non-ASCII character
    makes "where does the regex end" depend on the implementation and locale; no reading is
    certain, so the script is refused (a forbidden-kind error, not a tolerated syntax error).
    """
    if delim in "[] \t" or delim.isalnum() or not delim.isascii():
        raise _SedForbidden(f"sed:script:delimiter {delim!r}")


class _Parser:
    def __init__(self, script: str, *, brackets: bool) -> None:
        self.s = script
        self.n = len(script)
        self.brackets = brackets

    def peek(self, i: int) -> str:
        return self.s[i] if i < self.n else ""

    def delimiter(self, i: int, missing: str) -> str:
        """The delimiter at ``i`` of an address or an ``s``/``y`` command; ``missing`` is
        the error when there is none (the end, a newline or a backslash)."""
        delim = self.peek(i)
        if delim in ("", "\n", "\\"):
            raise _SedError(missing)
        _check_delimiter(delim)
        return delim

    def skip(self, i: int, chars: str) -> int:
        while i < self.n and self.s[i] in chars:
            i += 1
        return i

    def regex_end(self, i: int, delim: str) -> int:
        """Index after the closing ``delim`` of a regex starting at ``i``.

        With ``brackets`` (GNU sed), a delimiter inside a bracket expression does not end it.
        """
        return self.scan_literal(i, delim, brackets=self.brackets)

    def plain_part_end(self, i: int, delim: str) -> int:
        """Index after the closing ``delim`` of a replacement / y-operand starting at ``i``."""
        return self.scan_literal(i, delim, brackets=False)

    def scan_literal(self, i: int, delim: str, *, brackets: bool) -> int:
        try:
            return regex_literal_end(self.s, i, delim, brackets=brackets)
        except ScanError as exc:
            raise _SedError(f"sed:script:{exc}") from None

    def address(self, i: int, *, second: bool) -> int:
        c = self.peek(i)
        if c.isdigit():
            i = self.skip(i, "0123456789")
            if self.peek(i) == "~":
                i = self.skip(i + 1, "0123456789")
            return i
        if second and c in "+~":
            return self.skip(i + 1, "0123456789")
        if c == "$":
            return i + 1
        if c == "/":
            return self.skip(self.regex_end(i + 1, "/"), "IM")
        if c == "\\":
            delim = self.delimiter(i + 1, "sed:script:address")
            return self.skip(self.regex_end(i + 2, delim), "IM")
        return i

    def end_of_command(self, i: int) -> int:
        i = self.skip(i, " \t")
        if i >= self.n or self.s[i] in ";\n}#":
            return i
        raise _SedError("sed:script:unexpected text after command")

    def text_argument(self, i: int) -> int:
        """``a``/``i``/``c`` text: to the end of the line, backslash-newline continues."""
        while i < self.n:
            c = self.s[i]
            if c == "\\":
                i += 2
                continue
            if c == "\n":
                return i
            i += 1
        return i

    def label(self, i: int) -> int:
        # Shortest reading: a label stops at blanks, ';', newline or '}' so that anything a
        # longer-reading sed would swallow is still inspected as commands here.
        i = self.skip(i, " \t")
        while i < self.n and self.s[i] not in " \t;\n}":
            i += 1
        return i

    def substitute(self, i: int) -> int:
        delim = self.delimiter(i, "sed:script:s delimiter")
        i = self.regex_end(i + 1, delim)
        i = self.plain_part_end(i, delim)
        while i < self.n and self.s[i] not in " \t;\n}#":
            flag = self.s[i]
            if flag == "e":
                raise _SedForbidden("sed:s///e")
            if flag == "w":
                raise _SedForbidden("sed:s///w")
            if flag not in _S_FLAGS_OK:
                raise _SedError(f"sed:s///{flag}")
            i += 1
        return self.end_of_command(i)

    def transliterate(self, i: int) -> int:
        delim = self.delimiter(i, "sed:script:y delimiter")
        i = self.plain_part_end(i + 1, delim)
        i = self.plain_part_end(i, delim)
        return self.end_of_command(i)

    def run(self) -> None:
        i = 0
        while True:
            i = self.skip(i, " \t\n;")
            if i >= self.n:
                return
            c = self.s[i]
            if c == "#":
                nl = self.s.find("\n", i)
                i = self.n if nl < 0 else nl
                continue
            if c == "}":
                i = self.end_of_command(i + 1)
                continue
            i = self.address(i, second=False)
            i = self.skip(i, " \t")
            if self.peek(i) == ",":
                i = self.address(self.skip(i + 1, " \t"), second=True)
            i = self.skip(i, " \t")
            while self.peek(i) == "!":
                i = self.skip(i + 1, " \t")
            cmd = self.peek(i)
            if not cmd:
                raise _SedError("sed:script:missing command")
            i += 1
            if cmd == "{":
                continue
            if cmd in _FORBIDDEN_COMMANDS:
                raise _SedForbidden(f"sed:{cmd}")
            if cmd in _SIMPLE_COMMANDS:
                i = self.end_of_command(i)
            elif cmd in _NUMBER_COMMANDS:
                i = self.end_of_command(self.skip(self.skip(i, " \t"), "0123456789"))
            elif cmd in "aic":
                i = self.text_argument(i)
            elif cmd in "btT:v":
                i = self.end_of_command(self.label(i))
            elif cmd == "s":
                i = self.substitute(i)
            elif cmd == "y":
                i = self.transliterate(i)
            else:
                raise _SedError(f"sed:script:unknown command {cmd!r}")


def _reading(script: str, *, brackets: bool) -> _SedError | None:
    try:
        _Parser(script, brackets=brackets).run()
    except _SedError as exc:
        return exc
    return None


def sed_script_problem(script: str) -> str | None:
    """Why a sed script is not read-only (``sed:w``, ``sed:s///e``…), or None."""
    gnu = _reading(script, brackets=True)
    plain = _reading(script, brackets=False)
    for problem in (gnu, plain):
        if isinstance(problem, _SedForbidden):
            return str(problem)
    if gnu is not None and plain is not None:
        return str(gnu)  # not a valid script either way: sed would refuse it
    return None


SED_OPTIONS = OptionTable(
    "sed",
    flags="nrsuzEb",
    valued="el",
    refused={"i": "sed:-i", "I": "sed:-i", "f": "sed:-f"},
    long_flags=(
        "quiet", "silent", "debug", "posix", "regexp-extended", "separate", "sandbox",
        "unbuffered", "null-data", "zero-terminated", "binary", "follow-symlinks", "help",
        "version",
    ),
    long_valued=("expression", "line-length"),
    long_refused={"in-place": "sed:-i", "file": "sed:-f"},
    collect={"e": "script", "expression": "script"},
)


def sed_rule(args: Sequence[WordInfo]) -> str | None:
    """Argument rule for ``sed``: no in-place editing, no script files, a read-only script."""
    problem = static_args_problem("sed", args, honor_double_dash=False)
    if problem:
        return problem
    try:
        parsed = parse_options(SED_OPTIONS, args)
    except Refused as refused:
        return refused.reason
    scripts = parsed.values.get("script", [])
    if not scripts:
        if not parsed.operands:
            return None
        scripts = [parsed.operands[0].value]
    return sed_script_problem("\n".join(scripts))
