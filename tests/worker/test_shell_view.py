"""Read-only shell commands in a speculation see the speculation's own writes (design §9):
a real worker, its shell helper, a per-command overlayfs view, Landlock on the command."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from protocol.wire.boundary import BoundaryReason
from protocol.wire.work import Completed, PipelinedSuggestion, ToolFinished
from tests.support import containment_unavailable
from tests.worker.conftest import PIPELINED_RULE, Harness, call, rule, tree_state
from tests.worker.test_speculation_worker import pool_of, run, send_sandboxed_job

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
        containment_unavailable("this kernel does not allow unprivileged mount namespaces")
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
            await send_sandboxed_job(pool, h)
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


def test_opt_in_sandboxed_shell_keeps_writes_in_the_overlay_and_has_no_network(
    harness: Any,
) -> None:
    if not _view_supported():
        containment_unavailable("this kernel does not allow unprivileged mount namespaces")
    import socket


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
                await send_sandboxed_job(pool, h, speculate_shell=True)
                seen = await events.until(PipelinedSuggestion, timeout=20)
                done = next(e for e in seen if isinstance(e, Completed))
                results = [e.result for e in seen if isinstance(e, ToolFinished)]
                build, cat, net = (r.output or "" for r in results)
                assert "kept in the speculation" in build
                assert "1 file(s) it deleted are kept as deletions" in build
                assert "built" in cat  # a later read-only command sees the captured write
                assert "NET: refused" in net, net
                written = done.outcome.written_files
                assert set(written) == {"build.log", "README.md"}
                assert written["README.md"].deleted and not written["build.log"].deleted
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
    from protocol.wire.work import Boundary

    ends = out.of(Boundary)
    assert ends and ends[0].reason == BoundaryReason("shell", "echo x > f.txt")
    h.cleanup()
