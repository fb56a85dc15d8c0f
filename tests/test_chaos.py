"""The chaos run (scripts/chaos.py) as part of the suite: a short fixed-seed run of every
fault kind against a real service must end with zero invariant violations, and leave no
process, mount or directory behind. The 200-round run is marked slow."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pytest

from coordinator.scripted_model.scenario import scenario_from_obj
from protocol import codec
from protocol.suggestion import filter_suggestion
from tests.support import REPO

SCRIPT = REPO / "scripts" / "chaos.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("specrun_chaos", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


chaos = _load()


def _run(*args: str, timeout: float) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECRUN_")}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert proc.returncode == (1 if summary["violations"] else 0), proc.stderr[-3000:]
    _assert_nothing_left(Path(summary["base_dir"]))
    return summary


def _assert_nothing_left(base: Path) -> None:
    runtime = str(base / "run")
    leaked = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("SPECRUN_RUNTIME_DIR") == runtime:
                leaked.append(proc)
        except psutil.Error:
            continue
    for proc in leaked:
        proc.kill()
    assert not leaked, f"chaos left processes behind: {[p.pid for p in leaked]}"
    assert not base.exists(), f"chaos left {base} behind"
    assert str(base) not in Path("/proc/mounts").read_text(), "chaos left its tmpfs mounted"


def test_the_generated_scenario_is_valid_and_its_suggestions_pass_the_filters() -> None:
    scenario = scenario_from_obj(chaos.build_scenario(12), source="chaos")
    assert len(scenario.rules) > 12 * 5
    for n in (1, 12):
        text = chaos.suggestion_text(chaos.tag_of(n))
        assert filter_suggestion(text) is None, text
    restarted = chaos.build_scenario(12, first_round=7)
    names = [r.get("name", "") for r in restarted["rules"]]
    assert not any(name.startswith("r0006") for name in names)
    assert any(name.startswith("r0007") for name in names)


def test_round_files_are_distinct_per_round_and_existing_file_first() -> None:
    one, two = chaos.round_files("0001"), chaos.round_files("0002")
    assert next(iter(one)) == "chaos/shared.txt"
    assert len(one) >= 4
    assert all(one[k] != two.get(k) for k in one)


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ({"a": b"1", "chaos/shared.txt": b"old"}, "untouched"),
        ({"a": b"1", "chaos/shared.txt": b"new", "chaos/x": b"x", "chaos/y": b"y"}, "accepted"),
        ({"a": b"1", "chaos/shared.txt": b"old", "chaos/x": b"x"}, "subset"),
        ({"a": b"1", "chaos/shared.txt": b"ne", "chaos/x": b"x", "chaos/y": b"y"}, "corrupt"),
        ({"a": b"2", "chaos/shared.txt": b"new", "chaos/x": b"x", "chaos/y": b"y"}, "corrupt"),
        ({"a": b"1"}, "corrupt"),
    ],
)
def test_classify_tree_tells_untouched_accepted_subset_and_corrupt(
    actual: dict[str, bytes], expected: str
) -> None:
    before = {"a": b"1", "chaos/shared.txt": b"old"}
    files = {"chaos/shared.txt": b"new", "chaos/x": b"x", "chaos/y": b"y"}
    assert chaos.classify_tree(actual, before, files) == expected


def test_garbage_control_frames_never_decode_as_requests() -> None:
    import random

    requests = codec.client_to_coordinator()
    for seed in range(20):
        for frame in chaos.garbage_frames(random.Random(seed), epoch=5):
            with pytest.raises(codec.ProtocolError):
                requests.decode(frame)


@pytest.mark.timeout(300)
def test_fifty_chaos_rounds_violate_no_invariant() -> None:
    summary = _run("--rounds", "50", "--seed", "7", timeout=280)
    assert summary["violations"] == []
    assert summary["rounds"] == 50
    for kind, row in summary["by_kind"].items():
        assert row["rounds"] >= 3, (kind, row)
        if kind != "none":
            assert row["landed"] >= 1, f"no {kind} fault landed where it was aimed: {row}"
    if os.geteuid() == 0:
        assert "enospc" in summary["by_kind"], summary["tmpfs"]
    assert summary["detect_dead_worker"]["n"] >= 10
    assert summary["detect_hung_worker"]["n"] >= 3
    assert summary["restart_to_serving"]["n"] >= 2
    assert summary["garbage_frames"]["sent"] == summary["garbage_frames"]["error_replies"] > 0


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_two_hundred_chaos_rounds_violate_no_invariant() -> None:
    summary = _run("--rounds", "200", "--seed", "1", timeout=1150)
    assert summary["violations"] == []
