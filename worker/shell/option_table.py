"""Options as tables: each ruled command declares how its arguments parse and which options
it refuses, and one walker reads every such command the way its own option parser would.

A table says which short letters are plain flags and which take a value (the rest of the
word, else the next word), the long options with and without values, the refused ones with
the reason to give, whether unknown options are refused, and where options end: GNU tools
take options anywhere before ``--`` (argument permutation), POSIX ones stop at the first
operand. Long options match the way ``getopt_long`` matches them: the exact name, or a prefix
of exactly one known name; a prefix that could stand for a refused option is refused (``--in``
may be ``--in-place``) unless it is exactly a harmless one (``--text`` is not ``--textconv``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from worker.shell.lexer import WordInfo
from worker.shell.options import short_cluster

Unknown = Literal["refuse", "allow"]


@dataclass(frozen=True)
class OptionTable:
    command: str
    flags: str = ""  # short options without a value
    valued: str = ""  # short options with a value: the rest of the word, else the next word
    refused: Mapping[str, str] = field(default_factory=dict)  # short letter -> reason
    long_flags: tuple[str, ...] = ()
    long_valued: tuple[str, ...] = ()  # `--name=value` or `--name value`
    long_refused: Mapping[str, str] = field(default_factory=dict)  # long name -> reason
    long_harmless: frozenset[str] = frozenset()  # exact names that prefix a refused one
    word_valued: frozenset[str] = frozenset()  # whole words that take the next word (xxd -cols)
    unknown_short: Unknown = "refuse"
    unknown_long: Unknown = "refuse"
    clusters: bool = True  # `-abc` is three short options (False: a word is one option)
    stop_at_operand: bool = False  # POSIX: the first operand ends the options
    # Options (letter or long name) whose values are kept, and under which key: `sed -e S`
    # and `sed --expression=S` both give a script, in the order they come.
    collect: Mapping[str, str] = field(default_factory=dict)

    def unknown(self, option: str) -> str:
        return f"{self.command}:option:{option}"


@dataclass
class ParsedArgs:
    """What a command line means to its command: the operands in order, the values of the
    collected options in order by key (``sed -e S1 --expression=S2`` → ``{"script": [S1,
    S2]}``), and where the options ended (the index of the first operand in the words)."""

    operands: list[WordInfo] = field(default_factory=list)
    values: dict[str, list[str]] = field(default_factory=dict)
    options_end: int = 0

    def keep(self, table: OptionTable, option: str, value: str) -> None:
        key = table.collect.get(option)
        if key is not None:
            self.values.setdefault(key, []).append(value)


class Refused(Exception):
    """An argument the table refuses; ``reason`` is the classifier's reason text."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_options(table: OptionTable, args: Sequence[WordInfo]) -> ParsedArgs:
    """Walk ``args`` as the command would; raises ``Refused`` with the reason."""
    parsed = ParsedArgs()
    i = 0
    while i < len(args):
        word = args[i]
        value = word.value
        i += 1
        if value == "--":
            parsed.operands.extend(args[i:])
            parsed.options_end = i
            return parsed
        if value == "-" or not value.startswith("-"):
            if table.stop_at_operand:
                parsed.operands.extend(args[i - 1 :])
                parsed.options_end = i - 1
                return parsed
            parsed.operands.append(word)
            continue
        if value.startswith("--"):
            i = _long_option(table, args, i, value[2:], parsed)
        elif not table.clusters:
            if value in table.word_valued:
                i += 1
        else:
            i = _short_cluster(table, args, i, short_cluster(value) or "", parsed)
    parsed.options_end = len(args)
    return parsed


def _long_option(
    table: OptionTable, args: Sequence[WordInfo], i: int, text: str, parsed: ParsedArgs
) -> int:
    name, eq, attached = text.partition("=")
    if name in table.long_harmless:
        matches = [name]
    else:
        known = (*table.long_flags, *table.long_valued, *table.long_refused)
        matches = [name] if name in known else [opt for opt in known if opt.startswith(name)]
        for match in matches:
            if match in table.long_refused:
                raise Refused(table.long_refused[match])
    if not name or len(matches) != 1:
        if table.unknown_long == "allow" and not matches:
            return i
        raise Refused(table.unknown(f"--{name}"))
    option = matches[0]
    if option not in table.long_valued:
        return i
    if not eq:
        attached, i = _next_value(table, args, i, f"--{name}")
    parsed.keep(table, option, attached)
    return i


def _next_value(
    table: OptionTable, args: Sequence[WordInfo], i: int, option: str
) -> tuple[str, int]:
    """The value of ``option`` given as the next argument (at ``i``), and the index after
    it; an option missing its value is refused like an unknown one."""
    if i >= len(args):
        raise Refused(table.unknown(option))
    return args[i].value, i + 1


def _short_cluster(
    table: OptionTable, args: Sequence[WordInfo], i: int, cluster: str, parsed: ParsedArgs
) -> int:
    for pos, letter in enumerate(cluster):
        if letter in table.refused:
            raise Refused(table.refused[letter])
        if letter in table.valued:
            value = cluster[pos + 1 :]
            if not value:
                value, i = _next_value(table, args, i, f"-{letter}")
            parsed.keep(table, letter, value)
            return i
        if letter not in table.flags and table.unknown_short == "refuse":
            raise Refused(table.unknown(f"-{letter}"))
    return i
