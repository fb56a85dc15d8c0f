"""The endpoint's context window is asked for when the service starts, so `specrun status`
shows it before the first turn (it showed the 32,768-token default, "the endpoint reports
none", against a llama.cpp slot of 8,192 until a turn had run)."""

from __future__ import annotations

import json
import time

from coordinator.scripted_model import ScriptedModelServer
from tests.support import Specrun


def test_status_shows_the_endpoints_window_before_any_turn(specrun: Specrun) -> None:
    scenario = {"name": "t", "context_window": 8192, "rules": [{"default": {"text": "hi"}}]}
    with ScriptedModelServer(scenario) as server:
        specrun.env.own_settings(specrun.project).write_text(
            json.dumps({"baseUrl": server.base_url, "enableMemory": False}))
        specrun.run("start", check=True)
        try:
            deadline = time.monotonic() + 10
            while True:
                context = specrun.json("status")["context"]
                if context["window_source"] != "default" or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert (context["window"], context["window_source"]) == (8192, "endpoint")
            assert not [r for r in server.requests if r["method"] == "POST"]  # no turn ran
        finally:
            specrun.run("stop")
