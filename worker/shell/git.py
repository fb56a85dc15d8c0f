"""Argument rule for ``git``: a small set of inspection subcommands in read-only forms."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from worker.shell.lexer import WordInfo
from worker.shell.option_table import OptionTable, Refused, parse_options
from worker.shell.options import short_cluster, static_args_problem

# Subcommands that only inspect the repository.
READ_SUBCOMMANDS = frozenset({
    "status", "diff", "log", "show", "blame", "branch", "cat-file", "ls-files", "remote",
    "rev-parse", "describe", "grep", "shortlog", "ls-tree", "rev-list", "merge-base",
    "show-ref", "for-each-ref", "name-rev", "count-objects", "version",
})

# Global options (before the subcommand) that change nothing but output.
_GLOBAL_FLAGS = frozenset({
    "--no-pager", "-P", "--no-optional-locks", "--no-replace-objects", "--literal-pathspecs",
    "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-lazy-fetch",
    "--exec-path", "--html-path", "--man-path", "--info-path",
})
_GLOBAL_INFO = frozenset({"--version", "-v", "--help", "-h"})

# Long options refused after any subcommand (also as abbreviations): they write a file, run a
# configured program, or start a pager.
_DANGEROUS_LONG = (
    "output", "ext-diff", "textconv", "filters", "open-files-in-pager", "paginate", "help",
    "exec", "upload-pack", "receive-pack", "show-signature",
)
# Harmless options that are prefixes of a dangerous one; an exact match is allowed.
_KNOWN_LONG = frozenset({"text", "filter"})

_BRANCH_FLAGS = frozenset({
    "--all", "--remotes", "--verbose", "--list", "--show-current", "--ignore-case",
    "--no-color", "--no-column", "--no-abbrev", "--quiet", "--omit-empty",
})
_BRANCH_PREFIXED = ("--sort=", "--format=", "--color=", "--column=", "--abbrev=")
_BRANCH_WITH_VALUE = frozenset({"--sort", "--format", "--points-at"})
_BRANCH_OPTIONAL_VALUE = frozenset({"--contains", "--no-contains", "--merged", "--no-merged"})
_BRANCH_SHORT = frozenset("arvliq")


def git_rule(args: Sequence[WordInfo]) -> str | None:
    problem = static_args_problem("git", args, honor_double_dash=True)
    if problem:
        return problem
    values = [a.value for a in args]
    i = 0
    while i < len(values) and values[i].startswith("-"):
        value = values[i]
        if value in _GLOBAL_INFO:
            return None if i == len(values) - 1 else f"git:option:{value}"
        if value in _GLOBAL_FLAGS:
            i += 1
            continue
        if value == "-C":
            if i + 1 >= len(values):
                return "git:option:-C"
            i += 2
            continue
        return f"git:option:{value.split('=', 1)[0]}"
    if i >= len(values):
        return None  # bare "git" prints its usage
    sub = values[i]
    rest = values[i + 1 :]
    if sub not in READ_SUBCOMMANDS:
        return f"git:{sub}"
    problem = _common_problem(sub, args[i + 1 :])
    if problem:
        return problem
    if sub == "branch":
        return _branch_problem(rest)
    if sub == "remote":
        return _remote_problem(rest)
    return None


@functools.cache
def _subcommand_options(sub: str) -> OptionTable:
    """What every read subcommand refuses: the dangerous long options (also abbreviated),
    and ``git grep -O`` (``--open-files-in-pager``); other options are its own business."""
    return OptionTable(
        f"git:{sub}",
        refused={"O": "git:grep:-O"} if sub == "grep" else {},
        long_refused={name: f"git:{sub}:--{name}" for name in _DANGEROUS_LONG},
        long_harmless=_KNOWN_LONG,
        unknown_short="allow",
        unknown_long="allow",
    )


def _common_problem(sub: str, rest: Sequence[WordInfo]) -> str | None:
    try:
        parse_options(_subcommand_options(sub), rest)
    except Refused as refused:
        return refused.reason
    return None


def _branch_problem(rest: Sequence[str]) -> str | None:
    """``git branch`` only in listing forms; any name without ``--list`` creates a branch."""
    listing = False
    names = 0
    i = 0
    while i < len(rest):
        value = rest[i]
        i += 1
        if value == "--":
            names += len(rest) - i
            break
        if value in ("-l", "--list"):
            listing = True
            continue
        if value in _BRANCH_FLAGS or value.startswith(_BRANCH_PREFIXED):
            continue
        if value in _BRANCH_WITH_VALUE:
            i += 1
            continue
        if value in _BRANCH_OPTIONAL_VALUE:
            listing = True  # filters put git branch in list mode
            if i < len(rest) and not rest[i].startswith("-"):
                i += 1
            continue
        if value.startswith(tuple(v + "=" for v in _BRANCH_OPTIONAL_VALUE | {"--points-at"})):
            listing = True
            continue
        cluster = short_cluster(value)
        if cluster is not None:
            if all(letter in _BRANCH_SHORT for letter in cluster):
                if "l" in cluster:
                    listing = True
                continue
            return f"git:branch:{value}"
        if value.startswith("-"):
            return f"git:branch:{value.split('=', 1)[0]}"
        names += 1
    if names and not listing:
        return "git:branch:create"
    return None


def _remote_problem(rest: Sequence[str]) -> str | None:
    """``git remote``, ``-v``, ``get-url`` and ``show -n`` (``show NAME`` contacts the remote)."""
    values = [v for v in rest if v not in ("-v", "--verbose")]
    if not values:
        return None
    action, args = values[0], values[1:]
    if action == "get-url":
        return None if all(a in ("--push", "--all") or not a.startswith("-") for a in args) else (
            "git:remote:get-url"
        )
    if action == "show":
        names = [a for a in args if not a.startswith("-")]
        if any(a not in ("-n",) for a in args if a.startswith("-")):
            return "git:remote:show"
        if names and "-n" not in args:
            return "git:remote:show-network"
        return None
    return f"git:remote:{action}"
