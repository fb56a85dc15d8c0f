"""Which symlinks a speculation's commands made Tab may create in the real tree.

Tab never writes through a link (the apply checks every directory on a file's way), but a
link it creates stays: the person's next ``make``, ``pytest`` or editor writes through it,
unsandboxed, and a later speculation's file shows its target's content. So a link is applied
only when whatever is later done through it would have been allowed as a write of its own:

* its target is a relative path (an absolute one names a place outside the project as
  easily as inside it, and means another place on another machine);
* the target, resolved lexically against the link's own directory (``a/b -> ../c`` is
  ``c``), stays inside the project and is not the project root itself (``..`` escaping the
  project, or a link to the whole project that a tool then walks forever, are held back);
* neither the link's own path nor its resolved target is protected (``.git``, ``.specrun``,
  the ``protectedPaths`` setting: a link ``hooks -> .git/hooks`` turns a later write into a
  git hook) or runs later (``protocol.rules.runs_later``: a link at ``.envrc`` or to
  ``.github/workflows/`` is a change that runs without a key press);
* ``..`` only at the start of the target: the link's own directory and its parents are real
  directories (the apply checks them), so leading ``..`` climbs exactly as written; one
  after a name (``sub/../x``) climbs from wherever ``sub`` leads if it is a link of the
  project, which no lexical check sees;
* the target is not a directory that holds a runs-later or protected path
  (``ci -> .github``, and then ``ci/workflows/x.yml``);
* the target is a plain name: no control, bidi or invisible character, no NUL, not empty.

The check is lexical on purpose: it does not look at the real tree, whose symlinks came with
the project (a link to a directory that is itself an escaping link reaches nothing that
directory does not reach already). Whatever fails is held back and named, like build output
git ignores: the speculation's commands still saw it, Tab does not create it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from itertools import dropwhile

from protocol.rules.protected import protected_reason
from protocol.rules.runs_later import DEFAULT_RUNS_LATER, runs_later
from protocol.text.inert_text import find_hidden

#: Longest target Tab creates (Linux's own limit for a symlink's content is 4095 bytes).
MAX_TARGET_BYTES = 1024


def resolved_target(rel: str, target: str) -> str | None:
    """The project-relative path a link at ``rel`` pointing to ``target`` names, resolved
    lexically; None when it leaves the project, is the root itself, or is absolute."""
    if not target or target.startswith("/"):
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    if joined in (".", "") or joined == ".." or joined.startswith("../"):
        return None
    return joined


def link_problem(
    rel: str,
    target: str,
    protected: Sequence[str] = (),
    runs_later_paths: Sequence[str] = (),
) -> str | None:
    """Why Tab does not create the link ``rel -> target``, or None when it may.
    ``protected``: extra protected patterns (``protectedPaths`` and the memory directory);
    ``runs_later_paths``: the ``runsLaterPaths`` setting."""
    if not isinstance(target, str) or not target or "\x00" in target:
        return "its target is empty or not a name"
    if len(target.encode("utf-8", "surrogateescape")) > MAX_TARGET_BYTES:
        return "its target is too long"
    if find_hidden(target) is not None:
        return "its target holds a control, bidi or invisible character"
    if target.startswith("/"):
        return "its target is an absolute path"
    parts = target.split("/")
    climbs = len(parts) - len(list(dropwhile(lambda part: part == "..", parts)))
    if ".." in parts[climbs:]:
        return "its target climbs with .. after a name"
    resolved = resolved_target(rel, target)
    if resolved is None:
        return "its target leaves the project"
    if protected_reason(rel, protected) is not None:
        return "it is a protected path"
    if protected_reason(resolved, protected) is not None:
        return "its target is a protected path"
    if runs_later(rel, runs_later_paths):
        return "it is a path that runs later"
    if runs_later(resolved, runs_later_paths) or runs_later(resolved + "/", runs_later_paths):
        return "its target is a path that runs later"
    anchored = (*DEFAULT_RUNS_LATER, *runs_later_paths, *protected)
    if any(p.lstrip("/").startswith(resolved + "/") for p in anchored):
        return "its target is a directory that holds a path that runs later or is protected"
    return None
