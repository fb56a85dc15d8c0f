"""Where the password of a model endpoint URL could show: the service's command line
and its log.

The init of a command's PID namespace is forked from the service without an exec, so its
``/proc/1/cmdline`` was the service's: ``serve --base-url http://user:password@host/v1``
for a service started with a password in the endpoint's URL. A hostile model ran
``cat /proc/1/cmdline`` in a speculation (a read-only command) and the password went to
the provider in the next request. And the HTTP client's log lines held the whole URL.
Here the service runs against a scripted model of the
test's own, reached through such a URL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from coordinator.scripted_model import ScriptedModelServer, load_scenario
from tests.coordinator.e2e import Driver, rules_scenario, shell_call, stepped_scenario
from tests.support import make_sample_project, needs_containment, running_service
from worker.contain.landlock import abi

pytestmark = needs_containment(
    "needs Landlock ABI >= 6 for the full profile" if abi() < 6 else None
)

PASSWORD = "URL-PASSWORD-3b9e51"
STEP = "show the init"
READ = "cat /proc/1/cmdline; echo; cat /proc/1/environ; echo end"


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Driver, ScriptedModelServer]]:
    tmp = tmp_path_factory.mktemp("cmdline")
    project = make_sample_project(tmp / "project")
    scenario = stepped_scenario("cmdline", {STEP: [shell_call(READ)]},
                                lambda _text: {"text": "Shown."})
    path = rules_scenario(tmp, scenario["rules"])
    with ScriptedModelServer(load_scenario(path), port=0) as server:
        url = server.base_url.replace("://", f"://user:{PASSWORD}@", 1)
        assert PASSWORD in url
        with running_service(project, "--approval-mode", "default", "--base-url", url,
                             "--model", "scripted", "--fast", "scripted", "--no-check"):
            driver = Driver(project)
            driver.ask("hello")
            try:
                yield driver, server
            finally:
                driver.close()


def test_a_speculation_cannot_read_the_service_command_line(
    served: tuple[Driver, ScriptedModelServer],
) -> None:
    driver, server = served
    driver.ask(f"go {STEP}")
    reply = driver.wait_for_speculation(STEP, ("completed",), timeout=60)
    assert reply.speculation is not None and reply.speculation.tool_uses == 1
    sent = json.dumps([request.get("body") for request in server.requests])
    assert "end" in sent and "/proc/1/environ" in sent  # the command ran and was answered
    assert PASSWORD not in sent
    assert "--base-url" not in sent and "serve" not in sent.replace("served", "")


def test_the_service_log_never_holds_the_password(
    served: tuple[Driver, ScriptedModelServer],
) -> None:
    """The HTTP client logs each request's URL, credentials included; the log shows
    ``user:***@`` (``specrun logs`` prints that file)."""
    driver, server = served
    assert server.requests  # requests were made and logged
    log = driver.log_path.read_text()
    assert "HTTP Request" in log and "user:***@127.0.0.1" in log
    assert PASSWORD not in log
