"""Shell commands of a speculation that see its writes.

A confined worker cannot mount anything (Landlock forbids changing the mount
topology), so the speculation starts this small helper process first, while the
worker is still unconfined. The helper receives read-only commands on stdin, one
JSON line each, and runs every one in a child that (1) gets a private overlay view of
the project showing the speculation's writes (``overlay.view``), (2) is confined by
Landlock to writing its temp dir and /dev/null, and (3) only then execs bash. The
helper re-checks each command with the classifier itself and never writes a file.
With the opt-in ``speculateShell`` setting, commands that are not read-only run the same
way in a writable view without network (``mode="captured"``); their writes are kept
apart for the worker to copy into the overlay.

    python -m worker.shell.executor ROOT OVERLAY_DIR TMP_DIR
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from pathlib import Path

import msgspec

from overlay.sandbox import restrict_writes_to
from overlay.view import enter_capture_view, enter_overlay_view, has_writes
from worker.lifecycle import die_with_parent
from worker.shell.runner import ShellNotReadOnlyError, ShellResult, run_read_only, run_shell


class Request(msgspec.Struct, frozen=True):
    command: str
    cwd: str
    timeout_s: float
    output_cap: int
    # "captured" (opt-in): any command, in a writable view without network; its writes
    # land in ``capture_dir``/upper for the worker to copy into the overlay.
    mode: str = "read_only"
    capture_dir: str | None = None


class Reply(msgspec.Struct, frozen=True):
    result: ShellResult | None = None
    error: str | None = None


def _prepare_child(root: str, overlay_dir: str, tmp: str) -> None:
    """In the command's child, before exec. A failure ends the child with exit code 126
    and the reason on its stderr, so the model reads why instead of a bare error."""
    try:
        if has_writes(overlay_dir):
            enter_overlay_view(root, overlay_dir)
        restrict_writes_to([p for p in (Path(tmp), Path("/dev/null")) if p.exists()])
    except Exception as exc:
        os.write(2, f"specrun: cannot show this command the speculation's files: {exc}\n".encode())
        os._exit(126)


def _prepare_captured_child(root: str, overlay_dir: str, tmp: str, capture: str) -> None:
    try:
        enter_capture_view(root, overlay_dir, Path(capture) / "upper", Path(capture) / "work")
        restrict_writes_to([Path(root), Path(tmp), Path("/dev/null")])
    except Exception as exc:
        os.write(2, f"specrun: cannot give this command a sandboxed view: {exc}\n".encode())
        os._exit(126)


def _run_captured(request: Request, root: str, overlay_dir: str, tmp: str) -> ShellResult:
    if request.capture_dir is None:
        raise ValueError("a captured command needs a capture_dir")
    for sub in ("upper", "work"):
        (Path(request.capture_dir) / sub).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": tmp}
    for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PAGER", "LESSOPEN"):
        env.pop(name, None)
    prepare = functools.partial(
        _prepare_captured_child, root, overlay_dir, tmp, request.capture_dir
    )
    return run_shell(
        request.command,
        request.cwd,
        request.timeout_s,
        request.output_cap,
        env=env,
        preexec=prepare,
    )


def serve(root: str, overlay_dir: str, tmp: str) -> None:
    die_with_parent()
    decoder = msgspec.json.Decoder(Request)
    encoder = msgspec.json.Encoder()
    prepare = functools.partial(_prepare_child, root, overlay_dir, tmp)
    for line in sys.stdin.buffer:
        try:
            request = decoder.decode(line)
        except msgspec.DecodeError as exc:
            reply = Reply(error=f"bad request: {exc}")
        else:
            try:
                if request.mode == "captured":
                    result = _run_captured(request, root, overlay_dir, tmp)
                else:
                    result = run_read_only(
                        request.command,
                        request.cwd,
                        request.timeout_s,
                        request.output_cap,
                        preexec=prepare,
                    )
                reply = Reply(result=result)
            except ShellNotReadOnlyError as exc:
                reply = Reply(error=f"not run: {exc}")
            except (subprocess.SubprocessError, OSError) as exc:
                reply = Reply(
                    error=f"could not give the command a view of the speculation's files ({exc})"
                )
        sys.stdout.buffer.write(encoder.encode(reply) + b"\n")
        sys.stdout.buffer.flush()


class ShellExecutor:
    """The worker's handle on the helper process; ``run`` matches ``run_read_only``."""

    def __init__(self, root: str, overlay_dir: str, tmp: str) -> None:
        self._proc = subprocess.Popen(
            # -P and cwd "/": the project must never shadow our own packages.
            [sys.executable, "-P", "-m", "worker.shell.executor", root, overlay_dir, tmp],
            cwd="/",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder()
        self._decoder = msgspec.json.Decoder(Reply)

    def run(
        self, command: str, cwd: str | os.PathLike[str], timeout_s: float, output_cap: int
    ) -> ShellResult:
        return self._ask(Request(command, os.fspath(cwd), timeout_s, output_cap))

    def run_captured(
        self,
        command: str,
        cwd: str | os.PathLike[str],
        timeout_s: float,
        output_cap: int,
        capture_dir: str | os.PathLike[str],
    ) -> ShellResult:
        """Run any command sandboxed; what it wrote is left in ``capture_dir``/upper."""
        request = Request(
            command, os.fspath(cwd), timeout_s, output_cap, "captured", os.fspath(capture_dir)
        )
        return self._ask(request)

    def _ask(self, request: Request) -> ShellResult:
        with self._lock:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            try:
                self._proc.stdin.write(self._encoder.encode(request) + b"\n")
                self._proc.stdin.flush()
                line = self._proc.stdout.readline()
            except (BrokenPipeError, OSError):
                line = b""
        if not line:
            raise RuntimeError("the speculation's shell helper is gone")
        reply = self._decoder.decode(line)
        if reply.result is None:
            raise RuntimeError(reply.error or "the shell helper failed")
        return reply.result

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python -m worker.shell.executor ROOT OVERLAY_DIR TMP_DIR")
    serve(*sys.argv[1:4])
