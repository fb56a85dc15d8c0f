"""The control commands translate; the session decides (docs/architecture.md).

A command's server half (``coordinator/commands/``) decodes its request, asks the
service's port for what it needs, and sends the reply. What a submitted
prompt comes to (accept, fall back, dismiss, debounce, cancel) is the session's
(``coordinator/service/session.py``): no command module may know the exceptions the
speculation manager says it with, and no function there grows past a translator's size.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ROOT / "coordinator" / "commands"
# How the speculation manager tells the session an accept did not apply.
POLICY_EXCEPTIONS = frozenset({"Debounced", "AcceptCancelled", "AcceptFallback"})
MAX_FUNCTION_LINES = 25


def _names(node: ast.expr | None) -> set[str]:
    """The names an ``except`` clause catches (``except (A, m.B)`` -> {A, B})."""
    if node is None:
        return set()
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts))
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return {node.id} if isinstance(node, ast.Name) else set()


def policy_in(source: str, filename: str = "<source>") -> list[str]:
    """Where ``source`` holds session policy: the speculation manager's accept
    exceptions imported, named or caught, or a function over ``MAX_FUNCTION_LINES``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom | ast.Import):
            known = {alias.name.rpartition(".")[2] for alias in node.names} & POLICY_EXCEPTIONS
            found += [f"{where} imports {name}" for name in sorted(known)]
        elif isinstance(node, ast.ExceptHandler):
            caught = _names(node.type) & POLICY_EXCEPTIONS
            found += [f"{where} catches {name}" for name in sorted(caught)]
        elif isinstance(node, ast.Attribute) and node.attr in POLICY_EXCEPTIONS:
            found.append(f"{where} names {node.attr}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{where} {node.name} is {length} lines")
    return found


def test_no_command_module_holds_session_policy() -> None:
    modules = sorted(COMMANDS.glob("*.py"))
    assert len(modules) >= 6
    found = [v for m in modules for v in policy_in(m.read_text(), str(m.relative_to(ROOT)))]
    assert found == []


def test_the_rule_sees_a_handler_that_steers_by_the_managers_exceptions() -> None:
    steering = '''
from coordinator.service import speculation
from coordinator.service.speculation import AcceptFallback

async def ask(svc, identity, req):
    try:
        await svc.speculation.accept("tab", None)
    except (speculation.Debounced, AcceptFallback):
        return
'''
    assert policy_in(steering) == [
        "<source>:3 imports AcceptFallback",
        "<source>:8 catches AcceptFallback",
        "<source>:8 catches Debounced",
        "<source>:8 names Debounced",
    ]


def test_the_rule_sees_a_handler_grown_long() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    head = "async def ask(svc, identity, req):\n"
    assert policy_in(head + body) == ["<source>:1 ask is 26 lines"]
    assert policy_in(head + body[: body.rindex("    x")]) == []
