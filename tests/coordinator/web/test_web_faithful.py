"""The web view shows exactly what Tab will do, in a real browser through a real service:
each line of the diff in the page is a line of `specrun diff`, coloured by what it is, and
the files Tab then writes are the ones shown; every character Tab would write is seen,
invisible ones as their escapes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import yaml

from protocol.text.inert_text import inert
from tests.coordinator.e2e import done_unless_stalled, stepped_scenario, write_call
from tests.support import Specrun, make_sample_project, running_service, wait_until
from tests.web_support import WebView, browser, need_chromium, open_page, web_view

# One Chromium for the module (tests/conftest.py): each test still gets a fresh context.
pytestmark = pytest.mark.usefixtures("shared_chromium")

REWRITE = "rewrite the notes"
# A removed SQL comment reads "--- old comment" in the diff and an added "++ x" line
# "+++ x": removals and additions all the same, not file lines. A carriage return inside a
# line keeps it one line (git's lines, not str.splitlines's).
OLD = "-- old comment\nselect 1;\r\n"
NEW = "++ added\nselect 1;\rmore\r\n"
HIDE = "add the timeout option"
# An invisible Hangul filler as a variable (the "invisible backdoor" trick), tag
# characters spelling what no one sees, and an Arabic letter mark: Tab writes them all, so
# the page must show each of them.
MEANWHILE = "update the readme and the build stamp"
TAKE = "write the taken file"
BIG = "write the long log"
BIG_LINES = 20_000  # about 230 KB: more than a page is sent of one file
BACKDOOR = "const { timeout,\u3164} = req.query;\nexec(\u3164);\u061c\U000e0041\U000e0042\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Specrun, WebView]]:
    need_chromium()
    tmp = tmp_path_factory.mktemp("faithful")
    project = make_sample_project(tmp / "project")
    (project / "notes.sql").write_text(OLD, newline="")
    (project / ".gitignore").write_text("build/\n")
    (project / "build").mkdir()
    (project / "build/stamp.txt").write_text("mine\n")
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm",
                    "notes"], cwd=project, check=True)
    # In the order the tests play them (stepped_scenario: the newest step's rule first).
    steps = {REWRITE: [write_call("notes.sql", NEW)], HIDE: [write_call("server.js", BACKDOOR)],
             BIG: [write_call("long.log", "".join(f"line {n}\n" for n in range(BIG_LINES)))],
             MEANWHILE: [write_call("README.md", "# speculated\n"),
                         write_call("build/stamp.txt", "speculated\n")],
             TAKE: [write_call("taken.txt", "taken\n")]}
    scenario = tmp / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(stepped_scenario("faithful", steps, done_unless_stalled)))
    with running_service(project, "--approval-mode", "auto-edit", "--scenario",
                         str(scenario)) as specrun, web_view(specrun) as web:
        specrun.run("ask", "hello", check=True)  # no suggestion in a conversation's first turn
        yield specrun, web


@contextmanager
def _completed_in_page(
    served: tuple[Specrun, WebView], step: str, file_head: str
) -> Iterator[tuple[Any, Any]]:
    """A fresh page, and in it the branch of ``step``'s speculation once it completed and
    the page drew a file head reading ``file_head``."""
    specrun, web = served
    with browser() as context:
        page = open_page(context, web)
        assert specrun.run("ask", f"go {step}").returncode == 0
        page.wait_for_selector('.branch[data-rank="0"] .badge.status-completed', timeout=30_000)
        page.wait_for_selector(f".file-head >> text={file_head}")
        yield page, page.locator('.branch[data-rank="0"]')


def test_the_diff_in_the_page_is_specrun_diff_line_by_line_and_tab_writes_it(
    served: tuple[Specrun, WebView],
) -> None:
    specrun, _ = served
    with _completed_in_page(served, REWRITE, "modified: notes.sql") as (_, branch):
        shown = branch.locator(".files pre.diff span").evaluate_all(
            "spans => spans.map(s => [s.className, s.textContent])"
        )
        (file,) = specrun.json("diff")["files"]
        lines = file["diff"].split("\n")[:-1]
        assert [text for _, text in shown] == [inert(line) for line in lines]
        assert shown == [
            ["meta", "--- a/notes.sql"], ["meta", "+++ b/notes.sql"],
            ["hunk", "@@ -1,2 +1,2 @@"],
            ["del", "--- old comment"], ["del", "-select 1;\\r"],
            ["add", "+++ added"], ["add", "+select 1;\\rmore\\r"],
        ]
        head = branch.locator(".file-head").text_content()
        assert head == "modified: notes.sql +2 -2"

        branch.locator("button.accept").click()
        assert wait_until(lambda: (specrun.project / "notes.sql").read_bytes() == NEW.encode(),
                          timeout=20)


def test_a_line_that_only_looks_like_a_file_line_is_coloured_by_what_it_is() -> None:
    from coordinator.cli.changes_view import classified_lines

    diff = ("--- a/n.sql\n+++ b/n.sql\n@@ -1,2 +1,2 @@\n--- old\n+++ new\n ctx\n"
            "@@ -9 +9 @@\n---x\n")
    assert [kind for _, kind in classified_lines(diff)] == [
        "file", "file", "hunk", "removed", "added", "context", "hunk", "removed"]


def test_invisible_characters_tab_would_write_are_shown_in_the_page(
    served: tuple[Specrun, WebView],
) -> None:
    specrun, _ = served
    with _completed_in_page(served, HIDE, "created: server.js") as (_, branch):
        added = branch.locator(".files pre.diff span.add").all_text_contents()
        assert added == ["+const { timeout,\\u3164} = req.query;",
                         "+exec(\\u3164);\\u061c\\U000e0041\\U000e0042"]
        steps = branch.locator(".steps").text_content() or ""
        assert "\u3164" not in steps and "\\u3164" in steps  # the write's arguments too
        specrun.run("reject", check=True)


def test_the_pages_own_net_escapes_exactly_what_the_terminal_escapes(
    served: tuple[Specrun, WebView],
) -> None:
    """The page escapes again what the web process escaped: the same characters, the same
    escapes, checked over every code point."""
    _, web = served
    with browser() as context:
        page = open_page(context, web)
        in_page = page.evaluate(
            """() => {
                const out = [];
                for (let cp = 0; cp <= 0x10ffff; cp++) {
                    const c = String.fromCodePoint(cp);
                    const shown = visible(c);
                    if (shown !== c) out.push([cp, shown]);
                }
                return out;
            }"""
        )
    expected = []
    for cp in range(0x110000):
        shown = inert(chr(cp))
        if shown != chr(cp):
            expected.append([cp, shown])
    assert in_page == expected


def test_a_huge_diff_reaches_the_page_bounded_and_says_how_much_is_left_out(
    served: tuple[Specrun, WebView],
) -> None:
    specrun, _ = served
    head = f"created: long.log +{BIG_LINES} -0"
    with _completed_in_page(served, BIG, head) as (_, branch):
        shown = branch.locator(".files pre.diff span").count()
        note = branch.locator(".file .muted").last.text_content() or ""
        left_out = int(note.split("… and ")[1].split(" ")[0])
        (file,) = specrun.json("diff")["files"]
        assert file["diff"].count("\n") == BIG_LINES + 3  # the terminal has every line
        assert shown + left_out == BIG_LINES + 3
        assert shown < 10_000 and "`specrun diff` shows them all" in note
        specrun.run("reject", check=True)


def test_the_view_is_sent_a_bounded_diff() -> None:
    from coordinator.service.live.speculations import (
        VIEW_DIFF_CHARS,
        VIEW_FILE_CHARS,
        bounded_for_view,
    )
    from protocol.wire.control import FileChange, FileDiff

    line = "+" + "x" * 99 + "\n"
    files = tuple(FileDiff(FileChange(f"f{n}", "created"), line * 2000, added=2000)
                  for n in range(12))
    bounded = bounded_for_view(files)
    assert sum(len(f.diff) for f in bounded) <= VIEW_DIFF_CHARS
    assert all(len(f.diff) <= VIEW_FILE_CHARS and f.diff.endswith("\n") for f in bounded[:7])
    for before, after in zip(files, bounded, strict=True):
        assert before.diff.startswith(after.diff)
        assert after.diff.count("\n") + after.cut_lines == 2000
        assert after.added == 2000  # the counts are the whole file's
    assert bounded[-1].diff == "" and bounded[-1].cut_lines == 2000
    small = (FileDiff(FileChange("s", "created"), line),)
    assert bounded_for_view(small) == small


def test_a_file_the_person_changes_meanwhile_turns_into_a_conflict_in_the_page(
    served: tuple[Specrun, WebView],
) -> None:
    """Nothing of the speculation moves after it completed; the person edits two files it
    wrote. The page follows by itself: the tracked one makes Tab refuse all of it (as
    `specrun diff` says), the ignored one Tab would only leave as the person has it."""
    specrun, _ = served
    with _completed_in_page(served, MEANWHILE, "modified: build/stamp.txt") as (page, branch):
        assert branch.locator(".conflict").count() == 0
        (specrun.project / "README.md").write_text("# my own edit\n")
        (specrun.project / "build/stamp.txt").write_text("mine, rebuilt\n")
        page.wait_for_selector(".refusing", timeout=15_000)
        assert branch.locator(".refusing").text_content() == (
            "Tab would refuse all of it now: README.md changed in the project since the "
            "speculation read it")
        readme, stamp = branch.locator(".file").all()
        assert "Tab would refuse the whole accept" in (readme.text_content() or "")
        assert "Tab leaves the real file as it is" in (stamp.text_content() or "")
        assert stamp.locator(".conflict").count() == 0
        conflicts = {f["change"]["path"]: f["change"]["conflict"]
                     for f in specrun.json("diff")["files"]}
        assert conflicts == {"README.md": "modified", "build/stamp.txt": "modified"}
        specrun.run("reject", check=True)


def test_accept_takes_only_the_branch_the_page_showed(served: tuple[Specrun, WebView]) -> None:
    """A page that fell behind (a new suggestion came, the speculation was replaced) must
    not take what it never showed: it sends what it shows, the service checks."""
    import httpx

    specrun, web = served
    assert specrun.run("ask", f"go {TAKE}").returncode == 0
    assert wait_until(lambda: (specrun.json("suggestion").get("speculation") or {})
                      .get("status") == "completed", timeout=30)
    shown = specrun.json("suggestion")
    assert shown["text"] == TAKE
    spec_id = shown["speculation"]["id"]
    headers = {"cookie": web.cookie, "x-specrun-key": web.key, "origin": web.base,
               "content-type": "application/json"}

    def accept(body: str) -> httpx.Response:
        return httpx.post(web.base + "/api/accept", content=body, headers=headers, timeout=60)

    for stale in (f'{{"index": 0, "text": "{TAKE}", "speculation": "an-older-one"}}',
                  f'{{"index": 0, "text": "another suggestion", "speculation": "{spec_id}x"}}',
                  f'{{"index": 1, "text": "{TAKE}", "speculation": "{spec_id}"}}'):
        refused = accept(stale)
        assert refused.status_code == 404, refused.text
        assert "changed since it was shown: nothing was taken" in refused.json()["message"]
    assert not (specrun.project / "taken.txt").exists()
    assert specrun.json("suggestion")["speculation"]["id"] == spec_id  # still there
    taken = accept(f'{{"index": 0, "text": "{TAKE}", "speculation": "{spec_id}"}}')
    assert taken.status_code == 200 and taken.json()["ok"], taken.text
    assert (specrun.project / "taken.txt").read_text() == "taken\n", taken.json()
