"""The embedded scripted model: an OpenAI-compatible HTTP server on loopback that
replays a scenario, so specrun runs end to end with no key and no network.

    with ScriptedModelServer("coordinator/scenarios/demo.yaml") as server:
        client = ModelClient(server.base_url)
        ...

``python -m coordinator.scripted_model --scenario FILE --port N`` serves a scenario
until interrupted (``specrun model serve`` calls :func:`serve_forever`).
"""

from coordinator.scripted_model.engine import NO_MATCH_TEXT
from coordinator.scripted_model.scenario import (
    DEMO_SCENARIO,
    Fail,
    Reply,
    Rule,
    Scenario,
    ScenarioError,
    ToolCallReply,
    UsageReply,
    When,
    load_scenario,
    parse_scenario,
    scenario_from_obj,
)
from coordinator.scripted_model.server import ScriptedModelServer, serve_forever

__all__ = [
    "DEMO_SCENARIO",
    "NO_MATCH_TEXT",
    "Fail",
    "Reply",
    "Rule",
    "Scenario",
    "ScenarioError",
    "ScriptedModelServer",
    "ToolCallReply",
    "UsageReply",
    "When",
    "load_scenario",
    "parse_scenario",
    "scenario_from_obj",
    "serve_forever",
]
