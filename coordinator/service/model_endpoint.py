"""Which model the service talks to: a configured endpoint, or the embedded scripted one."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from coordinator.settings import Settings
from protocol.model import ModelClient
from protocol.model.client import UsageCallback

if TYPE_CHECKING:
    # Imported for real only when it is used: a configured endpoint never needs it.
    from coordinator.scripted_model import ScriptedModelServer

log = logging.getLogger("specrun.service")

SETUP_SCENARIO = Path(__file__).parent.parent / "scenarios" / "setup.yaml"
SAMPLE_PROJECT = Path(__file__).parent.parent / "cli" / "demo" / "sample_project"


def is_demo_project(project_root: Path) -> bool:
    """A copy of the demo's sample project (its README and its calculator are there)."""
    try:
        readme = (project_root / "README.md").read_bytes()
        return (
            readme == (SAMPLE_PROJECT / "README.md").read_bytes()
            and (project_root / "src" / "calc.py").is_file()
            and (project_root / "tests" / "test_calc.py").is_file()
        )
    except OSError:
        return False


def request_log(project_root: Path) -> str | None:
    """Where the scripted model appends each request it receives: ``SPECRUN_MODEL_LOG``
    (the end-to-end tests and ``scripts/chaos.py`` read it), or None.

    A cloned repository's ``.envrc`` can set the variable, so a file inside the project, or
    one that is not such a log already (a regular file of the person's, empty or starting
    with ``{``), is refused: the service says why in its log and writes no requests."""
    named = os.environ.get("SPECRUN_MODEL_LOG")
    if not named:
        return None
    why = log_refusal(named, project_root)
    if why is not None:
        log.warning("SPECRUN_MODEL_LOG is not used: %s", why)
        return None
    return named


def log_refusal(named: str, project_root: Path) -> str | None:
    """Why the request log ``named`` may not be written for ``project_root``; None if it may."""
    if not os.path.isabs(named):
        return f"{named} is not an absolute path."
    if Path(os.path.realpath(named)).is_relative_to(os.path.realpath(project_root)):
        return f"{named} is inside the project {project_root}, whose files are not specrun's."
    try:
        info = os.lstat(named)
    except FileNotFoundError:
        return None  # a new log
    except OSError as exc:
        return f"{named} cannot be read ({exc.strerror})."
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        return f"{named} is not a regular file of yours."
    try:
        with open(named, "rb") as existing:
            first = existing.read(1)
    except OSError as exc:
        return f"{named} cannot be read ({exc.strerror})."
    if first not in (b"", b"{"):
        return f"{named} holds something other than a request log."
    return None


def prepare_model_endpoint(
    settings: Settings,
    project_root: Path,
    default_scenario: Path,
    *,
    on_usage: UsageCallback | None = None,
) -> tuple[ScriptedModelServer | None, str, ModelClient]:
    """(scripted server or None, base URL, client; ``on_usage`` hears of every request's
    tokens). The scripted model runs in this process on loopback when no endpoint is
    configured; ``SPECRUN_MODEL_LOG`` makes it log every request it receives
    (``request_log``). The scripted server is bound but not serving yet (its ``start``
    does that, in a thread): this starts no thread, so the service does it before it forks
    its fork server, and the pages it writes (the scenario's parse, the first HTTP client's
    set-up, its TLS context) are written once and shared instead of copied in the service
    after that fork (``scripts/bench.py --only idle``)."""
    server: ScriptedModelServer | None = None
    if settings.uses_scripted_model:
        from coordinator.scripted_model import ScriptedModelServer, load_scenario

        if settings.scenario:
            scenario_file = Path(settings.scenario)
        elif is_demo_project(project_root):
            scenario_file = default_scenario
        else:
            # The demo's content (edits to src/calc.py, new tests) must never land in a
            # person's own project: there the scripted model says how to configure one.
            scenario_file = SETUP_SCENARIO
        if not scenario_file.is_absolute():
            scenario_file = project_root / scenario_file
        server = ScriptedModelServer(
            load_scenario(scenario_file),
            port=0,
            request_log=request_log(project_root),
            keep_requests=0,  # nothing in the service reads them: a long session keeps none
        ).bind()
        base_url = server.base_url
        api_key = None
    else:
        base_url = settings.base_url
        api_key = settings.api_key or None
    client = ModelClient(
        base_url,
        api_key,
        cache_sharing=settings.enable_cache_sharing,
        on_usage=on_usage,
        timeout_s=float(settings.model_timeout_s),
        options=settings.model_options(),
    )
    return server, base_url, client
