"""The one turn-streaming loop (``coordinator/cli/turns.py``) and the one approval question
(``approval.py``) that ``ask``, ``accept``, ``chat`` and the demo share.

The loop runs with the real client, socket and codec; the service's end is a ROUTER in
this process that holds the project's pidfile and answers as the service would, step by
step, so each test says exactly what the service sent and checks what came back."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import zmq
from click.testing import CliRunner
from rich.console import Console

from coordinator.cli import approval
from coordinator.cli.client import ServiceClient
from coordinator.cli.render import TurnPrinter
from coordinator.cli.turns import JsonLines, TurnOutcome, stream_turn
from coordinator.pidfile import PidFile
from protocol.wire import codec
from protocol.wire.chat import ToolCall
from protocol.wire.control import (
    ApprovalAnswer,
    ApprovalNeeded,
    AskRequest,
    CancelRequest,
    ControlReply,
    ControlRequest,
    ErrorReply,
    TextChunk,
    TurnEnded,
)
from protocol.wire.endpoints import Endpoints, make_router

T = TypeVar("T")
CALL = ToolCall(id="call-1", name="write_file",
                arguments='{"file_path": "notes.md", "content": "hi"}')


class ServiceEnd:
    """The service's side of the control socket, driven by a test's script."""

    def __init__(self, router: zmq.Socket[bytes]) -> None:
        self.router = router
        self.peer = b""
        self.requests = codec.client_to_coordinator()
        self.replies = codec.coordinator_to_client()

    def receive(self, kind: type[T]) -> T:
        assert self.router.poll(10_000), f"no {kind.__name__} came"
        self.peer, frame = self.router.recv_multipart()
        request: ControlRequest = self.requests.decode(frame)
        assert isinstance(request, kind), request
        return request

    def send(self, reply: ControlReply) -> None:
        self.router.send_multipart([self.peer, self.replies.encode(reply)])


@contextmanager
def scripted_service(
    monkeypatch: pytest.MonkeyPatch, script: Callable[[ServiceEnd], None]
) -> Iterator[ServiceClient]:
    """A client connected to ``script`` running as the service (in a thread); the
    script's own failures fail the test."""
    base = Path(tempfile.mkdtemp(prefix="sr-t-"))  # short: ipc:// paths are length-limited
    monkeypatch.setenv("SPECRUN_RUNTIME_DIR", str(base / "run"))
    project = base / "proj"
    project.mkdir()
    endpoints = Endpoints.for_project(project)
    pidfile = PidFile(endpoints.pidfile)
    pidfile.acquire()
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router = make_router(ctx, endpoints.control)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            script(ServiceEnd(router))
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        with ServiceClient(project, timeout_s=10) as client:
            yield client
        thread.join(timeout=10)
        assert not thread.is_alive(), "the script did not finish"
        if failures:
            raise failures[0]
    finally:
        router.close(linger=0)
        ctx.term()
        pidfile.release()
        shutil.rmtree(base, ignore_errors=True)


def _person_view() -> tuple[TurnPrinter, io.StringIO]:
    out = io.StringIO()
    return TurnPrinter(Console(file=out, width=100, highlight=False)), out


def _ask(client: ServiceClient) -> AskRequest:
    return AskRequest(req_id=client.next_id(), text="write the notes", can_confirm=True)


def test_an_approved_call_is_answered_yes_and_the_turn_completes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: list[ApprovalAnswer] = []

    def service(end: ServiceEnd) -> None:
        ask = end.receive(AskRequest)
        end.send(TextChunk(ask.req_id, "Writing the notes."))
        end.send(ApprovalNeeded(ask.req_id, CALL, "writes a file"))
        answers.append(end.receive(ApprovalAnswer))
        end.send(TurnEnded(ask.req_id, "completed", elapsed_s=0.5))

    asked: list[ApprovalNeeded] = []

    def person(reply: ApprovalNeeded) -> bool:
        asked.append(reply)
        return True

    view, out = _person_view()
    with scripted_service(monkeypatch, service) as client:
        request = _ask(client)
        outcome = stream_turn(client, request, view, person)
    assert [a.call.id for a in asked] == ["call-1"]
    assert [(a.ask_req_id, a.call_id, a.approved) for a in answers] == [
        (request.req_id, "call-1", True)]
    assert isinstance(outcome.ended, TurnEnded) and outcome.ended.reason == "completed"
    assert outcome.exit_code == 0 and not outcome.interrupted
    assert "Writing the notes." in out.getvalue() and "done in 0.50 s" in out.getvalue()


def test_without_a_person_every_call_is_refused_and_scripts_get_json_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers: list[ApprovalAnswer] = []

    def service(end: ServiceEnd) -> None:
        ask = end.receive(AskRequest)
        end.send(ApprovalNeeded(ask.req_id, CALL, "writes a file"))
        answers.append(end.receive(ApprovalAnswer))
        end.send(TurnEnded(ask.req_id, "completed"))

    with scripted_service(monkeypatch, service) as client:
        outcome = stream_turn(client, _ask(client), JsonLines(), None)
    assert [a.approved for a in answers] == [False]
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["type"] for line in lines] == ["approval_needed", "turn_ended"]
    assert lines[0]["call"]["name"] == "write_file"
    assert outcome.exit_code == 0


def test_ctrl_c_cancels_the_turn_and_still_shows_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C at the approval prompt (``ask_person`` raises KeyboardInterrupt for it):
    the service is told to cancel, and the aborted end is shown; no answer is sent."""
    cancels: list[CancelRequest] = []

    def service(end: ServiceEnd) -> None:
        ask = end.receive(AskRequest)
        end.send(ApprovalNeeded(ask.req_id, CALL, "writes a file"))
        cancels.append(end.receive(CancelRequest))
        end.send(TurnEnded(ask.req_id, "aborted"))

    def interrupted(reply: ApprovalNeeded) -> bool:
        raise KeyboardInterrupt

    view, out = _person_view()
    with scripted_service(monkeypatch, service) as client:
        request = _ask(client)
        outcome = stream_turn(client, request, view, interrupted)
    assert [c.ask_req_id for c in cancels] == [request.req_id]
    assert outcome.interrupted and outcome.exit_code == 1
    assert outcome.ended is not None and outcome.ended.reason == "aborted"
    assert "turn aborted" in out.getvalue()


def test_an_error_reply_ends_the_turn(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def service(end: ServiceEnd) -> None:
        ask = end.receive(AskRequest)
        end.send(ErrorReply(ask.req_id, "busy", "Another turn waits for an approval."))

    with scripted_service(monkeypatch, service) as client:
        outcome = stream_turn(client, _ask(client), JsonLines(), None)
    assert isinstance(outcome.end, ErrorReply) and outcome.ended is None
    assert outcome.exit_code == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["code"] == "busy"
    assert "Another turn waits for an approval." in captured.err


@pytest.mark.parametrize(("reason", "code"), [
    ("completed", 0), ("accepted", 0), ("debounced", 0), ("aborted", 1), ("error", 1),
    ("refused", 1),
])
def test_exit_codes_by_how_the_turn_ended(reason: Any, code: int) -> None:
    assert TurnOutcome(TurnEnded(1, reason), interrupted=False).exit_code == code
    assert TurnOutcome(None, interrupted=False).exit_code == 1


# -- the approval question -----------------------------------------------------------

NEEDED = ApprovalNeeded(7, CALL, "writes a file", rememberable=True)


def _prompt(typed: str) -> tuple[approval.Decision | BaseException, str]:
    """``ask_person`` at a terminal where the person types ``typed``: its answer (or what
    it raised) and the screen, the typed text echoed as a terminal would."""
    runner = CliRunner(echo_stdin=True)
    with runner.isolation(input=typed) as (out, _err, _both):
        try:
            answer: approval.Decision | BaseException = approval.ask_person(NEEDED)
        except KeyboardInterrupt as exc:
            answer = exc
        return answer, out.getvalue().decode()


def test_the_question_names_the_call_its_arguments_and_why() -> None:
    assert approval.question(NEEDED) == (
        "Allow write_file(file_path: notes.md, content: hi)? (writes a file)")


@pytest.mark.parametrize(("typed", "expected"), [("y\n", True), ("yes\n", True), ("n\n", False),
                                                  ("\n", False)])
def test_only_a_yes_allows(typed: str, expected: bool) -> None:
    assert _prompt(typed)[0] == approval.Decision(expected)


def test_a_yes_can_be_kept_for_the_session_and_a_no_can_say_why() -> None:
    assert _prompt("a\n")[0] == approval.Decision(True, remember=True)
    assert _prompt("r\nwe use tox here\n")[0] == approval.Decision(
        False, reason="we use tox here")
    answer, screen = _prompt("maybe\ny\n")  # anything else asks again
    assert answer == approval.Decision(True)
    assert "Type one of y/a/n/r" in screen


def test_the_reason_is_in_plain_words() -> None:
    from protocol.text.approval_words import shell_reason_in_words

    assert shell_reason_in_words("command:python") == (
        "python is not one of the commands specrun knows to be read-only")
    assert shell_reason_in_words("git:commit") == "git commit can change the repository"
    assert shell_reason_in_words("redirect:>") == (
        "specrun could not prove this command read-only (redirect:>)")


def test_end_of_input_at_the_prompt_cancels_like_ctrl_c() -> None:
    answer, _ = _prompt("")
    assert isinstance(answer, KeyboardInterrupt)


@pytest.mark.parametrize("yes", [True, False])
def test_the_demo_shows_the_prompt_exactly_as_a_person_sees_it(yes: bool) -> None:
    answer, screen = _prompt("y\n" if yes else "n\n")
    assert answer == approval.Decision(yes)
    assert screen.rstrip("\n") == approval.answered(NEEDED, yes)

