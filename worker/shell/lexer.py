"""Quote-aware lexical pass over a shell command, independent of bashlex.

It does three jobs that bashlex cannot be trusted with:

* split the input into top-level statements (newline, ``;``, ``&``), dropping comments and
  line continuations and re-attaching here-document bodies to the statement that opened them;
* record every expansion that can run code or write (``$(...)``, backticks, process
  substitution, arithmetic, dangerous ``${...}`` operators, output redirections), also inside
  unquoted here-document bodies and ``${...}`` text, which bashlex does not parse;
* analyse a single word's source text (quote removal, is it static, does it glob).

Everything here errs on the side of "not read-only": when the scanner is unsure it records a
finding or an error, and the classifier treats either as a refusal.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

# Characters that end an unquoted word in bash.
_METACHAR_TEXT = " \t\n;&|()<>"
_METACHARS = frozenset(_METACHAR_TEXT)
# What the statement scanner reads itself; every other character is copied as it is.
_STEP_STOPS = "\\'\"`$<>#(){}\n;&"
_BLANKS = " \t"

# Output targets that cannot change anything on disk.
SAFE_SINKS = frozenset({"/dev/null"})

_PARAM_HEAD_RE = re.compile(r"(#?)([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(.*)\Z", re.DOTALL)
_OFFSET_RE = re.compile(r":\s*-?\s*[0-9]+(\s*:\s*-?\s*[0-9]+)?\Z")
# Operators of ${name<op>word}, longest first.
_PARAM_OPS = (
    ":-", ":+", ":?", ":=", "##", "%%", "//", "/#", "/%", "^^", ",,",
    "-", "+", "?", "=", "#", "%", "/", "^", ",",
)


class ScanError(Exception):
    """The scanner could not make sense of the input (unbalanced quote, odd here-doc…)."""


# --------------------------------------------------------------------------------------------
# The character scan: the one loop. Every reader below steps from one character that matters
# to the next with it, so none of them walks characters one by one in Python, and none can
# step over a backslash differently from the others.
# --------------------------------------------------------------------------------------------


@functools.cache
def _stop_matcher(stops: str) -> Callable[[str, int], re.Match[str] | None]:
    body = re.escape(stops.replace("\\", ""))
    if "\\" in stops:  # the caller reads backslashes itself
        return re.compile(f"[^{body}\\\\]*").match
    # a backslash and the character it escapes (or a lone one at the end) are one step
    return re.compile(f"(?:[^{body}\\\\]+|\\\\[\\s\\S]?)*+").match


def skip_to(s: str, i: int, stops: str) -> int:
    """Index of the first character of ``s`` from ``i`` on that is in ``stops``, or
    ``len(s)`` when there is none. A backslash escapes the character after it: the pair is
    stepped over (a backslash at the very end too), unless ``stops`` holds the backslash
    itself, which then stops the scan like any other."""
    match = _stop_matcher(stops)(s, i)
    assert match is not None  # both patterns match the empty string
    return match.end()


# --------------------------------------------------------------------------------------------
# Quote and regex scanning: the only copies. Every part of the shell classifier that needs to
# step over a quoted string or a regex literal calls these, so they cannot disagree (an
# unterminated quote is an error for all of them).
# --------------------------------------------------------------------------------------------


def single_quote_end(s: str, i: int) -> int:
    """Index after the ``'`` closing the single-quoted string whose ``'`` is at ``i``."""
    end = s.find("'", i + 1)
    if end < 0:
        raise ScanError("unterminated single quote")
    return end + 1


def double_quote_end(s: str, i: int) -> int:
    """Index after the ``"`` closing the double-quoted string whose ``"`` is at ``i``.

    A backslash escapes the next character (enough to find the end; substitutions inside are
    refused by the callers, so their own quoting need not be followed).
    """
    return _escaped_end(s, i + 1, '"', "unterminated double quote")


def ansi_c_quote_end(s: str, i: int) -> int:
    """Index after the ``'`` closing ``$'...'`` whose ``$`` is at ``i``."""
    return _escaped_end(s, i + 2, "'", "unterminated $'...' quote")


def _escaped_end(s: str, j: int, close: str, error: str) -> int:
    """Index after the first ``close`` from ``j`` on that no backslash escapes."""
    end = skip_to(s, j, close)
    if end >= len(s):
        raise ScanError(error)
    return end + 1


def regex_literal_end(s: str, i: int, delim: str, *, brackets: bool) -> int:
    """Index after the ``delim`` that closes a regex literal whose body starts at ``i``.

    Shared by the awk and sed readers. With ``brackets`` a ``delim`` inside a bracket
    expression (``[/]``, ``[[:alpha:]/]``) does not end the regex (GNU sed, gawk); without, the
    first unescaped ``delim`` ends it (a plainer implementation). A newline or the end of the
    text before the closing delimiter is an error.
    """
    n = len(s)
    in_bracket = False
    bracket_start = -1
    outside = "\n" + ("[" if brackets else "") + delim.replace("\\", "")
    while True:
        # a backslash at the very end is stepped over to the end: unterminated too
        i = skip_to(s, i, "\n[]" if in_bracket else outside)
        if i >= n:
            raise ScanError("unterminated regex")
        c = s[i]
        if c == "\n":
            raise ScanError("newline in regex")
        if in_bracket:
            # "]" right after "[" or "[^" is a literal member, not the end of the expression.
            if c == "]" and i > bracket_start + 1 and not (
                i == bracket_start + 2 and s[bracket_start + 1] == "^"
            ):
                in_bracket = False
            elif c == "[" and i + 1 < n and s[i + 1] in ":.=":
                close = s.find(s[i + 1] + "]", i + 2)
                if close < 0:
                    raise ScanError("unterminated bracket expression")
                i = close + 2
                continue
            i += 1
            continue
        if brackets and c == "[":
            in_bracket = True
            bracket_start = i
            i += 1
            continue
        if c == delim:
            return i + 1
        i += 1


@dataclass
class Scan:
    """Result of :func:`scan`."""

    statements: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    error: str | None = None


# --------------------------------------------------------------------------------------------
# ${...} and here-document checks (shared by the scanner and the bashlex node walk)
# --------------------------------------------------------------------------------------------


def parameter_problem(inner: str) -> str | None:
    """Why the text between ``${`` and ``}`` is not harmless, or ``None`` when it is.

    Accepted: ``${name}``, ``${#name}``, ``${name<op>word}`` for the non-assigning operators,
    and numeric ``${name:offset[:length]}``. Refused: assignment (``=``, ``:=``), transforms
    (``@P``, ``@E``…), indirection (``!``), array subscripts and variable offsets (both are
    evaluated arithmetically, which can run command substitutions stored in a variable), and any
    operand that itself holds a command substitution or a non-trivial nested expansion.
    """
    if len(inner) > 1 and inner[0] == "!":
        return "parameter:${!...}"
    m = _PARAM_HEAD_RE.match(inner)
    if m is None:
        if inner.startswith("!"):
            return "parameter:${!...}"
        if "[" in inner:
            return "parameter:${name[...]}"
        return "parameter:${...}"
    length, _name, rest = m.groups()
    if not rest:
        return None
    if length:
        return "parameter:${#...}"
    if rest.startswith("@"):
        return f"parameter:${{...{rest[:2]}}}"
    if rest.startswith("["):
        return "parameter:${name[...]}"
    for op in _PARAM_OPS:
        if rest.startswith(op):
            if op in ("=", ":="):
                return f"parameter:${{...{op}...}}"
            return _operand_problem(rest[len(op):])
    if rest.startswith(":"):
        if _OFFSET_RE.match(rest):
            return None
        return "parameter:${name:offset}"
    return "parameter:${...}"


def _operand_problem(word: str) -> str | None:
    """Check the ``word`` of ``${name<op>word}``: only literal text and simple ``$name``."""
    i = 0
    n = len(word)
    while (i := skip_to(word, i, "`'\"$()")) < n:
        c = word[i]
        if c == "`":
            return "substitution:`...`"
        if c in "'\"":
            return "parameter:quoted operand"
        if c == "$":
            nxt = word[i + 1] if i + 1 < n else ""
            if nxt == "(":
                return "substitution:$(...)"
            if nxt == "[":
                return "arithmetic:$[...]"
            if nxt == "{":
                return "parameter:nested ${...}"
            if nxt and (nxt.isalnum() or nxt in "_@*#?$!-"):
                i += 2
                continue
            return "parameter:${...}"
        return "parameter:operand with parentheses"  # "(" or ")"
    return None


def heredoc_body_problem(body: str) -> str | None:
    """Expansions in an unquoted here-document body that could run code."""
    i = 0
    n = len(body)
    while (i := skip_to(body, i, "`$")) < n:
        c = body[i]
        if c == "`":
            return "substitution:`...` in here-document"
        if c == "$" and i + 1 < n:
            nxt = body[i + 1]
            if nxt == "(":
                if body.startswith("((", i + 1):
                    return "arithmetic:$((...)) in here-document"
                return "substitution:$(...) in here-document"
            if nxt == "[":
                return "arithmetic:$[...] in here-document"
            if nxt == "{":
                end = _find_brace_end(body, i + 1)
                if end < 0:
                    return "parameter:unterminated ${ in here-document"
                problem = parameter_problem(body[i + 2 : end])
                if problem:
                    return problem + " in here-document"
                i = end + 1
                continue
        i += 1
    return None


def _find_brace_end(s: str, start: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``start`` (nesting-aware), or -1."""
    depth = 0
    i = start
    n = len(s)
    while (i := skip_to(s, i, "{}")) < n:
        if s[i] == "{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


# --------------------------------------------------------------------------------------------
# Statement scanner
# --------------------------------------------------------------------------------------------


@dataclass
class _Heredoc:
    delimiter: str
    strip_tabs: bool
    statement: int


class _Scanner:
    def __init__(self, src: str) -> None:
        self.s = src
        self.n = len(src)
        self.buffers: list[list[str]] = [[]]
        self.findings: list[str] = []
        self.paren = 0
        self.brace = 0
        self.pending: list[_Heredoc] = []

    # -- helpers ---------------------------------------------------------------------------

    def find(self, reason: str) -> None:
        if reason not in self.findings:
            self.findings.append(reason)

    def emit(self, text: str) -> None:
        self.buffers[-1].append(text)

    def last_unescaped_char(self) -> str:
        """Last character emitted in this statement; ``"\\"`` stands for an escaped one."""
        for chunk in reversed(self.buffers[-1]):
            if chunk:
                if len(chunk) == 2 and chunk[0] == "\\":
                    return "\\"
                return chunk[-1]
        return ""

    def tail(self, size: int) -> str:
        """The last ``size`` or more characters emitted in this statement (cheap)."""
        parts: list[str] = []
        total = 0
        for chunk in reversed(self.buffers[-1]):
            parts.append(chunk)
            total += len(chunk)
            if total >= size:
                break
        return "".join(reversed(parts))

    def at_word_start(self) -> bool:
        last = self.last_unescaped_char()
        return last == "" or last in _METACHARS

    def end_statement(self, separator: str = "\n") -> None:
        # bash refuses ";" or "&" with no command before it (";ls", "ls; ;"); splitting it away
        # silently would make the classifier read a command bash rejects (found by
        # scripts/fuzz_shell.py's bash -n differential).
        if separator != "\n" and not "".join(self.buffers[-1]).strip():
            raise ScanError(f"{separator!r} with no command before it")
        self.buffers.append([])

    def peek(self, i: int) -> str:
        return self.s[i] if i < self.n else ""

    # -- quoted and expanded pieces ----------------------------------------------------------

    def single_quoted(self, i: int) -> int:
        end = single_quote_end(self.s, i)
        self.emit(self.s[i:end])
        return end

    def double_quoted(self, i: int) -> int:
        """``"..."`` starting at ``i``; line continuations inside are removed."""
        self.emit('"')
        j = i + 1
        while j < self.n:
            run = skip_to(self.s, j, '\\"`$')
            if run > j:
                self.emit(self.s[j:run])
                j = run
                continue
            c = self.s[j]
            if c == "\\":
                if self.peek(j + 1) == "\n":
                    j += 2
                    continue
                self.emit(self.s[j : j + 2])
                j += 2
                continue
            if c == '"':
                self.emit('"')
                return j + 1
            if c == "`":
                j = self.backtick(j)
                continue
            j = self.dollar(j, in_double_quotes=True)  # "$"
        raise ScanError("unterminated double quote")

    def backtick(self, i: int) -> int:
        self.find("substitution:`...`")
        j = skip_to(self.s, i + 1, "`")
        if j >= self.n:
            raise ScanError("unterminated backtick")
        self.emit(self.s[i : j + 1])
        return j + 1

    def balanced_parens(self, i: int) -> int:
        """Skip the group opened by ``(`` at ``i``; returns the index after its ``)``.

        Only used for constructs that are refused anyway ($(...), <(...), $((...))), so it only
        needs to be good enough to resynchronise the scan.
        """
        depth = 0
        j = i
        while (j := skip_to(self.s, j, "'\"`()")) < self.n:
            c = self.s[j]
            if c == "'":
                j = single_quote_end(self.s, j)
                continue
            if c == '"':
                j = double_quote_end(self.s, j)
                continue
            if c == "`":
                end = self.s.find("`", j + 1)
                if end < 0:
                    raise ScanError("unterminated backtick")
                j = end + 1
                continue
            if c == "(":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    self.emit(self.s[i : j + 1])
                    return j + 1
            j += 1
        raise ScanError("unterminated parenthesis")

    def braced_parameter(self, i: int) -> int:
        """``${...}`` with ``$`` at ``i``."""
        j = i + 2
        depth = 1
        while (j := skip_to(self.s, j, "'\"`$}")) < self.n:
            c = self.s[j]
            if c in "'\"":
                self.find("parameter:quoted operand")
            elif c == "`":
                self.find("substitution:`...`")
            elif c == "$" and self.peek(j + 1) == "(":
                self.find("substitution:$(...)")
            elif c == "$" and self.peek(j + 1) == "{":
                depth += 1
                j += 2
                continue
            elif c == "}":
                depth -= 1
                if depth == 0:
                    inner = self.s[i + 2 : j]
                    problem = parameter_problem(inner)
                    if problem:
                        self.find(problem)
                    self.emit(self.s[i : j + 1])
                    return j + 1
            j += 1
        raise ScanError("unterminated ${")

    def dollar(self, i: int, *, in_double_quotes: bool) -> int:
        nxt = self.peek(i + 1)
        if nxt == "(":
            if self.peek(i + 2) == "(":
                self.find("arithmetic:$((...))")
            else:
                self.find("substitution:$(...)")
            self.emit("$")
            return self.balanced_parens(i + 1)
        if nxt == "[":
            self.find("arithmetic:$[...]")
            end = self.s.find("]", i)
            if end < 0:
                raise ScanError("unterminated $[")
            self.emit(self.s[i : end + 1])
            return end + 1
        if nxt == "{":
            return self.braced_parameter(i)
        if nxt == "'" and not in_double_quotes:
            end = ansi_c_quote_end(self.s, i)
            self.emit(self.s[i:end])
            return end
        if nxt == '"' and not in_double_quotes:
            self.emit("$")
            return self.double_quoted(i + 1)
        self.emit("$")
        return i + 1

    # -- redirections --------------------------------------------------------------------------

    def output_redirect(self, i: int) -> int:
        """Unquoted ``>`` at ``i``; an ``&`` just before it makes it ``&>``."""
        op = ">"
        j = i + 1
        if self.peek(j) in (">", "|", "&"):
            op += self.s[j]
            j += 1
        if self.last_unescaped_char() == "&":
            op = "&" + op
        self.emit(self.s[i:j])
        word, _end = _word_at(self.s, _skip_blanks(self.s, j))
        if op == ">&" and re.fullmatch(r"[0-9]+-?|-", word):
            return j  # descriptor duplication or close
        if analyze_word(word).literal_value() not in SAFE_SINKS:
            self.find(f"redirect:{op}")
        return j

    def input_redirect(self, i: int) -> int:
        """Unquoted ``<`` at ``i`` that is not ``<(`` (handled by the caller)."""
        if self.s.startswith("<<<", i):
            self.emit("<<<")
            return i + 3
        if self.s.startswith("<<", i):
            return self.heredoc_operator(i)
        if self.s.startswith("<>", i):
            self.find("redirect:<>")
            self.emit("<>")
            return i + 2
        j = i + 1
        if self.peek(j) == "&":
            self.emit("<&")
            return j + 1
        self.emit("<")
        word, _end = _word_at(self.s, _skip_blanks(self.s, j))
        if "/dev/tcp/" in word or "/dev/udp/" in word:
            self.find("redirect:/dev/tcp")
        return j

    def heredoc_operator(self, i: int) -> int:
        strip = self.s.startswith("<<-", i)
        op_len = 3 if strip else 2
        self.emit(self.s[i : i + op_len])
        j = _skip_blanks(self.s, i + op_len)
        self.emit(self.s[i + op_len : j])
        word, end = _word_at(self.s, j)
        if not word:
            raise ScanError("missing here-document delimiter")
        if any(c in word for c in "'\"\\"):
            raise ScanError("quoted here-document delimiter (bashlex cannot parse it)")
        if "$" in word or "`" in word:
            raise ScanError("here-document delimiter with expansion characters")
        self.emit(word)
        self.pending.append(_Heredoc(word, strip, len(self.buffers) - 1))
        return end

    def heredoc_bodies(self, i: int) -> int:
        """Read the bodies of pending here-documents starting at ``i`` (after a newline)."""
        for doc in self.pending:
            lines: list[str] = []
            while True:
                if i >= self.n:
                    raise ScanError(f"here-document not terminated (wanted {doc.delimiter!r})")
                nl = self.s.find("\n", i)
                line = self.s[i:] if nl < 0 else self.s[i:nl]
                i = self.n if nl < 0 else nl + 1
                # An unquoted here-document joins "\<newline>" before comparing with the
                # delimiter; rather than emulate that, refuse it.
                trailing = len(line) - len(line.rstrip("\\"))
                if trailing % 2 == 1:
                    raise ScanError("line continuation inside a here-document")
                check = line.lstrip("\t") if doc.strip_tabs else line
                if check == doc.delimiter:
                    body = "".join(part + "\n" for part in lines)
                    problem = heredoc_body_problem(body)
                    if problem:
                        self.find(problem)
                    target = self.buffers[doc.statement]
                    if not target or not target[-1].endswith("\n"):
                        target.append("\n")
                    target.append(body + line + "\n")
                    break
                lines.append(line)
        self.pending = []
        return i

    # -- main loop -------------------------------------------------------------------------

    def run(self) -> None:
        i = 0
        while i < self.n:
            i = self.step(i)
        if self.pending:
            raise ScanError("here-document not terminated")
        if self.paren:
            raise ScanError("unbalanced '('")

    def step(self, i: int) -> int:
        """Read the piece of input starting at ``i``; returns the index after it."""
        plain = skip_to(self.s, i, _STEP_STOPS)
        if plain > i:
            self.emit(self.s[i:plain])
            return plain
        c = self.s[i]
        if c == "\\":
            if self.peek(i + 1) != "\n":  # a line continuation is dropped, as bash does
                self.emit(self.s[i : i + 2])
            return i + 2
        if c == "'":
            return self.single_quoted(i)
        if c == '"':
            return self.double_quoted(i)
        if c == "`":
            return self.backtick(i)
        if c == "$":
            return self.dollar(i, in_double_quotes=False)
        if c in "<>":
            return self.angle_bracket(i)
        if c == "#" and self.at_word_start():
            nl = self.s.find("\n", i)
            return self.n if nl < 0 else nl
        if c in "(){}":
            return self.grouping(i)
        if c == "\n":
            return self.newline(i)
        if c in ";&":
            return self.separator(i)
        self.emit(c)
        return i + 1

    def angle_bracket(self, i: int) -> int:
        c = self.s[i]
        if self.peek(i + 1) == "(":
            self.find(f"substitution:{c}(...)")
            self.emit(c)
            return self.balanced_parens(i + 1)
        if c == ">":
            return self.output_redirect(i)
        return self.input_redirect(i)

    def grouping(self, i: int) -> int:
        """A parenthesis or brace. Subshell and group depths are counted (a ``;`` inside
        does not end the statement) and ``{name}>`` is a redirection; any other brace is a
        plain character."""
        c = self.s[i]
        nxt = self.peek(i + 1)
        if c == "(":
            if nxt == "(" and self.at_word_start():
                # "((" opening a command is bash's arithmetic command.
                self.find("arithmetic:((...))")
            self.paren += 1
        elif c == ")":
            self.paren -= 1
            if self.paren < 0:
                raise ScanError("unbalanced ')'")
        elif c == "{":
            if self.at_word_start() and nxt in ("", " ", "\t", "\n"):
                self.brace += 1
        elif self.at_word_start() and nxt in _METACHARS | {""}:
            if self.brace > 0:
                self.brace -= 1
        elif (
            nxt in "<>"
            and nxt != ""
            and re.search(r"\{[A-Za-z_][A-Za-z0-9_]*\Z", self.tail(256))
        ):
            # "{name}>file" allocates a descriptor and assigns it to a variable.
            self.find("redirect:{var}")
        self.emit(c)
        return i + 1

    def separator(self, i: int) -> int:
        """``;`` or ``&``: the end of a statement, unless inside a group or part of an
        operator (``&&``, ``&>``, ``>&``, ``<&``, ``|&``)."""
        c = self.s[i]
        nxt = self.peek(i + 1)
        if c == ";" and nxt == ";":
            # ";;" only exists in case, which is refused anyway; bash rejects it anywhere
            # else, so it is a scan error (not a separator to drop).
            raise ScanError("';;' outside case")
        if c == "&" and nxt == "&":
            self.emit("&&")
            return i + 2
        redirection = c == "&" and (nxt == ">" or self.last_unescaped_char() in ("<", ">", "|"))
        if redirection or self.paren or self.brace:
            self.emit(c)
        else:
            self.end_statement(c)
        return i + 1

    def newline(self, i: int) -> int:
        tail = self.tail(64).rstrip(" \t")
        continues = tail.endswith("|") or tail.endswith("&&")
        if self.paren or self.brace or continues:
            self.emit("\n")
        else:
            self.end_statement()
        if self.pending:
            return self.heredoc_bodies(i + 1)
        return i + 1


def _word_at(s: str, i: int) -> tuple[str, int]:
    """Raw text of the unquoted-metachar-delimited word at ``i`` (quotes kept), and the
    index after it."""
    n = len(s)
    j = i
    while (j := skip_to(s, j, _METACHAR_TEXT + "'\"")) < n and s[j] not in _METACHARS:
        j = single_quote_end(s, j) if s[j] == "'" else double_quote_end(s, j)
    return s[i:j], j


def _skip_blanks(s: str, i: int) -> int:
    while i < len(s) and s[i] in _BLANKS:
        i += 1
    return i


def scan(command: str) -> Scan:
    """Split ``command`` into statements and collect lexical findings. Never raises."""
    scanner = _Scanner(command)
    error: str | None = None
    try:
        scanner.run()
    except ScanError as exc:
        error = str(exc)
    except (IndexError, ValueError, RecursionError) as exc:  # pragma: no cover - defensive
        error = f"scanner failure: {type(exc).__name__}"
    statements = ["".join(buf) for buf in scanner.buffers]
    return Scan(
        statements=[st for st in statements if st.strip()],
        findings=scanner.findings,
        error=error,
    )


# --------------------------------------------------------------------------------------------
# Word analysis
# --------------------------------------------------------------------------------------------

_ANSI_SIMPLE = {
    "n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
    "e": "\x1b", "E": "\x1b", "\\": "\\", "'": "'", '"': '"', "?": "?",
}


@dataclass(frozen=True)
class WordInfo:
    """What a word's source text means once bash has read it.

    ``value`` is the text after quote removal (expansions left as written);
    ``static`` is false when the word holds any expansion (parameter, command, arithmetic);
    ``glob`` is true when an unquoted ``*``, ``?`` or ``[`` appears;
    ``brace`` is true when an unquoted brace expansion (``{a,b}``, ``{1..3}``) may apply;
    ``quoted`` is true when any quoting or escaping was used.
    """

    raw: str
    value: str
    static: bool
    glob: bool
    brace: bool
    quoted: bool

    def literal_value(self) -> str | None:
        """The value when the word is a plain literal (static, no glob/brace), else None."""
        if self.static and not self.glob and not self.brace:
            return self.value
        return None


def analyze_word(raw: str) -> WordInfo:
    """Quote removal on ``raw`` (one shell word's source text), tracking expansions."""
    out: list[str] = []
    # Tilde expansion (~, ~/x, ~user, ~+, ~-): bash replaces it with a directory, so the
    # word's text is not what the command sees (found by scripts/fuzz_shell.py).
    static = not raw.startswith("~")
    glob = False
    quoted = False
    # Unquoted brace characters and separators, as (index in out, char).
    brace_marks: list[tuple[int, str]] = []
    i = 0
    n = len(raw)
    while i < n:
        plain = skip_to(raw, i, "\\'\"$`*?[{},.")
        if plain > i:
            out.append(raw[i:plain])
            i = plain
            continue
        c = raw[i]
        if c == "\\":
            quoted = True
            out.append(raw[i + 1 : i + 2])
            i += 2
        elif c in "'\"" or raw.startswith("$'", i):
            quoted = True
            text, i, understood = _quoted_part(raw, i)
            out.append(text)
            static = static and understood
        elif c == "$":
            if raw.startswith('$"', i):
                i += 1  # locale translation: the "..." that follows is read as such
                continue
            static = static and not _starts_expansion(raw, i)
            out.append("$")
            i += 1
        elif c == "`":
            static = False
            out.append(c)
            i += 1
        elif c in "*?[":
            glob = True
            out.append(c)
            i += 1
        elif c in "{}," or raw.startswith("..", i):
            mark = ".." if c == "." else c
            brace_marks.append((len("".join(out)), mark))
            out.append(mark)
            i += len(mark)
        else:
            out.append(c)
            i += 1
    return WordInfo(
        raw=raw,
        value="".join(out),
        static=static,
        glob=glob,
        brace=_has_brace_expansion(brace_marks),
        quoted=quoted,
    )


def _quoted_part(raw: str, i: int) -> tuple[str, int, bool]:
    """The text of the ``'...'``, ``"..."`` or ``$'...'`` at ``i`` after quote removal,
    the index after it, and whether it is static (no expansion, properly closed)."""
    if raw[i] == "$":
        return _ansi_c(raw, i + 2)
    if raw[i] == "'":
        try:
            end = single_quote_end(raw, i)
        except ScanError:
            # unterminated: not a word bash would read; never literal
            return raw[i + 1 :], len(raw) + 1, False
        return raw[i + 1 : end - 1], end, True
    return _double_quoted_part(raw, i)


def _double_quoted_part(raw: str, i: int) -> tuple[str, int, bool]:
    """``"..."`` at ``i``: only ``$``, backtick, ``"``, backslash and newline can be escaped
    in it, and ``$``/backtick still expand."""
    try:
        double_quote_end(raw, i)
        static = True
    except ScanError:
        static = False
    out: list[str] = []
    n = len(raw)
    j = i + 1
    while j < n and raw[j] != '"':
        plain = skip_to(raw, j, '"\\`$')
        if plain > j:
            out.append(raw[j:plain])
            j = plain
            continue
        ch = raw[j]
        if ch == "\\" and j + 1 < n and raw[j + 1] in '$`"\\\n':
            out.append(raw[j + 1])
            j += 2
            continue
        if ch == "`" or (ch == "$" and _starts_expansion(raw, j)):
            static = False
        out.append(ch)
        j += 1
    return "".join(out), j + 1, static


def _starts_expansion(s: str, i: int) -> bool:
    nxt = s[i + 1] if i + 1 < len(s) else ""
    return bool(nxt) and (nxt.isalnum() or nxt in "_{([@*#?$!-")


def _has_brace_expansion(marks: list[tuple[int, str]]) -> bool:
    opened = False
    separated = False
    for _pos, mark in marks:
        if mark == "{":
            opened = True
            separated = False
        elif mark in (",", "..") and opened:
            separated = True
        elif mark == "}" and opened and separated:
            return True
    return False


def _ansi_c(raw: str, i: int) -> tuple[str, int, bool]:
    """Decode ``$'...'`` content from ``i``; returns (text, index after quote, understood)."""
    out: list[str] = []
    n = len(raw)
    ok = True
    while i < n:
        plain = skip_to(raw, i, "'\\")
        if plain > i:
            out.append(raw[i:plain])
            i = plain
            continue
        c = raw[i]
        if c == "'":
            return "".join(out), i + 1, ok
        if c == "\\" and i + 1 < n:
            e = raw[i + 1]
            if e in _ANSI_SIMPLE:
                out.append(_ANSI_SIMPLE[e])
                i += 2
                continue
            m = re.match(r"x([0-9A-Fa-f]{1,2})|([0-7]{1,3})", raw[i + 1 :])
            if m:
                out.append(chr(int(m.group(1), 16) if m.group(1) else int(m.group(2), 8)))
                i += 1 + m.end()
                continue
            ok = False
            out.append(raw[i : i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out), n, False


def is_plain_name(raw: str) -> bool:
    """True for a command name written as plain characters (no quoting, no expansion)."""
    return raw == "[" or re.fullmatch(r"[A-Za-z0-9_.][A-Za-z0-9_.+-]*", raw) is not None


def assignment_name(raw: str) -> str | None:
    """Variable name of an assignment word ``NAME=value`` / ``NAME+=value``, else None."""
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\+?=", raw)
    return m.group(1) if m else None


__all__ = [
    "SAFE_SINKS",
    "Scan",
    "ScanError",
    "WordInfo",
    "analyze_word",
    "ansi_c_quote_end",
    "assignment_name",
    "double_quote_end",
    "heredoc_body_problem",
    "is_plain_name",
    "parameter_problem",
    "regex_literal_end",
    "scan",
    "single_quote_end",
]

