"""Conservative reader of awk programs: finds ways an awk program can write or run commands.

Refused anywhere in the program text (even inside strings): ``system``, ``getline``, ``close``,
``@`` (gawk's ``@include``/``@load`` and indirect calls such as ``@f()`` with ``f = "system"``).
Refused in program code (outside string and regex literals): a pipe ``|`` (not ``||``), ``|&``,
and any ``>`` that follows ``print``/``printf`` in the same statement (output redirection; a
parenthesised comparison inside ``print`` is refused too — failing closed is acceptable there).
A ``>`` elsewhere (``$3 > 10``) is a comparison and is fine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from worker.shell.lexer import WordInfo
from worker.shell.options import long_option_matches, short_cluster, static_args_problem

_ANYWHERE = (
    (re.compile(r"\bsystem\b"), "awk:system("),
    (re.compile(r"\bgetline\b"), "awk:getline"),
    (re.compile(r"\bclose\b"), "awk:close("),
    (re.compile(r"@"), "awk:@include"),
)

# After these characters a "/" can only start a regex literal (there is no left operand).
_REGEX_CONTEXT = frozenset("({;,!~&|}\n")

_SHORT_FLAGS = frozenset("bcChkLMnNOPrsStV")
_SHORT_WITH_VALUE = frozenset("Fv")
_SHORT_FORBIDDEN = {
    "f": "awk:-f", "E": "awk:-f", "i": "awk:@include", "l": "awk:@include",
    "W": "awk:-W", "d": "awk:--dump-variables", "D": "awk:--debug", "o": "awk:--pretty-print",
    "p": "awk:--profile",
}
_LONG_FLAGS = (
    "characters-as-bytes", "traditional", "copyright", "gen-pot", "help", "lint",
    "bignum", "use-lc-numeric", "non-decimal-data", "optimize", "no-optimize", "posix",
    "re-interval", "sandbox", "lint-old", "version", "csv", "trace",
)
_LONG_WITH_VALUE = ("field-separator", "assign", "source")
_LONG_FORBIDDEN = {
    "file": "awk:-f", "exec": "awk:-f", "include": "awk:@include", "load": "awk:@include",
    "dump-variables": "awk:--dump-variables", "debug": "awk:--debug",
    "pretty-print": "awk:--pretty-print", "profile": "awk:--profile",
}


def awk_program_problem(program: str) -> str | None:
    """Why an awk program is not read-only, or None."""
    for pattern, reason in _ANYWHERE:
        if pattern.search(program):
            return reason
    return _code_problem(program)


def _code_problem(prog: str) -> str | None:
    i = 0
    n = len(prog)
    in_print = False
    prev = "\n"  # last significant code character
    while i < n:
        c = prog[i]
        if c in " \t":
            i += 1
            continue
        if c == "\\" and i + 1 < n and prog[i + 1] == "\n":
            i += 2
            continue
        if c == "#":
            nl = prog.find("\n", i)
            i = n if nl < 0 else nl
            continue
        if c == '"':
            j = i + 1
            while j < n and prog[j] != '"':
                if prog[j] == "\n":
                    return "awk:unterminated string"
                j += 2 if prog[j] == "\\" else 1
            if j >= n:
                return "awk:unterminated string"
            i = j + 1
            prev = '"'
            continue
        if c == "/" and prev in _REGEX_CONTEXT:
            # Shortest reading of a regex literal: ends at the first unescaped "/" (a "/" in a
            # bracket expression ends it too), so text after it is still inspected as code.
            j = i + 1
            while j < n and prog[j] != "/":
                if prog[j] == "\n":
                    return "awk:unterminated regex"
                j += 2 if prog[j] == "\\" else 1
            if j >= n:
                return "awk:unterminated regex"
            i = j + 1
            prev = "/"
            continue
        if c.isalpha() or c == "_":
            j = i
            while j < n and (prog[j].isalnum() or prog[j] == "_"):
                j += 1
            word = prog[i:j]
            if word in ("print", "printf"):
                in_print = True
            i = j
            prev = "a"
            continue
        if c == "|":
            if prog.startswith("||", i):
                i += 2
                prev = "|"
                continue
            return "awk:output pipe |"
        if c == ">" and in_print:
            return "awk:output redirect >"
        if c in ";\n{}":
            in_print = False
        prev = c
        i += 1
    return None


def awk_rule(args: Sequence[WordInfo]) -> str | None:
    """Argument rule for ``awk``: no program files or extensions, a read-only program."""
    programs: list[str] = []
    i = 0
    while i < len(args):
        value = args[i].value
        if value == "--":
            i += 1
            break
        if value == "-" or not value.startswith("-"):
            break
        i += 1
        if value.startswith("--"):
            name, eq, attached = value[2:].partition("=")
            matches = long_option_matches(
                name, (*_LONG_FLAGS, *_LONG_WITH_VALUE, *_LONG_FORBIDDEN)
            )
            for match in matches:
                if match in _LONG_FORBIDDEN:
                    return _LONG_FORBIDDEN[match]
            if len(matches) != 1:
                return f"awk:option:--{name}"
            if matches[0] in _LONG_WITH_VALUE:
                if not eq:
                    if i >= len(args):
                        return f"awk:option:--{name}"
                    attached = args[i].value
                    i += 1
                if matches[0] == "source":
                    programs.append(attached)
            continue
        cluster = short_cluster(value) or ""
        for pos, letter in enumerate(cluster):
            if letter in _SHORT_FORBIDDEN:
                return _SHORT_FORBIDDEN[letter]
            if letter in _SHORT_FLAGS:
                continue
            if letter in _SHORT_WITH_VALUE or letter == "e":
                rest = cluster[pos + 1 :]
                if not rest:
                    if i >= len(args):
                        return f"awk:option:-{letter}"
                    rest = args[i].value
                    i += 1
                if letter == "e":
                    programs.append(rest)
                break
            return f"awk:option:-{letter}"
    if not programs:
        if i >= len(args):
            return None
        programs.append(args[i].value)
        i += 1
    # Options and the program must be known now; operands after the program (input files,
    # var=value assignments) are never read as options, so globs and expansions are fine there.
    problem = static_args_problem("awk", args[:i], honor_double_dash=False)
    if problem:
        return problem
    for operand in args[i:]:
        # Operands are input files or var=value assignments; an option-looking operand is odd
        # enough to refuse.
        if operand.value.startswith("-") and operand.value != "-":
            return f"awk:operand:{operand.value}"
    for program in programs:
        problem = awk_program_problem(program)
        if problem:
            return problem
    return None
