"""A table in a doc that is made from the code: it sits between two marker comments, and
one command line prints it, checks the doc against it (exit 1 when stale) or rewrites it
(``--write``). docs/cli.md's command tables and docs/configuration.md's settings table
are made this way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GeneratedTable:
    doc: Path
    begin: str  # the marker comment the table follows
    end: str  # the marker comment that ends it
    make: Callable[[], str]  # the table as the code makes it now

    def with_table(self, text: str) -> str:
        """``text`` with what is between the markers replaced by the current table."""
        start, end = text.index(self.begin) + len(self.begin), text.index(self.end)
        return text[:start] + "\n" + self.make() + "\n" + text[end:]

    def main(self, args: Sequence[str]) -> int:
        """Rewrite the doc with ``--write``; otherwise print the table and return 1 if the
        doc's copy is stale."""
        text = self.doc.read_text(encoding="utf-8")
        fresh = self.with_table(text)
        if "--write" in args:
            self.doc.write_text(fresh, encoding="utf-8")
            return 0
        print(self.make())
        return 0 if fresh == text else 1
