"""The allow list: command names that only read, and the argument rules of the risky ones.

Two kinds of entries:

* free readers: no option of theirs writes or runs anything, so any arguments are fine (also
  ones with ``$VAR`` or globs);
* ruled commands: some options write or execute, so the arguments are checked by a rule that
  returns the reason for refusing, or ``None``.

Not allowed, on purpose: ``env``, ``xargs``, ``command``, ``builtin``, ``exec``, ``eval``,
``source``/``.``, ``nohup``, ``timeout``, ``nice``, ``sudo``, pagers (``less``, ``more``,
``most``, ``man``), ``tee``, editors, interpreters (``python``, ``node``, ``bash``, ``sh``…),
package managers and anything else not listed here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from worker.shell.awk import awk_rule
from worker.shell.git import git_rule
from worker.shell.lexer import WordInfo
from worker.shell.option_table import OptionTable, Refused, parse_options
from worker.shell.options import static_args_problem
from worker.shell.sed import sed_rule

Rule = Callable[[Sequence[WordInfo]], "str | None"]

FREE_READERS = frozenset({
    "basename", "cat", "cd", "column", "cut", "df", "dirname", "du", "echo", "grep", "egrep",
    "fgrep", "head", "ls", "nl", "pwd", "stat", "tail", "wc", "which", "whoami", "tac",
    "true", "false", "diff", "cmp", "md5sum", "sha1sum", "sha224sum", "sha256sum",
    "sha384sum", "sha512sum", "b2sum", "cksum", "uname", "id", "realpath", "readlink", "jq",
    "od", "hexdump", "strings", "tr", "paste", "comm", "join", "rev", "seq", "expand",
    "unexpand", "fold", "printenv", "type", "nproc",
})


def _find_rule(args: Sequence[WordInfo]) -> str | None:
    problem = static_args_problem("find", args, honor_double_dash=False)
    if problem:
        return problem
    for arg in args:
        value = arg.value
        if value.startswith("-"):
            name = value.lstrip("-")
            for bad in ("exec", "ok", "delete", "fprint", "fls"):
                if name.startswith(bad):
                    return f"find:-{bad}"
    return None


SORT_OPTIONS = OptionTable(
    "sort",
    flags="bcCdfghiMmnRrsuVz",
    valued="ktST",
    refused={"o": "sort:-o"},
    long_flags=(
        "ignore-leading-blanks", "dictionary-order", "ignore-case", "general-numeric-sort",
        "ignore-nonprinting", "month-sort", "human-numeric-sort", "numeric-sort",
        "random-sort", "reverse", "version-sort", "check", "merge", "stable", "unique",
        "zero-terminated", "debug", "help", "version",
    ),
    long_valued=(
        "key", "field-separator", "buffer-size", "temporary-directory", "parallel",
        "batch-size", "files0-from", "random-source", "sort",
    ),
    long_refused={"output": "sort:-o", "compress-program": "sort:--compress-program"},
    unknown_long="allow",
)

UNIQ_OPTIONS = OptionTable(
    "uniq",
    flags="cdDiuz",
    valued="fsw",
    long_flags=(
        "count", "repeated", "all-repeated", "ignore-case", "unique", "zero-terminated",
        "group", "help", "version",
    ),
    long_valued=("skip-fields", "skip-chars", "check-chars"),
    unknown_long="allow",
)

# Whole-word options of xxd that take the next word as their value.
XXD_OPTIONS = OptionTable(
    "xxd",
    clusters=False,
    unknown_long="allow",
    word_valued=frozenset({
        "-c", "-cols", "-g", "-groupsize", "-l", "-len", "-o", "-offset", "-s", "-seek", "-n",
        "-name", "-R",
    }),
)


def _letters(command: str, refused: str, long_refused: tuple[str, ...]) -> OptionTable:
    """A command whose other options are harmless: only the refused ones are named."""
    return OptionTable(
        command,
        refused={letter: f"{command}:-{letter}" for letter in refused},
        long_refused={name: f"{command}:--{name}" for name in long_refused},
        unknown_short="allow",
        unknown_long="allow",
    )


def _table_rule(table: OptionTable, *, double_dash_ends_checks: bool, operands: int = -1) -> Rule:
    """The rule of a command described by ``table``: its arguments must be static, its
    options allowed, and (``operands`` ≥ 0) at most that many operands, a glob counting as
    two (it may name several files; ``uniq IN OUT`` and ``xxd IN OUT`` write OUT)."""

    def rule(args: Sequence[WordInfo]) -> str | None:
        problem = static_args_problem(
            table.command, args, honor_double_dash=double_dash_ends_checks
        )
        if problem:
            return problem
        try:
            parsed = parse_options(table, args)
        except Refused as refused:
            return refused.reason
        if operands >= 0:
            named = sum(2 if word.glob else 1 for word in parsed.operands)
            if named > operands:
                return f"{table.command}:output-file"
        return None

    return rule


_sort_rule = _table_rule(SORT_OPTIONS, double_dash_ends_checks=True)
# "--" does not end uniq's static check: a glob after it could still expand to two
# operands, and the second one is written.
_uniq_rule = _table_rule(UNIQ_OPTIONS, double_dash_ends_checks=False, operands=1)
_xxd_rule = _table_rule(XXD_OPTIONS, double_dash_ends_checks=False, operands=1)
_tree_rule = _table_rule(_letters("tree", "oR", ("output",)), double_dash_ends_checks=True)
_rg_rule = _table_rule(
    _letters("rg", "z", ("pre", "pre-glob", "search-zip", "hostname-bin")),
    double_dash_ends_checks=True,
)
_base64_rule = _table_rule(_letters("base64", "o", ("output",)), double_dash_ends_checks=True)
_file_rule = _table_rule(_letters("file", "C", ("compile",)), double_dash_ends_checks=True)


_DATE_OPTIONS = re.compile(
    r"-u|--utc|--universal|-R|--rfc-email|--rfc-2822|-I[a-z]*|--iso-8601(=[a-z]+)?"
    r"|--rfc-3339=[a-z]+|--date=.*|--reference=.*|--debug|--file=.*|--help|--version",
    re.DOTALL,
)


def _date_rule(args: Sequence[WordInfo]) -> str | None:
    """``date`` may print; ``date -s`` / ``date MMDDhhmm`` set the clock."""
    problem = static_args_problem("date", args, honor_double_dash=False)
    if problem:
        return problem
    i = 0
    while i < len(args):
        value = args[i].value
        i += 1
        if value.startswith("+") or _DATE_OPTIONS.fullmatch(value):
            continue
        if value in ("-d", "--date", "-r", "--reference", "-f", "--file"):
            i += 1
            continue
        return "date:set"
    return None


_HOSTNAME_FLAGS = frozenset({
    "-f", "-s", "-d", "-i", "-I", "-A", "-a", "-y", "--fqdn", "--long", "--short", "--domain",
    "--ip-address", "--all-ip-addresses", "--all-fqdns", "--alias", "--help", "--version",
})


def _hostname_rule(args: Sequence[WordInfo]) -> str | None:
    problem = static_args_problem("hostname", args, honor_double_dash=False)
    if problem:
        return problem
    for arg in args:
        if arg.value not in _HOSTNAME_FLAGS:
            return "hostname:set"
    return None


def _printf_rule(args: Sequence[WordInfo]) -> str | None:
    """``printf -v NAME`` assigns a shell variable (and evaluates array subscripts)."""
    if not args:
        return None
    first = args[0]
    if not first.static or first.brace or (first.glob and first.value[:1] in "-*?["):
        return "dynamic-arg:printf"
    if first.value.startswith("-v"):
        return "printf:-v"
    return None


def _test_rule(args: Sequence[WordInfo]) -> str | None:
    """``test``/``[``: ``-v 'a[$(cmd)]'`` evaluates an array subscript, which runs ``cmd``."""
    problem = static_args_problem("test", args, honor_double_dash=False)
    if problem:
        return problem
    for arg in args:
        if arg.value in ("-v", "-R"):
            return f"test:{arg.value}"
    return None


RULED: dict[str, Rule] = {
    "awk": awk_rule,
    "gawk": awk_rule,
    "mawk": awk_rule,
    "nawk": awk_rule,
    "sed": sed_rule,
    "find": _find_rule,
    "git": git_rule,
    "sort": _sort_rule,
    "uniq": _uniq_rule,
    "tree": _tree_rule,
    "rg": _rg_rule,
    "base64": _base64_rule,
    "file": _file_rule,
    "xxd": _xxd_rule,
    "date": _date_rule,
    "hostname": _hostname_rule,
    "printf": _printf_rule,
    "test": _test_rule,
    "[": _test_rule,
}

ALLOWED_COMMANDS = FREE_READERS | frozenset(RULED)


def command_problem(name: str, args: Sequence[WordInfo]) -> str | None:
    """Why ``name args...`` is not read-only, or None. ``name`` must be a plain word."""
    if name in FREE_READERS:
        return None
    rule = RULED.get(name)
    if rule is None:
        return f"command:{name}"
    return rule(args)
