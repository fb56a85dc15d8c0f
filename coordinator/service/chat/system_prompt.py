"""The main chat's system instruction (written for this project)."""

from __future__ import annotations

from pathlib import Path

BASE_INSTRUCTION = """\
You are a coding assistant working inside the project at {root}.
Use the tools to look before you change anything: read files, search, list
directories. Make the smallest change that does what the user asked, then say
briefly what you changed and how to check it. Paths are relative to the project
root. When a command or an edit needs the user's permission, the tool result
says so; do not try to work around a refusal."""


def build_system_prompt(project_root: Path, memory_index: str) -> str:
    text = BASE_INSTRUCTION.format(root=project_root)
    if memory_index.strip():
        text += "\n\n# Project memory index\n" + memory_index.strip()
    return text
