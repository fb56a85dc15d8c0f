"""Exit codes, and errors shown as one sentence plus what to do (never a traceback).

Exit codes: 0 ok; 1 an error (one sentence on stderr, and what to do); 2 no service
running for this project, or bad usage (click's own code for bad usage).

Nothing here imports click: the light commands run without it (``light.py``). A click
exception is recognised only when click is loaded, since only then can one be raised.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from coordinator.cli import render

if TYPE_CHECKING:
    from protocol.wire.control import ControlReply

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_NO_SERVICE = 2  # also click's exit code for bad usage


class CliError(Exception):
    """An error to show as one sentence plus what to do; never a traceback."""

    def __init__(self, message: str, hint: str = "", code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code


def _raised_by(module: str, name: str, exc: BaseException) -> bool:
    """Whether ``exc`` is ``module.name``. A module this run never imported cannot have
    raised it, and importing it only to ask would cost the light commands their saving."""
    found = sys.modules.get(module)
    return found is not None and isinstance(exc, getattr(found, name))


def _is_click_exit(exc: BaseException) -> bool:
    """click's own ways out (usage errors, ``Exit``, ``Abort``): click reports them."""
    return any(_raised_by("click.exceptions", name, exc)
               for name in ("Exit", "ClickException", "Abort"))


def call_friendly(debug: bool, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a command's body; an error becomes one clear sentence and an exit code
    (with ``debug``, an unexpected error is raised with its traceback instead)."""
    try:
        return fn(*args, **kwargs)
    except CliError as exc:
        render.error(exc.message, exc.hint)
        sys.exit(exc.code)
    except KeyboardInterrupt:
        render.err_console.print("[yellow]interrupted[/yellow]")
        sys.exit(EXIT_ERROR)
    except Exception as exc:
        if _is_click_exit(exc):
            raise
        if _raised_by("coordinator.cli.client", "ServiceNotRunning", exc):
            render.error(str(exc))
            sys.exit(EXIT_NO_SERVICE)
        if _raised_by("coordinator.settings", "SettingsError", exc):
            render.error(
                f"Bad settings: {exc}",
                "Fix the file (or the variable or flag) named above; "
                "`specrun config show` checks the settings.",
            )
            sys.exit(EXIT_ERROR)
        if _raised_by("coordinator.cli.client", "ServiceTimeout", exc):
            render.error(str(exc))
            sys.exit(EXIT_ERROR)
        if _raised_by("protocol.wire.endpoints", "RuntimeDirError", exc):
            render.error(str(exc))  # names the directory and what to do; no traceback to see
            sys.exit(EXIT_ERROR)
        if _raised_by("coordinator.state_dir", "StateDirError", exc) or _raised_by(
            "coordinator.user_state", "UserStateError", exc
        ):
            render.error(str(exc), str(getattr(exc, "hint", "")))
            sys.exit(EXIT_ERROR)
        if debug:
            raise
        render.error(_sentence(exc), "Run with `specrun --debug ...` to see the details.")
        sys.exit(EXIT_ERROR)


def _sentence(exc: Exception) -> str:
    """An unexpected error as one line: an OS error as its reason and the path it names
    ("No space left on device: /p/x"), not Python's ``[Errno 28] ...`` form."""
    if isinstance(exc, OSError) and exc.strerror:
        names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
        return exc.strerror + (f": {' -> '.join(names)}" if names else "")
    return str(exc) or type(exc).__name__


def friendly(fn: F) -> F:
    """A click command's body under ``call_friendly``, with ``--debug`` from the group."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import click  # loaded already: only click calls a decorated command

        obj = click.get_current_context().obj
        return call_friendly(bool(obj and obj.debug), fn, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def fail_on_error(reply: ControlReply, as_json: bool = False) -> None:
    """An error reply from the service: its sentence on stderr (and, for scripts, the
    reply itself on stdout), exit 1."""
    from protocol.wire.control import ErrorReply

    if isinstance(reply, ErrorReply):
        if as_json:
            render.print_json(reply)
        render.error(reply.message)
        sys.exit(EXIT_ERROR)
