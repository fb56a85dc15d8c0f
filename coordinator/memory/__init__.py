"""Memory: the on-disk store, recall (model selection with a lexical fallback) and the
asynchronous prefetch the main turn loop uses (design §7, seeds 000/001)."""

from .abort import AbortLike, AbortSignal
from .lexical import lexical_rank, tokenize
from .prefetch import (
    AbortReason,
    Consumption,
    MemoryPrefetcher,
    MemoryPrefetchHandle,
    PrefetchStats,
    RecallFn,
)
from .recall import EMPTY_RECALL, Recaller, RecallResult, RecallStrategy, recall
from .render import render_memories
from .selector import (
    SELECTOR_SYSTEM_PROMPT,
    SelectorError,
    SideQueryModel,
    build_manifest,
    parse_selection,
)
from .store import (
    MEMORY_TYPES,
    MemoryDoc,
    MemoryIndex,
    MemoryNotFound,
    MemoryScope,
    MemoryStore,
    MemoryType,
    project_memory_dir,
    read_index,
    user_memory_dir,
)

__all__ = [
    "EMPTY_RECALL",
    "MEMORY_TYPES",
    "SELECTOR_SYSTEM_PROMPT",
    "AbortLike",
    "AbortReason",
    "AbortSignal",
    "Consumption",
    "MemoryDoc",
    "MemoryIndex",
    "MemoryNotFound",
    "MemoryPrefetchHandle",
    "MemoryPrefetcher",
    "MemoryScope",
    "MemoryStore",
    "MemoryType",
    "PrefetchStats",
    "RecallFn",
    "RecallResult",
    "RecallStrategy",
    "Recaller",
    "SelectorError",
    "SideQueryModel",
    "build_manifest",
    "lexical_rank",
    "parse_selection",
    "project_memory_dir",
    "read_index",
    "recall",
    "render_memories",
    "tokenize",
    "user_memory_dir",
]
