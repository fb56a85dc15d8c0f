"""The rule for which links Tab creates (protocol.rules.links)."""

from __future__ import annotations

import pytest

from protocol.rules.links import link_problem, resolved_target


@pytest.mark.parametrize(
    ("rel", "target", "resolved"),
    [
        ("libz.so", "libz.so.1", "libz.so.1"),
        ("lib/libz.so", "libz.so.1.3", "lib/libz.so.1.3"),
        ("a/b/c", "../../d", "d"),
        ("a/b", "./c", "a/c"),
        ("a", "..", None),
        ("a/b", "../..", None),
        ("a", ".", None),
        ("a", "/etc/passwd", None),
    ],
)
def test_resolved_target_is_lexical_against_the_links_directory(
    rel: str, target: str, resolved: str | None
) -> None:
    assert resolved_target(rel, target) == resolved


@pytest.mark.parametrize(
    ("rel", "target"),
    [("libz.so", "libz.so.1"), ("build/current", "../dist/v2"), ("docs/README", "../README.md")],
)
def test_a_link_inside_the_project_is_applied(rel: str, target: str) -> None:
    assert link_problem(rel, target) is None


@pytest.mark.parametrize(
    ("rel", "target", "why"),
    [
        ("home", "/home/me", "absolute"),
        ("up", "..", "leaves the project"),
        ("deep/up", "../../etc", "leaves the project"),
        ("self", ".", "leaves the project"),
        ("sneak", "sub/../x", "climbs with .. after a name"),
        ("hooks", ".git/hooks", "protected"),
        ("cfg", "./.GIT/config", "protected"),
        ("state", ".specrun", "protected"),
        (".git/hooks/pre-commit", "../../run.sh", "protected"),
        ("env", ".envrc", "runs later"),
        (".envrc", "env.sh", "runs later"),
        ("wf", ".github/workflows", "runs later"),
        ("ci", ".github", "holds a path"),
        ("empty", "", "empty"),
        ("nul", "a\x00b", "empty or not a name"),
        ("bidi", "a\u202eb", "invisible"),
        ("long", "x" * 2000, "too long"),
    ],
)
def test_a_link_that_could_reach_out_or_run_later_is_held_back(
    rel: str, target: str, why: str
) -> None:
    problem = link_problem(rel, target)
    assert problem is not None and why in problem


def test_the_settings_extend_the_rule() -> None:
    assert link_problem("s", "secrets/key", protected=("secrets/",)) is not None
    assert link_problem("s", "tools/run", runs_later_paths=("tools/",)) is not None
    assert link_problem("s", "tools/run") is None
