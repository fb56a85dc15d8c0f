"""Shared test helpers: an isolated environment, the CLI as a real subprocess, and
checks that a test left no process or overlay behind."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE_PROJECT = REPO / "coordinator" / "cli" / "demo" / "sample_project"
DEMO_SCENARIO = REPO / "coordinator" / "scenarios" / "demo.yaml"

DEMO_LATENCY_SCALE = 0.2
"""The demo scenario's model latencies are paced for a person watching `specrun demo`
(120 ms before each reply, 15 ms a chunk, 0.9 s for the first recall): a test of the
same session would spend seconds waiting on them, about 2.5 s per fix-and-Tab flow.
Tests play it five times faster; every latency keeps its order against the others."""


def demo_scenario_data() -> dict[str, Any]:
    """The demo scenario as a dict, its latencies scaled by ``DEMO_LATENCY_SCALE``."""
    import yaml

    data: dict[str, Any] = yaml.safe_load(DEMO_SCENARIO.read_text())

    def scale(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("latency_ms", "chunk_ms") and isinstance(value, int):
                    node[key] = round(value * DEMO_LATENCY_SCALE)
                else:
                    scale(value)
        elif isinstance(node, list):
            for item in node:
                scale(item)

    scale(data)
    return data


def write_demo_scenario(dest: Path) -> Path:
    """``demo_scenario_data()`` written to ``dest`` (a file the scripted model can load)."""
    import yaml

    dest.write_text(yaml.safe_dump(demo_scenario_data(), sort_keys=False))
    return dest


@contextmanager
def local_http_server(
    handler: type[BaseHTTPRequestHandler], **state: Any
) -> Iterator[ThreadingHTTPServer]:
    """``handler`` served from a thread on a free loopback port (``server_port``), with
    ``state`` set on the server for the handler to read; shut down and joined after."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    for name, value in state.items():
        setattr(server, name, value)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def make_sample_project(dest: Path, git: bool = True) -> Path:
    shutil.copytree(SAMPLE_PROJECT, dest, ignore=shutil.ignore_patterns("__pycache__"))
    if git:
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
        }
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
            subprocess.run(cmd, cwd=dest, check=True, env=env, capture_output=True)
    return dest


def snapshot_tree(root: Path) -> dict[str, bytes]:
    """Every file under root except .git and .specrun, as bytes."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in (".git", ".specrun") or "__pycache__" in rel or not path.is_file():
            continue
        out[rel] = path.read_bytes()
    return out


@dataclass
class Env:
    """An isolated HOME and runtime dir; ``vars`` is the environment for subprocesses."""

    home: Path
    runtime: Path
    vars: dict[str, str] = field(default_factory=dict)

    def state_dir(self, project: Path, *parts: str) -> Path:
        """specrun's per-user state directory for ``project`` in this environment (what
        ``coordinator.user_state.project_state_dir`` gives the service), not created."""
        from coordinator.user_state import project_key

        base = Path(self.vars.get("XDG_STATE_HOME") or self.home.parent / "state")
        return base.joinpath("specrun", "projects", project_key(project), *parts)

    def service_log(self, project: Path) -> Path:
        return self.state_dir(project, "logs", "service.log")

    def own_settings(self, project: Path) -> Path:
        """The person's own settings for ``project`` (what ``config set`` writes, outside
        the project: they apply whether or not it is trusted); its directory made."""
        path = self.state_dir(project, "settings.json")
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path


#: The state directory (``XDG_STATE_HOME``) the services of this test run share with the
#: test process itself (tests/conftest.py sets it), so that a test reads a service's
#: sessions and logs where that service wrote them; each project has its own directory
#: in it. None: each isolated environment gets one of its own.
SHARED_STATE_HOME: str | None = None


@contextmanager
def isolated_env(**extra: str) -> Iterator[Env]:
    base = Path(tempfile.mkdtemp(prefix="sr-"))  # short: ipc:// paths are length-limited
    home, runtime = base / "home", base / "run"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "DASHSCOPE_", "SPECRUN_"))
    }
    env.update(HOME=str(home), SPECRUN_RUNTIME_DIR=str(runtime), PYTHONUNBUFFERED="1",
               XDG_STATE_HOME=SHARED_STATE_HOME or str(base / "state"), **extra)
    # The person's user-wide settings: no suggestion backoff. A test drives many
    # suggestions it never takes through one service, and the backoff (on by default for
    # people) would then skip the very predictions it waits for; the backoff's own test
    # sets it again here.
    (home / ".specrun").mkdir()
    (home / ".specrun" / "settings.json").write_text('{"suggestionBackoffAfter": 0}\n')
    try:
        yield Env(home, runtime, env)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class Followed:
    """A `specrun` command left running (``Specrun.follow``)."""

    proc: subprocess.Popen[str]
    lines: queue.Queue[str]  # what it printed so far, line by line
    reader: threading.Thread  # ends at the end of its output


class Specrun:
    """Runs `specrun --project P ...` as a real subprocess."""

    def __init__(self, project: Path, env: Env) -> None:
        self.project = project
        self.env = env

    def run(
        self, *args: str, timeout: float = 60, check: bool = False, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        if args[:1] == ("start",):
            args = (*args, *self._quick_demo_args(args))
        proc = subprocess.run(
            [sys.executable, "-m", "coordinator", "--project", str(self.project), *args],
            env=self.env.vars,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"specrun {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def _quick_demo_args(self, args: tuple[str, ...]) -> tuple[str, ...]:
        """``--scenario`` with the demo scenario at test pace (``DEMO_LATENCY_SCALE``) for a
        `start` that would play the demo scenario at a person's pace: the demo project, the
        embedded model, no scenario chosen. Anything else starts as asked."""
        from coordinator.service.model_endpoint import is_demo_project
        from coordinator.settings import SettingsError, load_settings

        if any(arg.startswith(("--scenario", "--base-url")) for arg in args):
            return ()
        try:
            settings = load_settings(self.project, env=self.env.vars, home=self.env.home)
        except (SettingsError, OSError):
            return ()  # a start that is about to be refused: let it say so itself
        if not settings.uses_scripted_model or settings.scenario:
            return ()
        if not is_demo_project(self.project):
            return ()
        quick = self.env.home.parent / "demo-quick.yaml"
        if not quick.exists():
            write_demo_scenario(quick)
        return ("--scenario", str(quick))

    def trust(self) -> None:
        """``specrun trust``: what the test wrote into the project's .specrun/ applies."""
        self.run("trust", check=True)

    @property
    def service_log(self) -> Path:
        return self.env.service_log(self.project)

    def json(self, *args: str, timeout: float = 60) -> Any:
        proc = self.run(*args, "--json", timeout=timeout, check=True)
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def json_lines(self, *args: str, timeout: float = 60) -> list[Any]:
        proc = self.run(*args, "--json", timeout=timeout)
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    @contextmanager
    def follow(self, *args: str) -> Iterator[Followed]:
        """`specrun --project P ...` left running, each line it prints put on a queue as it
        comes (a test waits on a line with a deadline, never on the pipe itself); killed at
        the end if it still runs."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "coordinator", "--project", str(self.project), *args],
            env=self.env.vars, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        try:
            assert proc.stdout is not None
            out = proc.stdout

            def pump() -> None:
                for line in out:
                    lines.put(line)

            reader = threading.Thread(target=pump, daemon=True)
            reader.start()
            yield Followed(proc, lines, reader)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def service_pid(self) -> int:
        return int(self.json("status")["pid"])

    def query(self, kind: Any, **fields: Any) -> Any:
        """One request over the control socket from this process, as the dict that
        ``specrun ... --json`` prints for its reply. For polling in waits: a CLI process
        per poll costs a whole interpreter start, this costs a message."""
        import msgspec

        from coordinator.cli.client import ServiceClient

        saved = os.environ.get("SPECRUN_RUNTIME_DIR")
        os.environ["SPECRUN_RUNTIME_DIR"] = str(self.env.runtime)
        try:
            client = ServiceClient(self.project, timeout_s=30)
        finally:
            if saved is None:
                os.environ.pop("SPECRUN_RUNTIME_DIR", None)
            else:
                os.environ["SPECRUN_RUNTIME_DIR"] = saved
        with client:
            return msgspec.json.decode(msgspec.json.encode(client.call(kind, **fields)))


def service_processes(pid: int) -> list[psutil.Process]:
    """The service and everything below it (fork server, workers, tools)."""
    try:
        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


def worker_frames_handled(
    project: Path, epoch: int, log: Path, timeout: float = 30.0
) -> None:
    """Return once a running service has handled the worker-socket frames sent to it so far
    (their contexts ended first: a context ends only when its closed sockets have sent
    theirs). A marker frame from an identity of its own, which the service logs as it drops
    it, arrives after them."""
    import uuid

    import zmq

    from protocol.wire import codec
    from protocol.wire.endpoints import Endpoints
    from protocol.wire.work import Heartbeat

    identity = f"marker-{uuid.uuid4().hex}".encode()
    frame = codec.worker_to_coordinator().encode(Heartbeat(pid=0, epoch=epoch, job_id="x"))
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 2000)
        sock.setsockopt(zmq.IDENTITY, identity)
        sock.connect(Endpoints.for_project(project, create=False).workers)
        sock.send(frame)
        sock.close()
    finally:
        ctx.term()
    seen = wait_until(lambda: repr(identity) in log.read_text(errors="replace"), timeout=timeout)
    assert seen, f"the service never logged the marker frame from {identity!r}"


def wait_until(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def ended_or_killed(marker_dir: Path, timeout: float = 10) -> bool:
    """Wait for the processes of a test runtime dir to end; kill what is left after
    ``timeout`` (a failed test must not leave a service running). Whether they ended."""
    ended = wait_until(lambda: not processes_with_env(marker_dir), timeout=timeout)
    for proc in processes_with_env(marker_dir):
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return ended


def processes_with_env(marker_dir: Path) -> list[psutil.Process]:
    """Processes whose environment points at a test runtime dir (leak detection)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("SPECRUN_RUNTIME_DIR") == str(marker_dir):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@contextmanager
def running_service(
    project: Path,
    *start_args: str,
    extra_env: dict[str, str] | None = None,
    before_start: Any = None,
    seams: Any = None,
) -> Iterator[Specrun]:
    """A service for ``project`` in an isolated environment, for a whole test module.

    ``extra_env`` goes into the service's environment; ``before_start(env)`` may prepare
    the isolated HOME first. The test process's ``SPECRUN_RUNTIME_DIR`` points at it
    meanwhile (so in-process clients find it); every process of the service is gone
    afterwards. With ``seams`` (``protocol.wire.seams.WorkerSeams``) the service is built
    by the test's own entry point (``tests/seams.py``) and started the way `specrun start`
    starts one; ``start_args`` are then ``serve`` flags."""
    with isolated_env(**(extra_env or {})) as env:
        if before_start is not None:
            before_start(env)
        runner = Specrun(project, env)
        saved = os.environ.get("SPECRUN_RUNTIME_DIR")
        os.environ["SPECRUN_RUNTIME_DIR"] = str(env.runtime)
        if seams is None:
            runner.run("start", *start_args, check=True)
        else:
            from coordinator.cli.daemon import start_daemon
            from tests.seams import service_entry

            start_daemon(project, list(start_args), env=env.vars, entry=service_entry(seams))
        try:
            yield runner
        finally:
            runner.run("stop")
            ended_or_killed(env.runtime)
            if saved is None:
                os.environ.pop("SPECRUN_RUNTIME_DIR", None)
            else:
                os.environ["SPECRUN_RUNTIME_DIR"] = saved


def start_once(project: Path, *start_args: str) -> subprocess.CompletedProcess[str]:
    """`specrun start` for ``project`` in an isolated environment, stopped again whatever it
    did: for a test of what start itself says (a start that is refused, most often)."""
    with isolated_env() as env:
        specrun = Specrun(project, env)
        try:
            return specrun.run("start", *start_args)
        finally:
            specrun.run("stop")


_HELPER: list[Any] = []


def shared_sandbox_helper() -> Any:
    """One sandbox helper (fresh interpreter) for the in-process job tests of this run,
    closed when the test process exits."""
    if not _HELPER:
        import atexit

        from worker.contain.helper import SandboxHelper

        helper = SandboxHelper.start()
        atexit.register(helper.close)
        _HELPER.append(helper)
    return _HELPER[0]


REQUIRE_CONTAINMENT_ENV = "SPECRUN_REQUIRE_CONTAINMENT"
"""Set to ``1`` (``.ci/run`` does): a test that cannot prove a containment layer because
the machine lacks it fails instead of being skipped. The product never runs a command
with less containment; CI must not go green with those proofs silently left out."""


def containment_unavailable(reason: str) -> NoReturn:
    """The one way a test says that this machine lacks the containment it proves: a skip,
    or a failure under ``SPECRUN_REQUIRE_CONTAINMENT=1``."""
    if os.environ.get(REQUIRE_CONTAINMENT_ENV) == "1":
        pytest.fail(f"containment unavailable ({REQUIRE_CONTAINMENT_ENV}=1): {reason}")
    pytest.skip(f"containment unavailable here: {reason}")


def needs_containment(missing: str | None) -> pytest.MarkDecorator:
    """Mark a test or module (``pytestmark``) that proves a containment layer; ``missing``
    says what this machine lacks, None when it has everything. The conftest turns a
    missing layer into ``containment_unavailable`` when the test would run."""
    return pytest.mark.containment(missing=missing)
