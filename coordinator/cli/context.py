"""What every command gets: the project it acts on, ``--debug`` and ``--verbose``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coordinator.cli.client import ServiceClient
    from coordinator.settings import Settings


def find_project_root(start: Path | None = None, home: Path | None = None) -> Path:
    """The nearest directory upwards holding `.specrun/` or `.git`; else the start dir.

    The home directory's `.specrun/` holds the user's own settings (`config set --user`),
    so it marks no project: otherwise every directory below home without a repository
    of its own (a fresh copy of the sample project, say) would act on all of home."""
    here = (start or Path.cwd()).resolve()
    if home is None:
        try:
            home = Path.home().resolve()
        except (RuntimeError, KeyError, OSError):  # no home directory to be found
            home = None
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
        if candidate != home and (candidate / ".specrun").is_dir():
            return candidate
    return here


class CommandContext:
    """The project (``--project``, else found from the working directory), ``--debug``
    and ``--verbose`` (show the internals: process ids, overlay and sandbox paths, ids
    of sessions and speculations; left out of what a person reads by default); makes the
    socket client and loads the settings for the commands that need them."""

    def __init__(self, project: Path, debug: bool, verbose: bool = False) -> None:
        self.project = project
        self.debug = debug
        self.verbose = verbose

    @classmethod
    def from_options(cls, project: Path | None, debug: bool,
                     verbose: bool = False) -> CommandContext:
        return cls(project.resolve() if project else find_project_root(), debug, verbose)

    def require_directory(self) -> None:
        """Refuse, in one sentence, a project that is not a directory (a path below a
        file, a name that does not exist): nothing is started or recorded for it."""
        if not self.project.is_dir():
            from coordinator.cli.errors import CliError

            raise CliError(
                f"Cannot use {self.project} as the project: it is not a directory (or does "
                "not exist).",
                "Run specrun in a project directory you can write to.",
            )

    def client(self, timeout_s: float = 30.0) -> ServiceClient:
        from coordinator.cli.client import ServiceClient

        return ServiceClient(self.project, timeout_s=timeout_s)

    def settings(self, flags: dict[str, Any] | None = None) -> Settings:
        from coordinator.settings import load_settings

        return load_settings(self.project, flags=flags)
