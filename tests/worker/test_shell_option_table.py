"""The option walker reads a command line the way the command's own parser does: short
clusters with values attached or in the next word, getopt_long's prefixes, ``--``, GNU
permutation or POSIX stop-at-operand, and the refusals each table declares."""

from __future__ import annotations

import pytest

from worker.shell.awk import AWK_OPTIONS
from worker.shell.commands import SORT_OPTIONS, command_problem
from worker.shell.lexer import WordInfo
from worker.shell.option_table import OptionTable, Refused, parse_options
from worker.shell.sed import SED_OPTIONS


def words(*values: str) -> list[WordInfo]:
    return [WordInfo(v, v, True, "*" in v, False, False) for v in values]


def refusal(table: OptionTable, *values: str) -> str | None:
    try:
        parse_options(table, words(*values))
    except Refused as refused:
        return refused.reason
    return None


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (("-n", "file", "-o", "out"), "sort:-o"),  # options after an operand still count
        (("-no", "out"), "sort:-o"),  # inside a cluster
        (("--out=x",), "sort:-o"),  # an abbreviation of --output
        (("--compress",), "sort:--compress-program"),
        (("-k", "-o"), None),  # -k's value, not an option
        (("-k-o",), None),  # attached value
        (("--key", "-o"), None),  # --key's value
        (("--", "-o"), None),  # an operand after --
        (("-x",), "sort:option:-x"),
        (("--no-such-option",), None),  # unknown long options are harmless for sort
    ],
)
def test_sort_reads_its_options_as_gnu_sort_does(argv: tuple[str, ...], reason: str | None) -> None:
    assert refusal(SORT_OPTIONS, *argv) == reason


def test_values_are_collected_in_order_under_one_key() -> None:
    parsed = parse_options(SED_OPTIONS, words("-n", "-e", "p", "--expression=s/a/b/", "-e=", "f"))
    assert parsed.values == {"script": ["p", "s/a/b/", "="]}
    assert [w.value for w in parsed.operands] == ["f"]


def test_a_missing_value_and_an_ambiguous_prefix_are_refused() -> None:
    assert refusal(SED_OPTIONS, "-e") == "sed:option:-e"
    assert refusal(SED_OPTIONS, "--expression") == "sed:option:--expression"
    assert refusal(SED_OPTIONS, "--s") == "sed:option:--s"  # silent, separate, sandbox
    assert refusal(SED_OPTIONS, "--in") == "sed:-i"  # could only be --in-place


def test_a_harmless_exact_name_beats_the_refused_one_it_prefixes() -> None:
    table = OptionTable(
        "t", long_refused={"textconv": "t:--textconv"}, long_harmless=frozenset({"text"}),
        unknown_long="allow",
    )
    assert refusal(table, "--text") is None
    assert refusal(table, "--tex") == "t:--textconv"


def test_posix_options_end_at_the_first_operand() -> None:
    parsed = parse_options(AWK_OPTIONS, words("-F", ":", "{print}", "-f", "x"))
    assert parsed.options_end == 2
    assert [w.value for w in parsed.operands] == ["{print}", "-f", "x"]
    parsed = parse_options(AWK_OPTIONS, words("-v", "a=1", "--", "-f"))
    assert parsed.options_end == 3 and [w.value for w in parsed.operands] == ["-f"]
    assert refusal(AWK_OPTIONS, "-f", "prog.awk") == "awk:-f"


@pytest.mark.parametrize(
    ("name", "argv", "reason"),
    [
        ("uniq", ("in",), None),
        ("uniq", ("-f", "1", "in", "out"), "uniq:output-file"),
        ("uniq", ("in*",), "uniq:output-file"),  # a glob may name two files
        ("uniq", ("--", "-in", "-out"), "uniq:output-file"),
        ("xxd", ("-c", "8", "in"), None),
        ("xxd", ("-r", "in", "out"), "xxd:output-file"),
        ("rg", ("-z", "x"), "rg:-z"),
        ("rg", ("--pre-g=x", "y"), "rg:--pre-glob"),
        ("tree", ("-aR",), "tree:-R"),
        ("git", ("log", "--out=x"), "git:log:--output"),
        ("git", ("diff", "--text"), None),
        ("git", ("grep", "-nO", "x"), "git:grep:-O"),
        ("git", ("log", "-O"), None),  # -O is grep's pager only
    ],
)
def test_each_ruled_command_refuses_through_its_table(
    name: str, argv: tuple[str, ...], reason: str | None
) -> None:
    assert command_problem(name, words(*argv)) == reason
