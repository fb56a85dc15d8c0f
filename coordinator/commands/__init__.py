"""The control commands, each declared once in a module of its own (``declaration.py``
says what a declaration holds, ``seam.py`` what its halves are handed).

Both sides read them: the command line makes its commands from them
(``coordinator/cli``), the service its handler registry (``coordinator/service``); this
package imports neither. A command is found by its module's name (``kill-worker`` in
``kill_worker.py``), so running one imports that module only, and adding one is adding
its module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coordinator.commands.declaration import Command

NOT_COMMANDS = frozenset({"declaration", "seam"})


def module_names() -> list[str]:
    """Every command module's name, sorted (no module is imported)."""
    import pkgutil

    return sorted(info.name for info in pkgutil.iter_modules(__path__)
                  if info.name not in NOT_COMMANDS and not info.name.startswith("_"))


def find(name: str) -> Command[Any] | None:
    """The command declared as ``name`` (``kill-worker`` or ``kill_worker``), or None."""
    import importlib
    import importlib.util

    module_name = name.replace("-", "_")
    if (not module_name.isidentifier() or module_name.startswith("_")
            or module_name in NOT_COMMANDS
            or importlib.util.find_spec(f"{__name__}.{module_name}") is None):
        return None
    command: Command[Any] = importlib.import_module(f"{__name__}.{module_name}").COMMAND
    return command


def all_commands() -> list[Command[Any]]:
    """Every command, in name order."""
    found = [find(name) for name in module_names()]
    return [command for command in found if command is not None]
