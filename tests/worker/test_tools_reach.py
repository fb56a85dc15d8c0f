"""The read rule (worker/tools/reach.py) as every read tool sees it: a hostile repository
whose symlinks lead out of the project (absolute, relative, chains, a directory, through
/proc/self/root, into .specrun) and specrun's own state beside the user's files."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from overlay import Overlay
from overlay.kernel import beneath
from protocol.rules.tools import READ_TOOLS
from protocol.wire.boundary import BoundaryReason
from tests.worker.tool_calls import call, err, ok
from worker.gate import evaluate
from worker.tools import (
    TOOLS,
    DirectAccess,
    OverlayAccess,
    ToolContext,
    ToolStop,
    declared_paths,
)
from worker.tools.reach import Reach, read_boundary

SECRET = "SSH-KEY-MARKER-4e1d"
API_KEY = "APIKEY-MARKER-77c0"
SESSION = "SESSION-MARKER-1b9a"
MEMORY = "MEMORY-MARKER-c3f2"
MARKERS = (SECRET, API_KEY, SESSION, MEMORY)

# Every way out: where each link leads.
OUTWARD = {
    "deploy_key": "abs",  # absolute link to the key
    "rel_key": "../outside/id_rsa",
    "chain_a": "chain_b",  # a chain inside the project that ends outside
    "chain_b": "deploy_key",
    "vendor": "abs-dir",  # a symlinked directory outside
    "proc_key": "proc",  # through /proc/self/root
    "src/deep_key": "../../outside/id_rsa",
}
PRIVATE_LINKS = {"state_link": ".specrun/settings.json", "mem_link": "notes/mem"}


# Every test runs with ripgrep choosing the files and with the pure-Python walk.
pytestmark = pytest.mark.usefixtures("search_engine")


def hostile_tree(tmp: Path) -> tuple[Path, tuple[str, ...]]:
    """A project with links out, .specrun state and a memory directory inside it."""
    outside = tmp / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "id_rsa").write_text(f"-----BEGIN needle KEY-----\n{SECRET}\n")
    (outside / "dir" / "creds.txt").write_text(f"needle {SECRET}\n")
    root = tmp / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("needle = 1\n")
    (root / "inside_link.py").symlink_to("src/app.py")  # a link that stays inside is fine
    (root / ".specrun" / "sessions").mkdir(parents=True)
    (root / ".specrun" / "settings.json").write_text(f'{{"apiKey": "needle {API_KEY}"}}\n')
    (root / ".specrun" / "sessions" / "old.jsonl").write_text(f'{{"text": "needle {SESSION}"}}\n')
    (root / "notes" / "mem").mkdir(parents=True)
    (root / "notes" / "todo.md").write_text("needle todo\n")
    (root / "notes" / "mem" / "fact.md").write_text(f"---\nname: f\n---\nneedle {MEMORY}\n")
    for name, target in OUTWARD.items():
        if target == "abs":
            target = str(outside / "id_rsa")
        elif target == "abs-dir":
            target = str(outside / "dir")
        elif target == "proc":
            target = f"/proc/self/root{outside / 'id_rsa'}"
        (root / name).symlink_to(target)
    for name, target in PRIVATE_LINKS.items():
        (root / name).symlink_to(target)
    return root, (str(root / "notes" / "mem"),)


@pytest.fixture(params=["speculation", "main-unapproved", "main-approved"])
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> ToolContext:
    root, private = hostile_tree(tmp_path)
    if request.param == "speculation":
        overlay = Overlay(root, tmp_path / "ovl" / "1" / "spec")
        return ToolContext(access=OverlayAccess(overlay, private=private))
    contained = request.param == "main-unapproved"
    return ToolContext(access=DirectAccess(root, private=private, contained=contained))


def clean(text: str) -> None:
    for marker in MARKERS:
        assert marker not in text


# Walking calls of every read tool: none may show a byte behind a link out or of private
# state. A read tool added later must get its walking calls here (the next test says so).
WALKS: dict[str, list[dict[str, Any]]] = {
    "grep_search": [
        {"pattern": "needle"},
        {"pattern": "MARKER"},
        {"pattern": "needle", "include": "*"},
        {"pattern": "needle", "path": "notes"},
        {"pattern": "needle", "path": "src"},
    ],
    "glob": [{"pattern": "**/*"}, {"pattern": "**"}, {"pattern": "*"}, {"pattern": "notes/**"}],
    "list_directory": [{}, {"path": "notes"}, {"path": "src"}],
    "read_file": [{"file_path": "inside_link.py"}, {"file_path": "src/app.py"}],
}


def test_every_read_tool_has_walking_calls_here() -> None:
    registered = {tool.name for tool in TOOLS if tool.name in READ_TOOLS}
    assert registered == set(WALKS), "add the new read tool's calls to WALKS"


@pytest.mark.parametrize(("tool", "args"), [(t, a) for t, calls in WALKS.items() for a in calls])
def test_walks_never_show_what_is_behind_a_link_out_or_private_state(
    ctx: ToolContext, tool: str, args: dict[str, Any]
) -> None:
    result = call(ctx, tool, **args)
    assert result.error is None, result.error
    clean(result.output or "")


def test_grep_skips_and_names_every_outward_link(ctx: ToolContext) -> None:
    out = ok(ctx, "grep_search", pattern="needle")
    assert "src/app.py:1:needle = 1" in out
    assert "inside_link.py:1:needle = 1" in out  # a link inside the project is searched
    assert "notes/todo.md:1:needle todo" in out
    outward = sorted(OUTWARD)
    assert f"[Skipped {len(outward)} links that point outside the project: " in out
    named = out.split("point outside the project: ")[1].split("]")[0].split(", ")
    assert named == outward
    assert "[Skipped 2 links that point into specrun's own state: mem_link, state_link]" in out
    assert ".specrun" not in out.replace("state_link", "")  # the directory itself: silent
    assert "notes/mem" not in out


def test_include_names_only_the_links_it_would_have_searched(ctx: ToolContext) -> None:
    out = ok(ctx, "grep_search", pattern="needle", include="*_key")
    assert out.endswith(
        "[Skipped 4 links that point outside the project: deploy_key, proc_key, rel_key, "
        "src/deep_key]"
    )
    assert "Skipped" not in ok(ctx, "grep_search", pattern="needle", include="*.py")


def test_glob_names_matching_links_only(ctx: ToolContext) -> None:
    out = ok(ctx, "glob", pattern="**/*key")
    assert "No files match" in out
    assert out.endswith(
        "[Skipped 4 links that point outside the project: deploy_key, proc_key, rel_key, "
        "src/deep_key]"
    )
    assert "Skipped" not in ok(ctx, "glob", pattern="**/*.py")
    everything = ok(ctx, "glob", pattern="**/*")
    assert "notes/todo.md" in everything and "inside_link.py" in everything
    assert ".specrun" not in everything and "notes/mem/" not in everything


def test_list_directory_leaves_out_private_state_and_names_links_out(ctx: ToolContext) -> None:
    out = ok(ctx, "list_directory")
    assert ".specrun" not in out.splitlines()[1:-2]
    assert "src/" in out and "inside_link.py" in out
    assert "vendor" in out.splitlines()[-2]  # named as skipped, not listed as a directory
    assert "vendor/" not in out
    notes = ok(ctx, "list_directory", path="notes")
    assert notes == "Directory notes:\ntodo.md"


def _outside(tool: str) -> BoundaryReason:
    return BoundaryReason("read_outside_project", tool)


def _private(tool: str) -> BoundaryReason:
    return BoundaryReason("read_private", tool)


EXPLICIT = [
    ("read_file", {"file_path": "deploy_key"}, _outside("read_file")),
    ("read_file", {"file_path": "chain_a"}, _outside("read_file")),
    ("read_file", {"file_path": "proc_key"}, _outside("read_file")),
    ("read_file", {"file_path": "vendor/creds.txt"}, _outside("read_file")),
    ("read_file", {"file_path": ".specrun/settings.json"}, _private("read_file")),
    ("read_file", {"file_path": "state_link"}, _private("read_file")),
    ("read_file", {"file_path": "notes/mem/fact.md"}, _private("read_file")),
    ("grep_search", {"pattern": "needle", "path": "vendor"}, _outside("grep_search")),
    ("grep_search", {"pattern": "needle", "path": "rel_key"}, _outside("grep_search")),
    ("grep_search", {"pattern": "needle", "path": ".specrun"}, _private("grep_search")),
    ("grep_search", {"pattern": "needle", "path": "mem_link"}, _private("grep_search")),
    ("glob", {"pattern": "vendor/*"}, _outside("glob")),
    ("glob", {"pattern": ".specrun/**"}, _private("glob")),
    ("glob", {"pattern": "*", "path": "notes/mem"}, _private("glob")),
    ("list_directory", {"path": "vendor"}, _outside("list_directory")),
    ("list_directory", {"path": ".specrun/sessions"}, _private("list_directory")),
    ("list_directory", {"path": "notes/mem"}, _private("list_directory")),
]


@pytest.mark.parametrize(("tool", "args", "reason"), EXPLICIT)
def test_an_explicit_read_out_stops_unless_the_user_approved_it(
    ctx: ToolContext, tool: str, args: dict[str, Any], reason: BoundaryReason
) -> None:
    access = ctx.access
    if isinstance(access, DirectAccess) and access.reach.anywhere:
        # The user said yes to this very call: it runs (a walk still never follows a link out).
        result = call(ctx, tool, **args)
        assert result.error is None, result.error
        if "specrun" in str(args) or tool == "read_file":
            assert "No matches" not in (result.output or "")
            assert "No files match" not in (result.output or "")
            assert "is empty" not in (result.output or "")
        return
    with pytest.raises(ToolStop) as stopped:
        call(ctx, tool, **args)
    assert stopped.value.reason == reason
    # The gate (speculation) and the main chat's check say the same before the tool runs.
    private = tuple(p for p in access.reach.private if "notes" in p)
    assert read_boundary(tool, args, declared_paths(tool), access.root, private) == reason


def test_the_gate_stops_private_reads(tmp_path: Path) -> None:
    root, private = hostile_tree(tmp_path)
    overlay = Overlay(root, tmp_path / "ovl" / "1" / "spec")
    for tool, args, reason in EXPLICIT:
        decision = evaluate(tool, args, "default", overlay, private_paths=private)
        assert (decision.action, decision.reason) == ("boundary", reason)
    fine = evaluate("grep_search", {"pattern": "x"}, "default", overlay, private_paths=private)
    assert fine.action == "allow"


@pytest.mark.parametrize(
    "spelling", [".SPECRUN/settings.json", ".Specrun/sessions", ".specrun./settings.json",
                 "SPECRU~1/settings.json", "src/../.SpecRun"],
)
def test_the_state_directory_is_private_in_the_spellings_a_file_system_may_fold(
    tmp_path: Path, spelling: str
) -> None:
    """On a case-insensitive file system (a Windows drive under WSL, an SMB share)
    ``.SPECRUN/settings.json`` opens specrun's settings and their API key."""
    root, private = hostile_tree(tmp_path)
    overlay = Overlay(root, tmp_path / "ovl" / "1" / "spec")
    for tool, args in (("read_file", {"file_path": spelling}),
                       ("list_directory", {"path": spelling}),
                       ("grep_search", {"pattern": "x", "path": spelling})):
        decision = evaluate(tool, args, "default", overlay, private_paths=private)
        assert (decision.action, decision.reason) == ("boundary", _private(tool))
    assert Reach(root).is_private(os.path.normpath(root / spelling))


def test_a_link_swapped_in_after_the_check_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _private = hostile_tree(tmp_path)
    reach = Reach(root)
    secret = tmp_path / "outside" / "id_rsa"
    for without_openat2 in (False, True):
        if without_openat2:  # the per-component O_NOFOLLOW walk of kernels before 5.6
            monkeypatch.setattr(beneath, "_openat2_works", False)
        (root / "swap.txt").write_text("plain\n")
        assert reach.read_bytes(root / "swap.txt") == b"plain\n"
        # links that stay inside are followed, as a file or as a directory on the way
        assert reach.read_bytes(root / "inside_link.py") == b"needle = 1\n"
        (root / "src_link").symlink_to("src")
        assert reach.read_bytes(root / "src_link" / "app.py") == b"needle = 1\n"
        (root / "src_link").unlink()
        # checked as a plain file; now a link out stands there
        (root / "swap.txt").unlink()
        (root / "swap.txt").symlink_to(secret)
        # the resolved path is outside: refused
        with pytest.raises(OSError):
            reach.read_bytes(root / "swap.txt")
        # a directory on the way swapped for a link out: the open below the root refuses it
        (root / "sub").mkdir()
        (root / "sub" / "creds.txt").write_text("mine\n")
        assert reach.read_bytes(root / "sub" / "creds.txt") == b"mine\n"
        os.rename(root / "sub", root / "sub.old")
        (root / "sub").symlink_to(tmp_path / "outside" / "dir")
        with pytest.raises(OSError):
            beneath.open_beneath(str(root), "sub/creds.txt")
        with pytest.raises(OSError):
            reach.read_bytes(root / "sub" / "creds.txt")
        (root / "sub").unlink()
        os.rename(root / "sub.old", root / "sub")
        shutil.rmtree(root / "sub")
        (root / "swap.txt").unlink()


def test_a_memory_dir_that_holds_the_project_is_the_project(tmp_path: Path) -> None:
    root, _ = hostile_tree(tmp_path)
    reach = Reach(root, (str(root), str(tmp_path)))
    assert reach.place(root / "src" / "app.py") == "inside"
    assert reach.place(root / ".specrun" / "x") == "private"


def test_an_approved_read_outside_still_works_in_the_main_chat(tmp_path: Path) -> None:
    root, _ = hostile_tree(tmp_path)
    approved = ToolContext(access=DirectAccess(root, contained=False))
    assert SECRET in ok(approved, "read_file", file_path="deploy_key")
    unapproved = ToolContext(access=DirectAccess(root, contained=True))
    with pytest.raises(ToolStop):
        call(unapproved, "read_file", file_path="deploy_key")
    assert "not found" in err(approved, "read_file", file_path="missing").lower()


def test_a_fifo_in_the_tree_is_skipped_instead_of_hanging_the_search(tmp_path: Path) -> None:
    root, private = hostile_tree(tmp_path)
    os.mkfifo(root / "src" / "pipe")  # no writer: a blocking read would wait forever
    ctx = ToolContext(access=DirectAccess(root, private=private, contained=True))
    done: list[str] = []
    worker = threading.Thread(target=lambda: done.append(ok(ctx, "grep_search", pattern="needle")))
    worker.start()
    worker.join(timeout=60)
    assert done and "src/app.py:1:needle = 1" in done[0]
    assert "not a regular file" in err(ctx, "read_file", file_path="src/pipe")
