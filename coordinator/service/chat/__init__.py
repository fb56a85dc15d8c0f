"""The main chat: a person's prompt through the model and tools, its history, compaction
and approvals."""
