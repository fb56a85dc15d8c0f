"""Plain ignore rules (worker/tools/plain_ignore.py): which ignore files count as plain, and
that a plain file ignores exactly what pathspec, the walk's matcher, ignores."""

from __future__ import annotations

import random

import pathspec
import pytest

from worker.tools.plain_ignore import PlainRules, RuleChain, plain_rules


@pytest.mark.parametrize(
    "lines",
    [
        [],
        ["# a comment", "", "__pycache__/", "*.py[cod]", ".venv", "/build", "/dist/"],
        ["*.egg-info/", "node_modules", "*.log", "x?.tmp", "caf\u00e9", "a-b_c.d~"],
    ],
)
def test_plain_files_are_taken(lines: list[str]) -> None:
    assert plain_rules(lines) is not None


@pytest.mark.parametrize(
    "line",
    [
        "!keep.log",  # a negation: order matters
        "docs/_build",  # a slash inside: a path, not a name
        "**/tmp",
        "a\\ b",  # an escape
        "trailing ",  # git strips unescaped trailing spaces; pathspec differs in places
        " leading",
        "[!a]*",  # a negated class
        "[a-z].md",  # a range
        "{a,b}",
        "/",
        ".",
        "..",
        "\ufffd.txt",  # a byte that was not UTF-8
    ],
)
def test_any_other_line_makes_the_file_not_plain(line: str) -> None:
    assert plain_rules(["*.pyc", line]) is None


def test_a_file_with_many_rules_is_not_plain() -> None:
    from worker.tools.plain_ignore import MAX_RULES

    names = [f"name{i}" for i in range(MAX_RULES)]
    assert plain_rules(["# many", *names]) is not None
    assert plain_rules([*names, "one_more"]) is None


def _pathspec_ignores(lines: list[str], rel: str) -> bool:
    verdict = pathspec.GitIgnoreSpec.from_lines(lines).check_file(rel).include
    return bool(verdict)


def _chain_ignores(lines: list[str], rel: str) -> bool:
    """What a walk using RuleChain decides for ``rel`` (a trailing / for a directory): each
    directory on the way is judged first (an ignored one is not entered)."""
    rules = plain_rules(lines)
    assert rules is not None
    chain = RuleChain((), rules)
    parts = rel.rstrip("/").split("/")
    for i, name in enumerate(parts):
        is_dir = i < len(parts) - 1 or rel.endswith("/")
        regex = chain.dirs if is_dir else chain.files
        if regex is not None and regex.fullmatch(name):
            return True
        chain = chain.below()
    return False


def test_plain_rules_ignore_what_pathspec_ignores() -> None:
    rng = random.Random(33)
    pool = [
        "*.tmp", "build", "build/", "/build", "/build/", "x?", "*.py[co]", ".*", "a*b",
        "*", "n\u00e9", "*.d", "/top.md", "deep", "*~",
    ]  # fmt: skip
    names = ["build", "x1", "x12", "a.tmp", "m.pyc", "m.py", ".hidden", "ab", "axxb", "n\u00e9",
             "q.d", "top.md", "deep", "f~", "plain"]  # fmt: skip
    # (no newline in a name: pathspec's regexes do not match across one, so the walk keeps
    # what is below such a directory; a listing meeting one leaves the fast path)
    for _ in range(300):
        lines = rng.sample(pool, rng.randint(1, 4))
        depth = rng.randint(0, 2)
        rel = "/".join([*(rng.choice(names) for _ in range(depth)), rng.choice(names)])
        if rng.random() < 0.4:
            rel += "/"
        assert _chain_ignores(lines, rel) == _pathspec_ignores(lines, rel), (lines, rel)


def test_anchored_rules_hold_only_in_their_own_directory() -> None:
    chain = RuleChain((), plain_rules(["/build", "cache/"]))
    assert chain.dirs is not None and chain.dirs.fullmatch("build")
    below = chain.below()
    assert below.dirs is not None and not below.dirs.fullmatch("build")
    assert below.dirs.fullmatch("cache") and below.files is None
    deeper = below.below(PlainRules(here=("out",)))
    assert deeper.files is not None and deeper.files.fullmatch("out")
    assert deeper.below().files is None
