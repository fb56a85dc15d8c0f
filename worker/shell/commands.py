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
from worker.shell.options import long_option_hits, short_cluster, static_args_problem
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


def _sort_rule(args: Sequence[WordInfo]) -> str | None:
    problem = static_args_problem("sort", args, honor_double_dash=True)
    if problem:
        return problem
    skip_next = False
    for arg in args:
        value = arg.value
        if skip_next:
            skip_next = False
            continue
        if value == "--":
            break
        if value.startswith("--"):
            name, eq, _ = value[2:].partition("=")
            hit = long_option_hits(name, ("output", "compress-program"))
            if hit:
                return "sort:-o" if hit == "output" else f"sort:--{hit}"
            if not eq and name in ("key", "field-separator", "buffer-size",
                                   "temporary-directory", "parallel", "batch-size",
                                   "files0-from", "random-source", "sort"):
                skip_next = True
            continue
        cluster = short_cluster(value)
        if cluster is None:
            continue
        for pos, letter in enumerate(cluster):
            if letter == "o":
                return "sort:-o"
            if letter in "ktST":
                skip_next = pos == len(cluster) - 1
                break
            if letter not in "bcCdfghiMmnRrsuVz":
                return f"sort:option:-{letter}"
    return None


def _uniq_rule(args: Sequence[WordInfo]) -> str | None:
    # "--" is not honoured for the static check: a glob after it could still expand to two
    # operands, and the second one is written.
    problem = static_args_problem("uniq", args, honor_double_dash=False)
    if problem:
        return problem
    operands = 0
    i = 0
    after_dd = False
    while i < len(args):
        value = args[i].value
        i += 1
        if after_dd or value == "-" or not value.startswith("-"):
            operands += 2 if args[i - 1].glob else 1  # a glob may name several files
            continue
        if value == "--":
            after_dd = True
            continue
        if value.startswith("--"):
            name, eq, _ = value[2:].partition("=")
            if not eq and name in ("skip-fields", "skip-chars", "check-chars"):
                i += 1
            continue
        cluster = short_cluster(value) or ""
        for pos, letter in enumerate(cluster):
            if letter in "fsw":
                if pos == len(cluster) - 1:
                    i += 1
                break
            if letter not in "cdDiuz":
                return f"uniq:option:-{letter}"
    if operands > 1:
        return "uniq:output-file"
    return None


def _letters_rule(command: str, forbidden: str, long_forbidden: tuple[str, ...]) -> Rule:
    """Refuse any short cluster holding one of ``forbidden`` and the given long options."""

    def rule(args: Sequence[WordInfo]) -> str | None:
        problem = static_args_problem(command, args, honor_double_dash=True)
        if problem:
            return problem
        for arg in args:
            value = arg.value
            if value == "--":
                break
            if value.startswith("--"):
                hit = long_option_hits(value[2:].split("=", 1)[0], long_forbidden)
                if hit:
                    return f"{command}:--{hit}"
                continue
            cluster = short_cluster(value)
            if cluster:
                for letter in forbidden:
                    if letter in cluster:
                        return f"{command}:-{letter}"
        return None

    return rule


_tree_rule = _letters_rule("tree", "oR", ("output",))
_rg_rule = _letters_rule("rg", "z", ("pre", "pre-glob", "search-zip", "hostname-bin"))
_base64_rule = _letters_rule("base64", "o", ("output",))
_file_rule = _letters_rule("file", "C", ("compile",))

_XXD_WITH_VALUE = frozenset({
    "-c", "-cols", "-g", "-groupsize", "-l", "-len", "-o", "-offset", "-s", "-seek", "-n",
    "-name", "-R",
})


def _xxd_rule(args: Sequence[WordInfo]) -> str | None:
    """``xxd IN OUT`` (and ``xxd -r IN OUT``) writes OUT: at most one operand."""
    problem = static_args_problem("xxd", args, honor_double_dash=False)
    if problem:
        return problem
    operands = 0
    i = 0
    while i < len(args):
        value = args[i].value
        i += 1
        if value in _XXD_WITH_VALUE:
            i += 1
        elif value == "-" or not value.startswith("-"):
            operands += 2 if args[i - 1].glob else 1  # a glob may name several files
    return "xxd:output-file" if operands > 1 else None


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
