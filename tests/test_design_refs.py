"""Every ``design §N`` cited in the code, tests and docs names a section of docs/design.md,
so a reader who follows a reference always lands on the rule it means."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITED = re.compile(r"design §(\d+)((?:,\s*§\d+)*)")
HEADING = re.compile(r"^## (\d+)\. ", re.MULTILINE)
SOURCES = ("coordinator", "worker", "overlay", "protocol", "tests", "scripts", "docs")


def cited_sections() -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    files = [ROOT / "README.md"]
    for top in SOURCES:
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in (".py", ".md")]
    for path in files:
        for match in CITED.finditer(path.read_text(encoding="utf-8")):
            numbers = [match.group(1), *re.findall(r"§(\d+)", match.group(2))]
            for number in numbers:
                found.setdefault(int(number), []).append(str(path.relative_to(ROOT)))
    return found


def test_every_design_reference_names_an_existing_section() -> None:
    sections = {int(n) for n in HEADING.findall((ROOT / "docs/design.md").read_text())}
    cited = cited_sections()
    assert len(cited) >= 5, "the code cites the design: the scan found too few references"
    missing = {n: where for n, where in cited.items() if n not in sections}
    assert not missing, f"cited sections missing from docs/design.md: {missing}"


def test_nothing_cites_a_document_outside_the_repository() -> None:
    for top in ("coordinator", "worker", "overlay", "protocol", "tests"):
        for path in (ROOT / top).rglob("*.py"):
            if path == Path(__file__).resolve():
                continue
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"SPEC ?§", text), f"{path} cites SPEC §, which is not in the repo"
