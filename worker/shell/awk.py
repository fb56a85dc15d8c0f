"""Reader of awk programs: a real tokenizer that finds ways a program can write or run commands.

The program is tokenized by awk's own lexical rule. The one hard part is ``/``: it is division
only right after an operand (a name that is not a keyword, a number, a string, ``)``, ``]``,
``++``/``--``); everywhere else it opens a regex literal. Reading a regex as a division (or the
other way round) would make a ``#`` or ``"`` inside it look like a comment or a string and hide
the code after it, so any spot where awks may disagree is refused instead of guessed:

* ``/`` right after the ``)`` of an ``if``/``while``/``for``/``switch`` header (gawk's grammar
  reads a regex there, mawk a division), after a regex literal, or after ``$``;
* a regex literal that ends differently when a ``/`` inside ``[...]`` does or does not close
  it (gawk versus a plainer awk), or that runs into a newline or the end of the text;
* a string with a newline or a line continuation inside, and any character that is not part of
  awk's token set (``@``, a quote, a backtick, a stray backslash).

Refused tokens: the names ``system``, ``getline`` and ``close``; a pipe ``|`` or ``|&``; and any
``>``/``>>`` inside a ``print``/``printf`` statement (output redirection; a comparison inside
``print`` is refused too, which is acceptable). A ``>`` elsewhere (``$3 > 10``) is a comparison.
As a backstop those three names and ``@`` are refused anywhere in the program text, even inside
strings (gawk can call a function named by a string with ``@f()``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from worker.shell.lexer import ScanError, WordInfo, regex_literal_end
from worker.shell.option_table import OptionTable, Refused, parse_options
from worker.shell.options import static_args_problem

_ANYWHERE = (
    (re.compile(r"\bsystem\b"), "awk:system("),
    (re.compile(r"\bgetline\b"), "awk:getline"),
    (re.compile(r"\bclose\b"), "awk:close("),
    (re.compile(r"@"), "awk:@include"),
)

_KEYWORDS = frozenset({
    "BEGIN", "END", "BEGINFILE", "ENDFILE", "function", "func", "if", "else", "while", "for",
    "do", "break", "continue", "next", "nextfile", "exit", "return", "delete", "print",
    "printf", "getline", "in", "switch", "case", "default",
})
_FORBIDDEN_NAMES = {"system": "awk:system(", "getline": "awk:getline", "close": "awk:close("}
_CONTROL = frozenset({"if", "while", "for", "switch"})
# Operators, longest first. "/" and "/=" are handled separately (regex or division).
_OPERATORS = (
    "**=", "&&", "||", "==", "<=", ">=", "!=", "!~", "++", "--", "+=", "-=", "*=", "%=", "^=",
    "**", ">>", "|&", "+", "-", "*", "%", "^", "!", "<", ">", "~", "?", ":", "=", "|", "$",
)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER_RE = re.compile(r"0[xX][0-9A-Fa-f]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

# What the previous token leaves behind, for deciding what a "/" means.
_OPERAND = "operand"  # "/" divides
_EXPECT = "expect"  # "/" opens a regex
_AMBIGUOUS = "ambiguous"  # awks disagree: refuse a "/" here



def awk_program_problem(program: str) -> str | None:
    """Why an awk program is not read-only, or None."""
    for pattern, reason in _ANYWHERE:
        if pattern.search(program):
            return reason
    return _code_problem(program)


def _code_problem(prog: str) -> str | None:
    """Tokenize ``prog``; the first refused or untokenizable spot is the answer."""
    return _AwkTokenizer(prog).problem()


class _AwkTokenizer:
    """One pass over an awk program. Each token method starts at ``i``, moves ``i`` past
    its token and returns a reason to refuse, or None."""

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.n = len(prog)
        self.i = 0
        self.in_print = False
        self.state = _EXPECT
        # One entry per open "(": True when it opened an if/while/for/switch header.
        self.parens: list[bool] = []
        self.braces = 0
        self.last_name = ""
        self.dangling = False  # the last token was a binary/unary operator: the expression goes on

    def problem(self) -> str | None:
        while self.i < self.n:
            problem = self.token()
            if problem:
                return problem
        if self.parens:
            return "awk:unbalanced ("
        if self.braces:
            return "awk:unbalanced {"
        if self.dangling:
            # gawk joins -e pieces: text after a trailing operator would be read in the next
            # piece.
            return "awk:program ends inside an expression"
        return None

    def token(self) -> str | None:
        prog, i = self.prog, self.i
        c = prog[i]
        if c in " \t":
            self.i += 1
            return None
        if c == "\\":
            if prog.startswith("\\\n", i):
                self.i += 2  # line continuation
                return None
            return "awk:cannot tokenize \\"
        if c == "#":
            nl = prog.find("\n", i)
            self.i = self.n if nl < 0 else nl
            return None
        if c != "\n":
            self.dangling = c in "([,"  # set again for operators and division
        if c == "\n" or c in ";{}":
            return self.statement_end(c)
        if c == '"':
            return self.string()
        if c == "/":
            return self.slash()
        if c.isdigit() or (c == "." and prog[i + 1 : i + 2].isdigit()):
            return self.number()
        m = _NAME_RE.match(prog, i)
        if m is not None:
            return self.name(m.group())
        if c in "()[],":
            return self.bracket(c)
        return self.operator(c)

    def statement_end(self, c: str) -> str | None:
        if c == "{":
            self.braces += 1
        elif c == "}":
            self.braces -= 1
            if self.braces < 0:
                return "awk:unbalanced }"
        self.in_print = False
        self.state = _EXPECT
        self.last_name = ""
        self.i += 1
        return None

    def string(self) -> str | None:
        prog, n = self.prog, self.n
        j = self.i + 1
        while j < n and prog[j] != '"':
            if prog[j] == "\n":
                return "awk:unterminated string"
            if prog[j] == "\\":
                if j + 1 < n and prog[j + 1] == "\n":
                    return "awk:line continuation in string"
                j += 2
                continue
            j += 1
        if j >= n:
            return "awk:unterminated string"
        self.i = j + 1
        self.state = _OPERAND
        return None

    def slash(self) -> str | None:
        """Division after an operand, a regex literal where an operand is expected."""
        if self.state == _AMBIGUOUS:
            return "awk:ambiguous /"
        if self.state == _OPERAND:
            self.i += 2 if self.prog.startswith("/=", self.i) else 1
            self.state = _EXPECT
            self.dangling = True
            return None
        try:
            end = regex_literal_end(self.prog, self.i + 1, "/", brackets=True)
            plain = regex_literal_end(self.prog, self.i + 1, "/", brackets=False)
        except ScanError as exc:
            return f"awk:{exc}"
        if end != plain:
            return "awk:ambiguous regex ([/] read two ways)"
        self.i = end
        self.state = _AMBIGUOUS  # a "/" right after a regex literal: refuse rather than guess
        return None

    def number(self) -> str | None:
        m = _NUMBER_RE.match(self.prog, self.i)
        if m is None:  # pragma: no cover - the caller's class check guarantees a match
            return "awk:cannot tokenize number"
        self.i = m.end()
        if self.i < self.n and (self.prog[self.i].isalnum() or self.prog[self.i] in "_."):
            return "awk:cannot tokenize number"
        self.state = _OPERAND
        return None

    def name(self, word: str) -> str | None:
        self.i += len(word)
        if word in _FORBIDDEN_NAMES:
            return _FORBIDDEN_NAMES[word]
        if word in ("print", "printf"):
            self.in_print = True
        self.state = _EXPECT if word in _KEYWORDS else _OPERAND
        self.last_name = word
        return None

    def bracket(self, c: str) -> str | None:
        if c == "(":
            self.parens.append(self.last_name in _CONTROL)
            self.state = _EXPECT
        elif c == ")":
            if not self.parens:
                return "awk:unbalanced )"
            control = self.parens.pop()
            self.state = _AMBIGUOUS if control else _OPERAND
        else:
            self.state = _OPERAND if c == "]" else _EXPECT
        self.last_name = ""
        self.i += 1
        return None

    def operator(self, c: str) -> str | None:
        for op in _OPERATORS:
            if self.prog.startswith(op, self.i):
                break
        else:
            return f"awk:cannot tokenize {c!r}"
        if op in ("|", "|&"):
            return "awk:output pipe |"
        if op in (">", ">>") and self.in_print:
            return "awk:output redirect >"
        self.i += len(op)
        self.last_name = ""
        self.dangling = op not in ("++", "--")
        if op in ("++", "--"):
            # Post-increment ends an operand; a pre-increment must be followed by a name, so
            # "/" after it is never valid awk either way.
            self.state = _OPERAND
        elif op == "$":
            self.state = _AMBIGUOUS
        else:
            self.state = _EXPECT
        return None


AWK_OPTIONS = OptionTable(
    "awk",
    flags="bcChkLMnNOPrsStV",
    valued="Fve",
    refused={
        "f": "awk:-f", "E": "awk:-f", "i": "awk:@include", "l": "awk:@include",
        "W": "awk:-W", "d": "awk:--dump-variables", "D": "awk:--debug",
        "o": "awk:--pretty-print", "p": "awk:--profile",
    },
    long_flags=(
        "characters-as-bytes", "traditional", "copyright", "gen-pot", "help", "lint",
        "bignum", "use-lc-numeric", "non-decimal-data", "optimize", "no-optimize", "posix",
        "re-interval", "sandbox", "lint-old", "version", "csv", "trace",
    ),
    long_valued=("field-separator", "assign", "source"),
    long_refused={
        "file": "awk:-f", "exec": "awk:-f", "include": "awk:@include", "load": "awk:@include",
        "dump-variables": "awk:--dump-variables", "debug": "awk:--debug",
        "pretty-print": "awk:--pretty-print", "profile": "awk:--profile",
    },
    stop_at_operand=True,  # awk's options end at the program (or the first operand)
    collect={"e": "program", "source": "program"},
)


def awk_rule(args: Sequence[WordInfo]) -> str | None:
    """Argument rule for ``awk``: no program files or extensions, a read-only program."""
    try:
        parsed = parse_options(AWK_OPTIONS, args)
    except Refused as refused:
        return refused.reason
    programs = parsed.values.get("program", [])
    i = parsed.options_end
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
    # gawk joins several -e/--source pieces into one program: check them joined and alone.
    pieces = [*programs, "\n".join(programs)] if len(programs) > 1 else programs
    for program in pieces:
        problem = awk_program_problem(program)
        if problem:
            return problem
    return None
