"""No product module takes a test hook from the environment.

A test seam is an argument (``protocol.wire.seams``, ``overlay.apply``'s ``checkpoint``):
a variable would be one a user's shell, or a cloned repository's ``.envrc``, can set. Every
module of the four product packages is read as source: each environment variable it reads
by a name it spells out (``os.environ.get("X")``, ``os.environ["X"]``, ``os.getenv(X)``
with ``X`` a module constant, ``"X" in os.environ``) must not be a test or hook name, and
no string in it may name a ``SPECRUN_TEST...`` variable or a ``..._TEST_HOOK``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("coordinator", "worker", "overlay", "protocol")
HOOK_NAME = re.compile(r"TEST|HOOK")


def product_modules(root: Path = REPO) -> Iterator[Path]:
    for package in PRODUCT:
        yield from sorted((root / package).rglob("*.py"))


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments (annotated or not)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        constant = isinstance(value, ast.Constant) and isinstance(value.value, str)
        if isinstance(target, ast.Name) and constant:
            found[target.id] = str(value.value)  # type: ignore[attr-defined]
    return found


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` or a bare ``environ``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id == "environ"


def _reads_environment(func: ast.expr) -> bool:
    """``os.environ.get``/``pop``/``setdefault``, ``os.getenv`` or a bare ``getenv``."""
    if isinstance(func, ast.Attribute):
        if func.attr in ("get", "pop", "setdefault"):
            return _is_environ(func.value)
        return func.attr == "getenv"
    return isinstance(func, ast.Name) and func.id == "getenv"


def _name_of(node: ast.expr, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def environment_reads(source: str) -> list[str]:
    """The variable names a module's source reads from the environment by a spelled-out
    name (a literal or a module constant)."""
    tree = ast.parse(source)
    constants = _constants(tree)
    names: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and _reads_environment(node.func):
            names.append(node.args[0])
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            names.append(node.slice)
        elif (
            isinstance(node, ast.Compare)
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and _is_environ(node.comparators[0])
        ):
            names.append(node.left)
    return [name for expr in names if (name := _name_of(expr, constants)) is not None]


def hook_findings(path: Path, source: str) -> list[str]:
    """What in one module looks like a test hook: an environment read of a test or hook
    name, or any string naming one."""
    found = [
        f"{path}: reads ${name} from the environment"
        for name in environment_reads(source)
        if HOOK_NAME.search(name)
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = re.search(r"SPECRUN_\w*TEST\w*|\w*TEST_HOOK\w*", node.value)
            if match:
                found.append(f"{path}:{node.lineno}: names {match.group(0)}")
    return found


def findings(root: Path = REPO) -> list[str]:
    found: list[str] = []
    for path in product_modules(root):
        found += hook_findings(path.relative_to(root), path.read_text(encoding="utf-8"))
    return found


def test_no_product_module_reads_a_test_hook_from_the_environment() -> None:
    found = findings()
    assert not found, (
        "Product code takes a test hook from the environment, where a user's shell or a "
        "cloned repository's .envrc can set it; make it an argument (protocol.wire.seams):\n"
        + "\n".join(found)
    )


def test_the_scan_sees_every_way_of_reading_a_variable() -> None:
    source = (
        "import os\n"
        "from os import environ, getenv\n"
        'HOOK_ENV = "SPECRUN_OVERLAY_TEST_HOOK"\n'
        'a = os.environ.get("SPECRUN_TEST_A")\n'
        'b = os.environ["SPECRUN_TEST_B"]\n'
        "c = os.getenv(HOOK_ENV)\n"
        'd = "SPECRUN_TEST_D" in environ\n'
        'e = getenv("SPECRUN_TEST_E")\n'
        'f = environ.pop("SPECRUN_TEST_F", None)\n'
        'g = os.environ.get("SPECRUN_RUNTIME_DIR")\n'
    )
    assert sorted(environment_reads(source)) == [
        "SPECRUN_OVERLAY_TEST_HOOK",
        "SPECRUN_RUNTIME_DIR",
        "SPECRUN_TEST_A",
        "SPECRUN_TEST_B",
        "SPECRUN_TEST_D",
        "SPECRUN_TEST_E",
        "SPECRUN_TEST_F",
    ]
    found = hook_findings(Path("m.py"), source)
    assert sum("from the environment" in line for line in found) == 6
    assert not any("SPECRUN_RUNTIME_DIR" in line for line in found)
