"""The shape of product code: no function over 80 lines; a wide class is a smell.

A function that long does several things; it is split by what it does. One that truly
must stay long (a flat table, a single state machine) says why with a ``# long: <reason>``
comment right above its ``def`` (or its decorators) or between its first line and its
first statement.

A class with more than ``WIDE_CLASS_METHODS`` methods is a smell, not an error by count: it
may hold two concepts (then it is split where one concept ends, never where a count runs
out), or it may be one concept with many operations. The second kind is named in
``ONE_CONCEPT`` with why; a new wide class fails until it is split or named there, and a
named one that is no longer wide fails too, so the list says what the code is.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("coordinator", "worker", "overlay", "protocol")
SKIPPED = ("coordinator/cli/demo/sample_project",)  # the demo's sample project is data
MAX_FUNCTION_LINES = 80
WIDE_CLASS_METHODS = 20
_MARKER = re.compile(r"#\s*long:\s*\S")

# Wide classes that are one concept each, and why they stay one class.
ONE_CONCEPT: dict[str, str] = {
    "coordinator/service/chat/main_chat.py::MainChat": (
        "the one conversation and its turn loop; history, compaction, approvals and tool "
        "runs are parts of chat/ already, what is left is the turn itself"
    ),
    "coordinator/service/service.py::Service": (
        "the composition root: it makes every part, passes each its collaborators, "
        "routes the pool's events and the control socket's requests, and ends them all"
    ),
    "coordinator/service/speculation/manager.py::SpeculationManager": (
        "the speculation core's seam: each method is one command of the service or a "
        "client and hands over to one part (prediction, scheduler, runner, acceptor)"
    ),
    "coordinator/service/pool/workers.py::WorkerPool": (
        "the table of worker processes: start, hand out, route, kill and reap all read "
        "and write that one table and its socket"
    ),
    "overlay/cow.py::Overlay": (
        "one overlay directory: every operation (write, read through, list, apply, "
        "clean up) is on the same upper and lower tree"
    ),
    "protocol/model/client.py::ModelClient": (
        "one HTTP client for the model: request, stream, retry and usage over one "
        "connection pool and one endpoint's quirks"
    ),
    "coordinator/commands/seam.py::Service": (
        "the running service as the commands' server halves see it: one member per thing "
        "a command asks of it, so each command more (undo) is a member more"
    ),
    "coordinator/service/commands/port.py::CommandPort": (
        "the one implementation of commands.seam.Service: each member hands one command's "
        "question to the service part that answers it"
    ),
    "worker/shell/lexer.py::_Scanner": (
        "one cursor over a command line; each method scans one kind of word at that cursor"
    ),
}

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _marked(node: Definition, lines: list[str]) -> bool:
    """Whether a ``# long:`` comment with a reason stands in the comment block right above
    the definition (decorators included) or in its header before the first statement."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    above = first - 2  # index of the line above, 0-based
    while above >= 0 and lines[above].lstrip().startswith("#"):
        if _MARKER.search(lines[above]):
            return True
        above -= 1
    body = node.body
    # A docstring is not code: the marker may follow it.
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    header = lines[node.lineno - 1 : body[0].lineno - 1]
    return any(_MARKER.search(line) for line in header)


def over_the_bar(source: str, rel: str) -> list[str]:
    """``rel::qualified.name`` and what is wrong, for each definition in ``source`` over
    the bar without a ``# long:`` reason."""
    lines = source.splitlines()
    found: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, Definition):
                visit(child, prefix)
                continue
            name = f"{prefix}{child.name}"
            if isinstance(child, ast.ClassDef):
                methods = sum(
                    isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef) for b in child.body
                )
                if methods > WIDE_CLASS_METHODS:
                    found.append(f"{rel}::{name}: class with {methods} methods")
            else:
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > MAX_FUNCTION_LINES and not _marked(child, lines):
                    found.append(f"{rel}::{name}: function of {length} lines")
            visit(child, f"{name}.")

    visit(ast.parse(source), "")
    return found


def _product_sources() -> list[tuple[str, str]]:
    sources = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(SKIPPED):
                sources.append((rel, path.read_text()))
    return sources


def test_no_product_function_over_the_bar_nor_a_wide_class_of_two_concepts() -> None:
    found = [entry for rel, source in _product_sources() for entry in over_the_bar(source, rel)]
    names = {entry.split(": ", 1)[0] for entry in found}
    unexpected = [entry for entry in found if entry.split(": ", 1)[0] not in ONE_CONCEPT]
    assert not unexpected, (
        "split these by what they do (a class where one concept ends), say why a function "
        "must stay long with '# long: <reason>', or name a one-concept class in "
        "ONE_CONCEPT with why:\n" + "\n".join(unexpected)
    )
    stale = sorted(set(ONE_CONCEPT) - names)
    assert not stale, f"no longer wide, remove from ONE_CONCEPT: {stale}"
    assert all(reason.strip() for reason in ONE_CONCEPT.values())


def _function(lines: int, marker: str = "") -> str:
    body = "".join(f"    x{n} = {n}\n" for n in range(lines - 1))
    return f"{marker}def f():\n{body}"


def test_the_bar_counts_lines_and_methods() -> None:
    assert over_the_bar(_function(80), "m.py") == []
    assert over_the_bar(_function(81), "m.py") == ["m.py::f: function of 81 lines"]
    methods = "".join(f"    def m{n}(self):\n        pass\n" for n in range(21))
    assert over_the_bar(f"class C:\n{methods}", "m.py") == ["m.py::C: class with 21 methods"]
    assert over_the_bar(f"class C:\n{methods.split('    def m20')[0]}", "m.py") == []
    # A comment does not make a wide class narrow: only ONE_CONCEPT names one.
    assert over_the_bar(f"# long: many\nclass C:\n{methods}", "m.py") != []
    nested = "class C:\n" + textwrap.indent(_function(81), "    ")
    assert over_the_bar(nested, "m.py") == ["m.py::C.f: function of 81 lines"]


def test_a_long_reason_exempts_and_an_empty_one_does_not() -> None:
    assert over_the_bar(_function(90, "# long: one flat table\n"), "m.py") == []
    decorated = "# long: one flat table\n@decorator\n" + _function(90)
    assert over_the_bar(decorated, "m.py") == []
    inside = _function(90).replace("def f():\n", 'def f():\n    """Doc."""\n    # long: why\n')
    assert over_the_bar(inside, "m.py") == []
    assert over_the_bar(_function(90, "# long:\n"), "m.py") == ["m.py::f: function of 90 lines"]
    apart = "# long: about something else\n\n" + _function(90)
    assert over_the_bar(apart, "m.py") == ["m.py::f: function of 90 lines"]
