"""A worker handle's ``state`` has one writer: the pool (``coordinator/service/pool/workers.py``).
Any other part that needs a worker's state to change asks the pool (``release``,
``mark_stopping``, ``kill``), so the pool's state machine is read in one file.

The check is syntactic: an assignment to an attribute named ``state`` counts as a worker
state write when the value names ``WorkerState`` or the object is spelled as a handle or
a worker (``handle.state``, ``spec.worker.state``, ``idle.state`` ...); ``setattr`` with
the name ``"state"`` too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("protocol", "overlay", "worker", "coordinator", "scripts")
OWNER = Path("coordinator/service/pool/workers.py")
HANDLE_WORDS = ("handle", "worker", "idle")


def _is_worker_state(target: ast.expr, value: ast.expr | None) -> bool:
    if not (isinstance(target, ast.Attribute) and target.attr == "state"):
        return False
    names_state = value is not None and "WorkerState" in ast.unparse(value)
    spelled_as_handle = any(word in ast.unparse(target.value).lower() for word in HANDLE_WORDS)
    return names_state or spelled_as_handle


def state_writes(source: str, filename: str = "<source>") -> Iterator[int]:
    """The lines of ``source`` that write a worker handle's state."""
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            pairs = [(node.target, node.value)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) == 3
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "state"
        ):
            pairs = [(ast.Attribute(node.args[0], "state", ast.Store()), node.args[2])]
        else:
            continue
        for target, value in pairs:
            for one in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
                if _is_worker_state(one, value):
                    yield node.lineno


def test_the_check_finds_a_state_write() -> None:
    # A check that never fires would pass below whatever the code does.
    assert list(state_writes("handle.state = WorkerState.STOPPING\n")) == [1]
    assert list(state_writes("x = 1\nspec.worker.state = gone\n")) == [2]
    assert list(state_writes("a.state, b = WorkerState.DEAD, 1\n")) == [1]
    assert list(state_writes("setattr(idle, 'state', WorkerState.BUSY)\n")) == [1]
    assert list(state_writes("journal.state = 'commit'\nself.state = state\n")) == []
    assert list(state_writes("if handle.state is WorkerState.DEAD:\n    pass\n")) == []


def test_only_the_pool_writes_a_worker_state() -> None:
    found: list[str] = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel == OWNER:
                continue
            found += [f"{rel}:{line}" for line in state_writes(path.read_text(), str(rel))]
    assert found == [], "only coordinator/service/pool/workers.py may change a worker's state"


def test_the_pool_is_where_the_states_are_written() -> None:
    assert len(list(state_writes((ROOT / OWNER).read_text()))) >= 5
