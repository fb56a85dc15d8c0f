"""Lexical fallback ranking for recall: BM25 over name + description + body.

Used only when the model selector fails (error, validation error, safety ceiling). Documents
that share no term with the query get no score at all and are never returned, so a query about
something the memories do not mention returns nothing rather than the "least bad" documents.

Tokenization is CJK-aware: Chinese/Japanese/Korean runs have no spaces, so they become single
characters plus overlapping bigrams (bigrams carry most of the meaning and rank higher through
BM25's IDF); other scripts become lower-cased word tokens.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .store import MemoryDoc

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RE = re.compile(rf"[{_CJK}]")

# Words too common to count as a "hit" on their own.
# fmt: off
STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for", "from",
    "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "so", "that", "the",
    "this", "to", "was", "we", "what", "when", "where", "which", "who", "why", "will", "with",
    "you", "your",
))
# fmt: on


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; CJK runs as unigrams followed by their bigrams."""
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(text.lower()):
        run = match.group()
        if _CJK_RE.match(run):
            tokens.extend(run)
            tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
        elif run not in STOPWORDS:
            tokens.append(run)
    return tokens


def doc_text(doc: MemoryDoc) -> str:
    return f"{doc.name}\n{doc.description}\n{doc.body}"


def lexical_rank(query: str, docs: Sequence[MemoryDoc], limit: int = 5) -> list[MemoryDoc]:
    """The ≤ ``limit`` best documents for ``query`` by BM25, only those with a lexical hit."""
    terms = list(dict.fromkeys(tokenize(query)))  # unique, in order
    if not terms or not docs or limit <= 0:
        return []
    corpus = [tokenize(doc_text(d)) for d in docs]
    query_set = set(terms)
    hits = [i for i, toks in enumerate(corpus) if query_set.intersection(toks)]
    if not hits:
        return []
    # Imported here: rank_bm25 brings numpy (about 50 ms), and only a failed selector gets
    # this far; the service's start does not wait for it.
    from rank_bm25 import BM25Plus

    # BM25+ keeps every IDF positive, so a term present in most of a tiny corpus still counts
    # (plain Okapi gives it zero or a negative weight).
    scores = BM25Plus([toks or [""] for toks in corpus]).get_scores(terms)
    hits.sort(key=lambda i: (-float(scores[i]), -docs[i].mtime, docs[i].path))
    return [docs[i] for i in hits[:limit]]
