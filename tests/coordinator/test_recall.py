"""recall(): model selection over real HTTP (scripted model), validation, fallback, abort."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path
from typing import Any

import pytest

from coordinator.memory import AbortSignal, RecallResult, SideQueryModel, recall
from coordinator.memory.selector import (
    DESCRIPTION_MAX_CHARS,
    SELECTOR_SYSTEM_PROMPT,
    SelectorError,
    build_manifest,
    manifest_line,
    parse_selection,
)
from coordinator.memory.store import MemoryDoc
from protocol.model import ModelClient

from .test_memory_support import (
    Project,
    RecordingModel,
    make_project,
    manifest_of,
    recall_requests,
    recall_rule,
    run,
    scripted,
    with_client,
)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path)


async def do_recall(
    project: Project,
    model: SideQueryModel | None,
    query: str,
    *,
    excluded: tuple[str, ...] = (),
    abort: AbortSignal | asyncio.Event | None = None,
    ceiling_s: float = 30.0,
) -> RecallResult:
    return await recall(
        project.root,
        query,
        excluded,
        abort,
        model=model,
        model_name="fast-model",
        home=project.home,
        ceiling_s=ceiling_s,
    )


def test_model_selection_is_rendered(project: Project) -> None:
    deploy = project.paths["deploy"]
    with scripted(recall_rule("deploy", paths=[deploy])) as server:
        result = with_client(server, lambda c: do_recall(project, c, "deploy to staging?"))
    assert result.strategy == "model"
    assert [d.path for d in result.selected_docs] == [deploy]
    assert result.prompt.startswith("## Relevant memory")
    assert "### Deploy process (.specrun/memory/deploy.md)" in result.prompt
    assert "make deploy ENV=staging" in result.prompt


def test_selector_request_shape(project: Project) -> None:
    with scripted(recall_rule("deploy")) as server:
        with_client(server, lambda c: do_recall(project, c, "  deploy please "))
        [req] = recall_requests(server)
    body = req["body"]
    assert req["headers"].get("X-Specrun-Purpose") == "recall"
    assert body["model"] == "fast-model" and body["temperature"] == 0
    assert body["stream"] is False
    assert body["response_format"]["type"] == "json_schema"
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["selected_memories"]["maxItems"] == 5
    system, user = body["messages"]
    assert system == {"role": "system", "content": SELECTOR_SYSTEM_PROMPT}
    text = user["content"]
    head, listing = text.split("\n\nAvailable memories:\n")
    assert head == "Query: deploy please"
    lines = listing.splitlines()
    assert len(lines) == 4
    line = next(x for x in lines if project.paths["deploy"] in x)
    iso = dt.datetime.fromtimestamp(Path(project.paths["deploy"]).stat().st_mtime, dt.UTC)
    assert line == (
        f"- [project] {project.paths['deploy']} ({iso.isoformat(timespec='seconds')}): "
        "How the service is deployed to staging and production with make deploy"
    )


def test_selector_prompt_says_what_the_spec_asks() -> None:
    p = SELECTOR_SYSTEM_PROMPT.lower()
    for needle in (
        "coding assistant",
        "name",
        "description",
        "at most 5",
        "confident",
        "unsure",
        "leave it out",
        "no files",
        "selected_memories",
    ):
        assert needle in p, needle


def test_empty_selection_is_final(project: Project) -> None:
    with scripted(recall_rule("deploy", paths=[])) as server:
        result = with_client(server, lambda c: do_recall(project, c, "deploy to staging"))
    # lexical would have found the deploy memory; the model's "nothing" wins
    assert (result.strategy, result.prompt, result.selected_docs) == ("model", "", [])


@pytest.mark.parametrize(
    ("case", "rule_extra"),
    [
        ("http_500", {"fail": {"status": 500, "times": 5}}),
        ("bad_json", {"text": "I think deploy.md is relevant"}),
        ("wrong_shape", {"json": {"selected_memories": "deploy.md"}}),
        ("unknown_path", {"json": {"selected_memories": ["/nowhere/else.md"]}}),
        ("more_than_five", {"json": {"selected_memories": [f"/m/{i}.md" for i in range(6)]}}),
    ],
)
def test_selector_errors_fall_back_to_lexical(
    project: Project, case: str, rule_extra: dict[str, Any]
) -> None:
    with scripted(recall_rule("deploy", **rule_extra)) as server:
        result = with_client(server, lambda c: do_recall(project, c, "deploy to staging"))
        assert len(recall_requests(server)) == 1
    assert result.strategy == "lexical", case
    assert result.selected_docs[0].path == project.paths["deploy"]
    assert "### Deploy process" in result.prompt
    assert result.note


def test_more_than_five_known_paths_is_rejected(tmp_path: Path) -> None:
    topics = {f"t{i}": (f"Topic {i}", f"deploy note {i}", "body") for i in range(7)}
    project = make_project(tmp_path, topics)
    six = list(project.paths.values())[:6]
    with scripted(recall_rule("deploy", paths=six)) as server:
        result = with_client(server, lambda c: do_recall(project, c, "deploy"))
    assert result.strategy == "lexical" and len(result.selected_docs) == 5


def test_lexical_fallback_with_no_hit_is_empty(project: Project) -> None:
    rule = recall_rule("kubernetes", fail={"status": 503, "times": 5})
    with scripted(rule) as server:
        result = with_client(server, lambda c: do_recall(project, c, "kubernetes helm values"))
    assert (result.strategy, result.prompt, result.selected_docs) == ("lexical", "", [])


def test_unreachable_model_falls_back(project: Project) -> None:
    with scripted() as server:
        url = server.base_url

    async def main() -> RecallResult:
        client = ModelClient(url, max_retries=0, connect_timeout_s=1.0)
        try:
            return await do_recall(project, client, "how do we run pytest")
        finally:
            await client.aclose()

    result = run(main())
    assert result.strategy == "lexical"
    assert result.selected_docs[0].path == project.paths["testing"]


def test_safety_ceiling_falls_back_to_lexical(project: Project) -> None:
    rule = recall_rule("deploy", paths=[project.paths["style"]], latency_ms=2_000)

    async def main(client: ModelClient) -> tuple[RecallResult, float, RecordingModel]:
        model = RecordingModel(client)
        t0 = time.monotonic()
        result = await do_recall(project, model, "deploy", ceiling_s=0.2)
        return result, time.monotonic() - t0, model

    with scripted(rule) as server:
        result, elapsed, model = with_client(server, main)
    assert result.strategy == "lexical" and "ceiling" in result.note
    assert result.selected_docs[0].path == project.paths["deploy"]
    assert elapsed < 1.0 and model.outcomes == ["cancelled"]


def test_caller_abort_gives_empty_and_no_fallback(project: Project) -> None:
    rule = recall_rule("deploy", paths=[project.paths["deploy"]], latency_ms=2_000)

    async def scenario(client: ModelClient) -> tuple[RecallResult, float, RecordingModel]:
        model = RecordingModel(client)
        abort = AbortSignal()
        asyncio.get_running_loop().call_later(0.1, abort.abort, "user pressed Esc")
        t0 = time.monotonic()
        result = await do_recall(project, model, "deploy", abort=abort)
        return result, time.monotonic() - t0, model

    with scripted(rule) as server:
        result, elapsed, model = with_client(server, scenario)
    assert (result.strategy, result.prompt, result.selected_docs) == ("none", "", [])
    assert elapsed < 0.6 and model.outcomes == ["cancelled"]


def test_already_aborted_or_blank_or_nothing_left_makes_no_request(project: Project) -> None:

    async def main(client: ModelClient) -> list[RecallResult]:
        aborted = asyncio.Event()
        aborted.set()
        return [
            await do_recall(project, client, "deploy", abort=aborted),
            await do_recall(project, client, "   \n"),
            await do_recall(project, client, "deploy", excluded=tuple(project.paths.values())),
        ]

    with scripted(recall_rule("deploy")) as server:
        r1, r2, r3 = with_client(server, main)
        assert recall_requests(server) == []
    for r in (r1, r2, r3):
        assert (r.strategy, r.prompt) == ("none", "")
    assert r3.note == "no memories"


def test_excluded_paths_are_not_offered(project: Project) -> None:
    with scripted(recall_rule("deploy")) as server:
        with_client(
            server, lambda c: do_recall(project, c, "deploy", excluded=(project.paths["deploy"],))
        )
        [req] = recall_requests(server)
    assert project.paths["deploy"] not in manifest_of(req)
    assert project.paths["testing"] in manifest_of(req)


def test_no_model_means_lexical(project: Project) -> None:
    result = run(do_recall(project, None, "alembic migrations"))
    assert result.strategy == "lexical"
    assert result.selected_docs[0].path == project.paths["database"]


# --------------------------------------------------------------------------- manifest / parsing


def _doc(path: str, description: str, mtime: float = 0.0) -> MemoryDoc:
    return MemoryDoc(path, "n", description, "reference", mtime, "")


def test_manifest_budget_skips_an_overflowing_line_and_fits_later_ones() -> None:
    a = _doc("/m/a.md", "short a")
    big = _doc("/m/" + "b" * 300 + ".md", "x" * 500)
    c = _doc("/m/c.md", "short c")
    budget = len(manifest_line(a).encode()) + 1 + len(manifest_line(c).encode()) + 10
    text, listed = build_manifest([a, big, c], max_bytes=budget)
    assert listed == [a, c]
    assert text.splitlines() == [manifest_line(a), manifest_line(c)]
    assert len(text.encode()) <= budget


def test_manifest_budget_counts_utf8_bytes() -> None:
    cjk = _doc("/m/cjk.md", "部署" * 100)  # 600 bytes of description, 200 characters
    text, listed = build_manifest([cjk], max_bytes=len(manifest_line(cjk)) + 50)
    assert listed == [] and text == ""


def test_manifest_default_budget_is_25000_bytes() -> None:
    docs = [_doc(f"/m/{i:04d}.md", "d" * 400) for i in range(100)]
    text, listed = build_manifest(docs)
    assert len(text.encode()) <= 25_000 and 0 < len(listed) < 100


def test_description_is_cut_to_512_chars() -> None:
    line = manifest_line(_doc("/m/a.md", "y" * 2000))
    assert (
        "y" * (DESCRIPTION_MAX_CHARS - 1) + "…" in line and "y" * DESCRIPTION_MAX_CHARS not in line
    )


def test_parse_selection_rules() -> None:
    a, b = _doc("/m/a.md", "a"), _doc("/m/b.md", "b")
    assert parse_selection('{"selected_memories": ["/m/b.md", "/m/a.md"]}', [a, b]) == [b, a]
    assert parse_selection('```json\n{"selected_memories": []}\n```', [a]) == []
    assert parse_selection('{"selected_memories": ["/m/a.md", "/m/a.md"]}', [a]) == [a]
    for bad in (
        "",
        "[]",
        '{"other": []}',
        '{"selected_memories": [1]}',
        '{"selected_memories": ["/m/z.md"]}',
    ):
        with pytest.raises(SelectorError):
            parse_selection(bad, [a, b])
