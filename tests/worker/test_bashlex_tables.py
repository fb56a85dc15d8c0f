"""bashlex's parser tables read from worker/shell/bashlex_tables.json: the same parser as
the one bashlex builds, and a build whenever the file does not match the grammar."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.shell import bashlex_tables

# Each grammar rule family: pipelines, lists, compound commands, functions, redirections,
# substitutions, heredocs, and the command substitution bashlex corrects its tables for.
COMMANDS = [
    "echo hi | grep x && ls $(pwd) > f",
    "a; b & c || d && e",
    "for i in 1 2 3; do echo $i; done",
    "for ((i=0; i<3; i++)); do :; done",
    "while true; do break; done; until false; do :; done",
    "if a; then b; elif c; then d; else e; fi",
    "case $x in a|b) echo 1;; *) echo 2;; esac",
    "f() { echo $(( 1 + 2 )); }; f",
    "function g { (cd /tmp && ls) ; }",
    "cat <<EOF\nhello $USER\nEOF\n",
    "x=$(echo $(echo `date`)) y=${z:-w} cmd 2>&1 >/dev/null <in",
    "echo $(ls)\necho done",
    "time ls | wc -l",
    "! grep -q a b",
    "coproc cat",
    "[[ -f x ]] && echo y",
    "echo 'a' \"b $c\" d\\ e",
]


def dumps() -> str:
    """Each command's tree (or its parse error), as this process's bashlex gives them."""
    bashlex = bashlex_tables.bashlex
    out = []
    for command in COMMANDS:
        try:
            out.append("\n".join(tree.dump() for tree in bashlex.parse(command)))
        except Exception as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    return json.dumps(out)


def test_the_file_matches_the_installed_grammar() -> None:
    tables = bashlex_tables._read_tables()
    assert tables is not None, f"{bashlex_tables.TABLES_FILE} is missing or unreadable"
    assert tables.grammar_digest == bashlex_tables.installed_grammar_digest(), (
        "bashlex's grammar changed: run scripts/write_bashlex_tables.py"
    )


def test_the_parser_from_the_file_parses_as_bashlex_built_one() -> None:
    import bashlex.parser

    assert type(bashlex.parser.yaccparser.productions[1]).__name__ == "_BoundProduction", (
        "this process's bashlex did not take its tables from the file"
    )
    built = subprocess.run(
        [sys.executable, "-c", "import bashlex, tests.worker.test_bashlex_tables as t;"
         " print(t.dumps())"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2],
    )
    # The child imported bashlex itself before this module could: it built its tables.
    assert json.loads(built.stdout) == json.loads(dumps())


@pytest.fixture
def bashlex_unloaded() -> Iterator[None]:
    """bashlex's modules out of ``sys.modules`` for the test, the loaded ones back after."""
    saved = {n: m for n, m in sys.modules.items() if n == "bashlex" or n.startswith("bashlex.")}
    for name in saved:
        del sys.modules[name]
    try:
        yield
    finally:
        for name in [n for n in sys.modules if n == "bashlex" or n.startswith("bashlex.")]:
            del sys.modules[name]
        sys.modules.update(saved)


@pytest.mark.usefixtures("bashlex_unloaded")
def test_tables_of_another_grammar_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = bashlex_tables._read_tables()
    assert tables is not None
    tables.grammar_digest = "0" * 64
    monkeypatch.setattr(bashlex_tables, "_read_tables", lambda: tables)
    module = bashlex_tables._import_bashlex()
    assert type(module.parser.yaccparser.productions[1]).__name__ == "Production"
    assert module.parse("echo a | wc")[0].kind == "pipeline"


@pytest.mark.usefixtures("bashlex_unloaded")
def test_an_unreadable_file_builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    broken = tmp_path / "tables.json"
    broken.write_text("{not json")
    monkeypatch.setattr(bashlex_tables, "TABLES_FILE", broken)
    module = bashlex_tables._import_bashlex()
    assert type(module.parser.yaccparser.productions[1]).__name__ == "Production"
    assert module.parse("ls")[0].kind == "command"
