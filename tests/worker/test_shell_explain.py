"""explain_text / batch and the ``python -m worker.shell.explain`` entry used by the CLI."""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest

from worker.shell import batch, explain_text
from worker.shell.explain import explain, main


def test_explain_read_only() -> None:
    text = explain_text("git log --oneline | head")
    assert text.splitlines()[0] == "read-only: 'git log --oneline | head'"
    assert "rule: read-only: every command in allow list" in text
    assert "commands: git head" in text
    assert explain is explain_text


def test_explain_not_read_only_names_the_rule() -> None:
    text = explain_text("ls > out.txt")
    assert text.startswith("NOT read-only: 'ls > out.txt'")
    assert "rule: redirect:>" in text


def test_batch_lines() -> None:
    lines = ['"ls -la"', "", '"rm -rf x"\n', "42", "not json", '["ls"]', '"git push"']
    out = [msgspec.json.decode(line) for line in batch(lines)]
    assert out[0] == {"command": "ls -la", "read_only": True,
                      "reason": "read-only: every command in allow list"}
    assert out[1] == {"command": "rm -rf x", "read_only": False, "reason": "command:rm"}
    for bad in out[2:5]:
        assert bad["command"] is None
        assert bad["read_only"] is False
        assert bad["reason"].startswith("bad-input: ")
    assert out[5] == {"command": "git push", "read_only": False, "reason": "git:push"}
    assert len(out) == 6


def test_batch_accepts_bytes_and_unicode() -> None:
    out = list(batch([b'"echo \\u00e9t\\u00e9"']))
    assert msgspec.json.decode(out[0])["command"] == "echo été"


def test_main_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls"]) == 0
    assert main(["rm x"]) == 1
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_module_entry_point_batch() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "worker.shell.explain", "--batch"],
        input='"cat f | wc -l"\n"echo $(id)"\n',
        capture_output=True, text=True, timeout=60, check=True,
    )
    rows = [msgspec.json.decode(line) for line in proc.stdout.splitlines()]
    assert [row["read_only"] for row in rows] == [True, False]
    assert rows[1]["reason"] == "substitution:$(...)"
    assert proc.stderr == ""
