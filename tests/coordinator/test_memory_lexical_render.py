"""Lexical fallback ranking and the memory prompt rendering."""

from __future__ import annotations

import subprocess
import sys
import time

from hypothesis import given
from hypothesis import strategies as st

from coordinator.memory.lexical import lexical_rank, tokenize
from coordinator.memory.render import BODY_MAX_CHARS, age_label, render_memories
from coordinator.memory.store import MemoryDoc
from tests.support import REPO

DAY = 86_400.0
NOW = 1_750_000_000.0


def doc(
    name: str,
    description: str = "",
    body: str = "",
    *,
    age_days: float = 0.0,
    path: str | None = None,
) -> MemoryDoc:
    return MemoryDoc(
        path=path or f"/proj/.specrun/memory/{name.lower().replace(' ', '-')}.md",
        name=name,
        description=description or name,
        type="project",
        mtime=NOW - age_days * DAY,
        body=body,
        root="/proj/.specrun/memory",
    )


# --------------------------------------------------------------------------- tokenize


def test_tokenize_latin_lowercases_and_drops_stopwords() -> None:
    assert tokenize("How do I Deploy the API_server v2?") == ["deploy", "api", "server", "v2"]


def test_tokenize_cjk_unigrams_and_bigrams() -> None:
    assert tokenize("部署流程") == ["部", "署", "流", "程", "部署", "署流", "流程"]
    assert tokenize("run 测试 now") == ["run", "测", "试", "测试", "now"]
    assert tokenize("デプロイ") == ["デ", "プ", "ロ", "イ", "デプ", "プロ", "ロイ"]


def test_tokenize_other_scripts_are_words() -> None:
    assert tokenize("Развёртывание сервера") == ["развёртывание", "сервера"]


@given(st.text())
def test_tokenize_never_raises_and_is_lowercase(text: str) -> None:
    for token in tokenize(text):
        assert token and token == token.lower()


# --------------------------------------------------------------------------- lexical_rank


def test_no_lexical_hit_means_no_result() -> None:
    docs = [doc("Deploy", "how to deploy"), doc("Tests", "running the test suite")]
    assert lexical_rank("kubernetes helm chart", docs) == []
    assert lexical_rank("the of and", docs) == []  # stopwords only
    assert lexical_rank("   ", docs) == []


def test_ranking_prefers_the_better_match_and_drops_non_hits() -> None:
    docs = [
        doc("Deploy", "deploy to staging", "deploy with make deploy; staging first"),
        doc("Database", "migrations", "run alembic; deploy is unrelated"),
        doc("Style", "code style", "black and ruff"),
    ]
    ranked = lexical_rank("deploy staging", docs)
    assert [d.name for d in ranked] == ["Deploy", "Database"]


def test_ranking_limit_is_five() -> None:
    docs = [doc(f"Note {i}", "pytest fixture notes", path=f"/m/{i}.md") for i in range(8)]
    assert len(lexical_rank("pytest", docs)) == 5


def test_cjk_query_matches_cjk_doc() -> None:
    docs = [doc("部署", "如何部署到生产环境"), doc("测试", "如何运行测试")]
    assert [d.name for d in lexical_rank("生产部署", docs)] == ["部署"]


# --------------------------------------------------------------------------- render


def test_age_labels() -> None:
    assert age_label(NOW - 5, NOW) == "today"
    assert age_label(NOW - 1.5 * DAY, NOW) == "yesterday"
    assert age_label(NOW - 9.2 * DAY, NOW) == "9 days ago"
    assert age_label(NOW + 60, NOW) == "today"  # clock skew


def test_render_structure_and_staleness() -> None:
    fresh = doc("Deploy", "how we deploy", "make deploy", age_days=0.1)
    old = doc("Old API", "legacy endpoints", "GET /v1", age_days=3)
    text = render_memories([fresh, old], project_root="/proj", now=NOW)
    lines = text.splitlines()
    assert lines[0] == "## Relevant memory"
    assert "only when" in lines[2] and "check" in lines[2]
    assert "### Deploy (.specrun/memory/deploy.md)" in lines
    assert "### Old API (.specrun/memory/old-api.md)" in lines
    fresh_part, old_part = text.split("### Old API")
    assert "today" in fresh_part and "how we deploy" in fresh_part and "make deploy" in fresh_part
    assert "point-in-time" not in fresh_part
    assert "3 days ago" in old_part and "point-in-time" in old_part and "GET /v1" in old_part


def test_render_cuts_long_body_with_note() -> None:
    body = "a" * BODY_MAX_CHARS + "TAIL"
    text = render_memories([doc("Long", body=body)], now=NOW)
    assert "a" * BODY_MAX_CHARS in text and "TAIL" not in text
    assert "memory cut here: 4 more characters" in text
    short = render_memories([doc("Short", body="b" * BODY_MAX_CHARS)], now=NOW)
    assert "cut here" not in short


def test_render_user_memory_outside_project_uses_home_or_root(tmp_path: object) -> None:
    user_doc = MemoryDoc(
        "/home/u/.specrun/memories/tabs.md",
        "Tabs",
        "prefers tabs",
        "user",
        NOW,
        "tabs",
        "user",
        "/home/u/.specrun/memories",
    )
    text = render_memories([user_doc], project_root="/proj", home="/home/u", now=NOW)
    assert "### Tabs (~/.specrun/memories/tabs.md)" in text


def test_render_nothing_for_no_docs() -> None:
    assert render_memories([], now=time.time()) == ""


def test_the_service_starts_without_numpy() -> None:
    """rank_bm25 (and with it numpy, ~50 ms) loads only when the lexical fallback runs."""
    code = (
        "import sys\n"
        "import coordinator.service.service, coordinator.service.chat.main_chat\n"
        "import coordinator.service.speculation, coordinator.memory.recall\n"
        "import coordinator.memory.lexical\n"
        "assert 'numpy' not in sys.modules and 'rank_bm25' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)
