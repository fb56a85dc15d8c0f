"""Which model the service talks to: a configured endpoint, or the embedded scripted one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from coordinator.settings import Settings
from protocol.model import ModelClient
from protocol.model.client import UsageCallback

if TYPE_CHECKING:
    # Imported for real only when it is used: a configured endpoint never needs it.
    from coordinator.scripted_model import ScriptedModelServer

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


def prepare_model_endpoint(
    settings: Settings,
    project_root: Path,
    default_scenario: Path,
    *,
    on_usage: UsageCallback | None = None,
) -> tuple[ScriptedModelServer | None, str, ModelClient]:
    """(scripted server or None, base URL, client; ``on_usage`` hears of every request's
    tokens). The scripted model runs in this
    process on loopback when no endpoint is configured; ``SPECRUN_MODEL_LOG`` makes it
    log every request it receives. The scripted server is bound but not serving yet
    (its ``start`` does that, in a thread): this starts no thread, so the service does
    it before it forks its fork server, and the pages it writes (the scenario's parse,
    the first HTTP client's set-up, its TLS context) are written once and shared instead
    of copied in the service after that fork (``scripts/bench.py --only idle``)."""
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
            request_log=os.environ.get("SPECRUN_MODEL_LOG"),
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
