"""Read-only shell commands in a speculation see the speculation's own writes (SPEC §9):
a real worker, its shell helper, a per-command overlayfs view, Landlock on the command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overlay.view import has_writes
from protocol.work import Completed, PipelinedSuggestion, ToolFinished
from tests.worker.conftest import PIPELINED_RULE, Harness, call, rule, tree_state
from tests.worker.test_speculation_worker import pool_of, run

pytestmark = pytest.mark.usefixtures("stop_multiprocess_helpers")


def _view_supported() -> bool:
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
    )
    return probe.returncode == 0


def test_shell_reads_see_the_overlay_and_cannot_write_through_it(
    harness: Any, tmp_path: Path
) -> None:
    if not _view_supported():
        pytest.skip("this kernel does not allow unprivileged mount namespaces")
    h: Harness = harness(
        [
            rule(
                {
                    "tool_calls": [
                        call("write_file", file_path="src/new_module.py", content="ANSWER = 42\n"),
                        call("edit", file_path="README.md", old_string="Hello", new_string="Howdy"),
                        call("run_shell_command", command="cat src/new_module.py README.md"),
                        call("run_shell_command", command="ls src"),
                        call(
                            "run_shell_command", command="echo x > /dev/null; cat src/new_module.py"
                        ),
                    ]
                },
                times=1,
            ),
            rule({"text": "Done."}),
            PIPELINED_RULE,
        ]
    )
    (h.project / "README.md").write_text("Hello world\n")
    before = tree_state(h.project)

    async def main() -> None:
        async with pool_of() as (pool, events):
            handle = await pool.acquire("speculation", "spec-1")
            job = h.job(sandbox=True, overlay_pid=handle.pid)
            await pool.send(handle, job)
            seen = await events.until(PipelinedSuggestion, timeout=20)
            results = [e.result for e in seen if isinstance(e, ToolFinished)]
            assert all(r.ok for r in results), results
            cat, ls, third = (r.output or "" for r in results[2:5])
            assert "ANSWER = 42" in cat and "Howdy world" in cat and "Hello" not in cat
            assert "new_module.py" in ls
            assert "ANSWER = 42" in third
            assert any(isinstance(e, Completed) for e in seen)
            h.cleanup()

    run(main)
    assert tree_state(h.project) == before
    assert not (h.project / "src" / "new_module.py").exists()


def test_has_writes(tmp_path: Path) -> None:
    assert not has_writes(tmp_path / "missing")
    assert not has_writes(tmp_path)
    (tmp_path / "a").write_text("x")
    assert has_writes(tmp_path)


def test_the_view_is_read_only_and_private(tmp_path: Path) -> None:
    """Directly: a child with the view sees the upper file, cannot write, and the host's
    mount table is unchanged afterwards."""
    if not _view_supported():
        pytest.skip("this kernel does not allow unprivileged mount namespaces")
    root, upper = tmp_path / "root", tmp_path / "upper"
    (root / "d").mkdir(parents=True)
    (upper / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("real\n")
    (upper / "d" / "f.txt").write_text("speculated\n")
    script = (
        "import os, sys\n"
        "from overlay.view import enter_overlay_view\n"
        f"os.chdir({str(root)!r})\n"
        f"enter_overlay_view({str(root)!r}, {str(upper)!r})\n"
        "print(open('d/f.txt').read().strip())\n"
        "try:\n"
        "    open('d/g.txt', 'w')\n"
        "    print('WROTE')\n"
        "except OSError as e:\n"
        "    print('refused', e.errno)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    ).stdout.split()
    assert out[0] == "speculated" and out[1] == "refused"
    assert (root / "d" / "f.txt").read_text() == "real\n"
    assert not (root / "d" / "g.txt").exists()
    assert str(root) not in Path("/proc/self/mounts").read_text()


def test_opt_in_sandboxed_shell_keeps_writes_in_the_overlay_and_has_no_network(
    harness: Any,
) -> None:
    if not _view_supported():
        pytest.skip("this kernel does not allow unprivileged mount namespaces")
    import socket

    import msgspec

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    probe = (
        'python3 -c "import socket,sys\n'
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1); print('NET: reached')\n"
        "except OSError as e:\n"
        "    print('NET: refused', e.errno)\""
    )
    h: Harness = harness(
        [
            rule(
                {
                    "tool_calls": [
                        call("run_shell_command", command="echo built > build.log && rm README.md"),
                        call("run_shell_command", command="cat build.log"),
                        call("run_shell_command", command=probe),
                    ]
                },
                times=1,
            ),
            rule({"text": "Built."}),
            PIPELINED_RULE,
        ]
    )
    before = tree_state(h.project)
    try:

        async def main() -> None:
            async with pool_of() as (pool, events):
                handle = await pool.acquire("speculation", "spec-1")
                job = msgspec.structs.replace(
                    h.job(sandbox=True, overlay_pid=handle.pid), speculate_shell=True
                )
                await pool.send(handle, job)
                seen = await events.until(PipelinedSuggestion, timeout=20)
                done = next(e for e in seen if isinstance(e, Completed))
                results = [e.result for e in seen if isinstance(e, ToolFinished)]
                build, cat, net = (r.output or "" for r in results)
                assert "kept in the speculation" in build and "README.md (deleted)" in build
                assert "built" in cat  # a later read-only command sees the captured write
                assert "NET: refused" in net, net
                assert set(done.outcome.written_files) == {"build.log"}
                h.cleanup()

        run(main)
    finally:
        server.close()
    assert tree_state(h.project) == before


def test_without_the_opt_in_a_write_command_is_still_a_boundary(harness: Any) -> None:
    h: Harness = harness(
        [rule({"tool_calls": [call("run_shell_command", command="echo x > f.txt")]})]
    )
    out = h.run(h.job())
    from protocol.work import Boundary

    ends = out.of(Boundary)
    assert ends and ends[0].reason == "shell:echo x > f.txt"
    h.cleanup()
