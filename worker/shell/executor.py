"""Read-only shell commands that see a speculation's writes.

A confined worker cannot mount anything (Landlock forbids changing the mount
topology), so the speculation starts this small helper process first, while the
worker is still unconfined. The helper receives read-only commands on stdin, one
JSON line each, and runs every one in a child that (1) gets a private overlay view of
the project showing the speculation's writes (``overlay.view``), (2) is confined by
Landlock to writing its temp dir and /dev/null, and (3) only then execs bash. The
helper re-checks each command with the classifier itself and never writes a file.

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
from overlay.view import enter_overlay_view, has_writes
from worker.lifecycle import die_with_parent
from worker.shell.runner import ShellNotReadOnlyError, ShellResult, run_read_only


class Request(msgspec.Struct, frozen=True):
    command: str
    cwd: str
    timeout_s: float
    output_cap: int


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
        request = Request(command, os.fspath(cwd), timeout_s, output_cap)
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
