"""Why a tool call needs a person's yes, in words a person reads: the shell classifier's
rule codes (``command:python``, ``git:commit``) become a sentence. The approval question
in the terminal and on the web page both show it."""

from __future__ import annotations


def shell_reason_in_words(rule: str) -> str:
    """The classifier's reason for a command that is not read-only, as a sentence."""
    if rule.startswith("it "):
        return rule  # already a clause (a protected write)
    if rule.startswith("command:"):
        name = rule.removeprefix("command:")
        return f"{name} is not one of the commands specrun knows to be read-only"
    if rule.startswith("git:"):
        return f"git {rule.removeprefix('git:').replace(':', ' ')} can change the repository"
    if ":" not in rule and " " in rule.strip():
        return rule  # already words
    return f"specrun could not prove this command read-only ({rule})"
