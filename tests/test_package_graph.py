"""The import graph of the four packages (design §2): no cycles between modules, and
dependencies pointing one way — protocol and overlay import no project package, worker
never imports coordinator, coordinator's client side never imports
its service side except to run a service in the foreground (`specrun serve`), and the
control commands both sides are made from (``coordinator/commands``) import neither.

Every import counts: module level, inside functions and under ``TYPE_CHECKING``. An
import made only for a type still ties the two modules together for a reader.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "overlay", "worker", "coordinator")
SKIPPED = ("coordinator/cli/demo/sample_project",)  # the demo's sample project is data


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for source in sorted((ROOT / package).rglob("*.py")):
            rel = source.relative_to(ROOT)
            if str(rel).startswith(SKIPPED):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = source
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The project module an imported name lives in (``a.b.C`` -> ``a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, source: Path) -> Iterator[str]:
    package = module if source.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source.read_text(), filename=str(source))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            owner = _owner(target)
            if owner is not None and owner != module:
                yield owner


GRAPH: dict[str, set[str]] = {m: set(_imports(m, path)) for m, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _edges_between(source_prefix: str, target_prefix: str) -> list[str]:
    return sorted(
        f"{m} -> {t}"
        for m, targets in GRAPH.items()
        if m == source_prefix or m.startswith(source_prefix + ".")
        for t in targets
        if t == target_prefix or t.startswith(target_prefix + ".")
    )


def test_the_graph_sees_the_packages() -> None:
    # A parser that found nothing would pass every check below.
    assert len(MODULES) > 100
    assert "protocol.wire.codec" in GRAPH["coordinator.service.service"]


def test_no_import_cycles() -> None:
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_protocol_and_overlay_import_no_project_package() -> None:
    for low in ("protocol", "overlay"):
        for other in PACKAGES:
            if other != low:
                assert _edges_between(low, other) == []


def test_the_one_c_library_handle_is_overlays_and_used_from_every_layer_above() -> None:
    # overlay is the lowest package the worker and the coordinator both import, so the C
    # library handle lives there (overlay.kernel.libc), and nowhere else loads the library.
    assert "overlay.kernel.libc" in GRAPH["overlay.kernel.beneath"]
    for user in ("worker", "coordinator"):
        edges = _edges_between(user, "overlay")
        assert any(edge.endswith("-> overlay.kernel.libc") for edge in edges), user


def test_nothing_imports_coordinator() -> None:
    assert _edges_between("worker", "coordinator") == []


def test_coordinator_uses_the_worker_only_to_start_it() -> None:
    # and to judge a main-chat shell command's protected writes itself with the worker's
    # own function (one rule; a worker's reply is not trusted to have asked)
    assert _edges_between("coordinator", "worker") == [
        "coordinator.service.chat.protected_writes -> worker.shell.write_targets",
        "coordinator.service.pool.workers -> worker.process",
    ]


def test_the_service_side_never_imports_the_client_side() -> None:
    assert _edges_between("coordinator.service", "coordinator.cli") == []


def test_the_client_side_imports_the_service_only_to_serve() -> None:
    edges = _edges_between("coordinator.cli", "coordinator.service")
    assert edges == ["coordinator.cli.local.serve -> coordinator.service.service"]


def test_the_commands_import_neither_side() -> None:
    # Each side reads the declarations (coordinator/commands): the CLI makes its commands
    # of them, the service its registry. A declaration imported from the CLI must not pull
    # the service in, nor one imported by the service the CLI.
    for side in ("coordinator.cli", "coordinator.service", "coordinator.web"):
        assert _edges_between("coordinator.commands", side) == []
    assert any(e.endswith("-> coordinator.commands") for e in _edges_between(
        "coordinator.cli", "coordinator.commands"))
    assert any(e.endswith("-> coordinator.commands") for e in _edges_between(
        "coordinator.service", "coordinator.commands"))


def test_the_web_view_is_a_client_of_the_service_never_a_part_of_it() -> None:
    # Its own process (docs/web.md): it talks to the service over the control socket only.
    assert _edges_between("coordinator.web", "coordinator.service") == []
    assert _edges_between("coordinator.web", "coordinator.cli") == []
    assert _edges_between("coordinator.service", "coordinator.web") == []


# Inside a package, its sub-packages stand in layers: a module may import its own layer
# and the layers below it, never one above. Each table is bottom first.
LAYERS: dict[str, tuple[str, ...]] = {
    "protocol": ("text", "wire", "rules", "model", "prompts"),
    "overlay": ("kernel", "errors", "paths", "fingerprint", "changes", "sweep", "apply", "cow"),
}


def _layer_of(package: str, module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != package or len(parts) < 2:
        return None  # the package's own __init__ re-exports; it is above every layer
    return LAYERS[package].index(parts[1])


def test_every_module_of_a_layered_package_is_in_a_layer() -> None:
    for package, layers in LAYERS.items():
        for module in MODULES:
            parts = module.split(".")
            if parts[0] == package and len(parts) > 1:
                assert parts[1] in layers, f"{module} is in no layer of {package}"


def test_sub_packages_import_only_downwards() -> None:
    upward = []
    for package in LAYERS:
        for module, targets in GRAPH.items():
            here = _layer_of(package, module)
            if here is None:
                continue
            for target in targets:
                there = _layer_of(package, target)
                if there is not None and there > here:
                    upward.append(f"{module} -> {target}")
    assert upward == []


def test_the_layer_check_sees_an_upward_import() -> None:
    assert _layer_of("protocol", "protocol.text.inert_text") == 0
    assert _layer_of("protocol", "protocol.prompts.prediction") == 4


# coordinator.service's parts, bottom first: its sub-packages (``pool``, ``undo``,
# ``speculation``, ``chat``, ``live``, ``commands``) and its loose modules. The speculation
# core sees the main chat only as its own ``ForkSource`` protocol, undo sees both only as
# its own protocols, and the live view hears of a changed suggestion by waiting on it, so
# nothing below calls up.
SERVICE = "coordinator.service"
SERVICE_LAYERS: tuple[str, ...] = (
    "model_endpoint",
    "pool",
    "ports",
    "emitter",
    "undo",
    "speculation",
    "chat",
    "routing",
    "session",
    "live",
    "commands",
    "service",
)
SERVICE_PARTS = ("pool", "undo", "speculation", "chat", "live", "commands")

# Imports of a part's inner module from outside the part, each with why (none now).
THROUGH_A_SIDE_DOOR: dict[str, str] = {}


def _service_part(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != SERVICE.split(".") or len(parts) < 3:
        return None
    return parts[2]


def test_every_part_of_the_service_is_in_a_layer() -> None:
    for module in MODULES:
        part = _service_part(module)
        if part is not None:
            assert part in SERVICE_LAYERS, f"{module} is in no layer of {SERVICE}"
    loose = [m for m in MODULES if _service_part(m) is not None and m.count(".") == 2]
    loose = [m for m in loose if m.rpartition(".")[2] not in SERVICE_PARTS]
    assert len(loose) <= 12, f"more than 12 loose modules at {SERVICE}'s top: {loose}"


def test_the_service_parts_import_only_downwards() -> None:
    upward = []
    for module, targets in GRAPH.items():
        here = _service_part(module)
        if here is None:
            continue
        for target in targets:
            there = _service_part(target)
            if there is not None and SERVICE_LAYERS.index(there) > SERVICE_LAYERS.index(here):
                upward.append(f"{module} -> {target}")
    assert upward == []


def _side_doors(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a part's inner module (``coordinator.service.chat.history``) from
    outside that part: the rest of the service goes through the part's package."""
    found = []
    for module, targets in graph.items():
        if not module.startswith(SERVICE + "."):
            continue
        for target in targets:
            part = _service_part(target)
            inner = target.count(".") > 2
            if part in SERVICE_PARTS and inner and _service_part(module) != part:
                found.append(f"{module} -> {target}")
    return sorted(found)


def test_other_parts_import_a_part_only_through_its_package() -> None:
    assert _side_doors(GRAPH) == sorted(THROUGH_A_SIDE_DOOR)


def test_the_seam_check_sees_a_side_door() -> None:
    graph = {
        "coordinator.service.live.state": {"coordinator.service.speculation.preview"},
        "coordinator.service.chat.main_chat": {"coordinator.service.chat.history"},
        "coordinator.service.session": {"coordinator.service.chat"},
    }
    assert _side_doors(graph) == [
        "coordinator.service.live.state -> coordinator.service.speculation.preview"
    ]
