"""The shape of product code: no function over 80 lines, no class over 25 methods.

A function that long or a class that wide does several things; each is split by what it
does. One that truly must stay long (a flat table, a single state machine) says why with a
``# long: <reason>`` comment right above its ``def``/``class`` (or its decorators) or
between its first line and its first statement.
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
MAX_CLASS_METHODS = 25
_MARKER = re.compile(r"#\s*long:\s*\S")

# Over the bar in code being split on another branch while it lands (empty otherwise); an
# entry that is no longer over the bar fails the test so that it cannot linger.
BEING_SPLIT: set[str] = set()

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
                if methods > MAX_CLASS_METHODS and not _marked(child, lines):
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


def test_no_product_function_or_class_over_the_bar() -> None:
    found = [entry for rel, source in _product_sources() for entry in over_the_bar(source, rel)]
    names = {entry.split(": ", 1)[0] for entry in found}
    unexpected = [entry for entry in found if entry.split(": ", 1)[0] not in BEING_SPLIT]
    assert not unexpected, (
        "split these by what they do, or say why they must stay long with '# long: <reason>':\n"
        + "\n".join(unexpected)
    )
    stale = sorted(BEING_SPLIT - names)
    assert not stale, f"no longer over the bar, remove from BEING_SPLIT: {stale}"


def _function(lines: int, marker: str = "") -> str:
    body = "".join(f"    x{n} = {n}\n" for n in range(lines - 1))
    return f"{marker}def f():\n{body}"


def test_the_bar_counts_lines_and_methods() -> None:
    assert over_the_bar(_function(80), "m.py") == []
    assert over_the_bar(_function(81), "m.py") == ["m.py::f: function of 81 lines"]
    methods = "".join(f"    def m{n}(self):\n        pass\n" for n in range(26))
    assert over_the_bar(f"class C:\n{methods}", "m.py") == ["m.py::C: class with 26 methods"]
    assert over_the_bar(f"class C:\n{methods.split('    def m25')[0]}", "m.py") == []
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
