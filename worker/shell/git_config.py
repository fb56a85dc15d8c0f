"""Does a repository's own configuration make "read-only" git run programs? (issue 13)

``git status``, ``diff``, ``log -p``, ``blame``, ``grep``… run clean/smudge filters, textconv
and external diff drivers, ``core.fsmonitor``, a pager, gpg for signatures, and more, all named
by the repository's configuration (``.git/config`` and whatever it includes) together with its
attributes (``.gitattributes`` anywhere in the tree, ``.git/info/attributes``). A hostile
repository, or a speculation that managed to write those files, would turn a read-only git
command into "run anything". Two defences, both needed:

* :func:`git_config_hazard` reads those files (in the real tree and in the speculation's
  overlay, which mirrors project-relative paths) and names the first hazard; the caller refuses
  to run git unapproved when it returns one;
* read-only git always runs with :data:`HARDENED_GIT_ENV` and :data:`HARDENED_GIT_OPTIONS` (no
  system or global config, no fsmonitor, hooks, pager, external diff or textconv, no network),
  so configuration this reader does not understand cannot reach those programs either.

The reader fails closed: a config line it cannot parse, an unreadable file or directory are
hazards too. The size of the tree is not: :mod:`worker.shell.git_tree_scan` finds the ``.git``
entries and ``.gitattributes`` files, listing again only the directories that changed since
its last scan, and every file it finds is read on every check.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from worker.shell.classifier import classify
from worker.shell.git_tree_scan import git_entries

# Environment for every read-only git process (merge over a clean environment).
HARDENED_GIT_ENV: dict[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",  # no /etc/gitconfig
    "GIT_CONFIG_GLOBAL": "/dev/null",  # no ~/.gitconfig, no $XDG_CONFIG_HOME/git/config
    "GIT_ATTR_NOSYSTEM": "1",  # no system-wide attributes file
    "GIT_PAGER": "cat",  # beats core.pager and pager.<cmd>
    "PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",  # never ask for credentials
    "GIT_OPTIONAL_LOCKS": "0",  # git status must not rewrite the index
    "GIT_NO_LAZY_FETCH": "1",  # a partial clone must not fetch missing objects (git >= 2.44)
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_ALLOW_PROTOCOL": "",  # no transport at all, so no ssh, no remote helpers
}
# Environment variables to remove (not just override) before running read-only git: each makes
# git read config, an object store or a work tree from somewhere the hazard check did not look.
GIT_ENV_TO_REMOVE: tuple[str, ...] = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_SYSTEM", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR",
    "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_TRACE",
    "GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF", "GIT_TRACE_PACKET",
    "GIT_TRACE_PERFORMANCE", "GIT_TRACE_SETUP", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
    "GIT_PROXY_COMMAND", "GIT_ATTR_SOURCE", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS",
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PAGER_IN_USE", "LESSOPEN", "LESSCLOSE", "LD_PRELOAD",
    "LD_LIBRARY_PATH",
)
# Options placed right after "git" (before the subcommand).
HARDENED_GIT_OPTIONS: tuple[str, ...] = (
    "--no-pager",
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.pager=cat",
    "-c", "core.sshCommand=false",
    "-c", "core.untrackedCache=false",
    "-c", "credential.helper=",
    "-c", "log.showSignature=false",
    "-c", "protocol.allow=never",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)
# Options placed right after the subcommand, for the subcommands that accept them.
HARDENED_SUBCOMMAND_OPTIONS: dict[str, tuple[str, ...]] = {
    "diff": ("--no-ext-diff", "--no-textconv"),
    "log": ("--no-ext-diff", "--no-textconv"),
    "show": ("--no-ext-diff", "--no-textconv"),
    "blame": ("--no-textconv",),
    "grep": ("--no-textconv",),
}

_FALSE = frozenset({"false", "no", "off", "0", ""})
_SECTION_RE = re.compile(r'\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')
_KEY_RE = re.compile(r"([A-Za-z][A-Za-z0-9-]*)\s*(?:=(.*))?\Z", re.DOTALL)


def command_uses_git(command: str) -> bool:
    """True when ``command`` (classified read-only or not) runs ``git`` anywhere."""
    return classify(command).uses_git


def git_config_hazard(project_root: str, overlay_dir: str | None = None) -> str | None:
    """A short reason naming the first configuration hazard for read-only git, or None.

    ``project_root`` is the real project; ``overlay_dir`` (optional) is a speculation's overlay
    holding files at project-relative paths. Looked at: the repository that git would find
    from the project (the project itself or the nearest parent with ``.git``), every nested
    repository inside the project, their config files (``config``, ``config.worktree``, the
    common dir's ``config``, submodules' ``config`` under ``modules/``), ``info/attributes``
    and every ``.gitattributes`` in the tree and the overlay.
    """
    try:
        return _hazard(os.path.abspath(project_root), overlay_dir)
    except (OSError, ValueError, UnicodeError) as exc:
        return f"cannot check git configuration: {type(exc).__name__}"


def _hazard(root: str, overlay: str | None) -> str | None:
    roots = [root] + ([os.path.abspath(overlay)] if overlay else [])
    scanned = tuple(os.path.realpath(r) for r in roots)
    # Repository above the project (git searches upwards), with its attributes on the way.
    parent = root
    while not os.path.lexists(os.path.join(root, ".git")):
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
        problem = _attributes_file(os.path.join(parent, ".gitattributes"))
        if problem:
            return problem
        if os.path.lexists(os.path.join(parent, ".git")):
            problem = _repository(os.path.join(parent, ".git"), scanned)
            if problem:
                return problem
            break
    for base in roots:
        found = git_entries(base)
        for dotgit in found.repositories:
            problem = _repository(dotgit, scanned)
            if problem:
                return problem
        for path in found.attributes:
            problem = _attributes_file(path)
            if problem:
                return problem
    return None


def _repository(dotgit: str, scanned: tuple[str, ...]) -> str | None:
    """Check a ``.git`` directory (or ``gitdir:`` file) and everything it points to.
    ``scanned``: the trees whose attributes files are all read (real paths)."""
    gitdir = dotgit
    if os.path.isfile(dotgit):
        with open(dotgit, encoding="utf-8", errors="strict") as fh:
            line = fh.readline().strip()
        if not line.startswith("gitdir:"):
            return "git: .git file without gitdir"
        gitdir = os.path.join(os.path.dirname(dotgit), line[len("gitdir:"):].strip())
    if not os.path.isdir(gitdir):
        return None if not os.path.lexists(gitdir) else "git: odd .git entry"
    dirs = [gitdir]
    commondir = os.path.join(gitdir, "commondir")
    if os.path.isfile(commondir):
        with open(commondir, encoding="utf-8") as fh:
            dirs.append(os.path.join(gitdir, fh.read().strip()))
    for d in dirs:
        for name in _config_files(d):
            problem = _config_file(name, scanned)
            if problem:
                return problem
        problem = _attributes_file(os.path.join(d, "info", "attributes"))
        if problem:
            return problem
    return None


def _config_files(gitdir: str) -> Iterator[str]:
    """The repository's config files and those of its submodules and linked worktrees.
    Below ``modules/`` a submodule's name may hold slashes, so every directory is looked
    into, except, inside a repository directory (one with a ``HEAD``), anything but its own
    ``modules/`` and ``worktrees/``: a branch named ``config`` is a file
    ``refs/heads/config``, and the objects of every submodule are no config at all."""
    for name in ("config", "config.worktree"):
        yield os.path.join(gitdir, name)
    for sub in ("modules", "worktrees"):
        top = os.path.join(gitdir, sub)
        if os.path.isdir(top):
            for dirpath, dirs, files in os.walk(top):
                if "HEAD" in files:
                    dirs[:] = [d for d in dirs if d in ("modules", "worktrees")]
                for name in ("config", "config.worktree"):
                    if name in files:
                        yield os.path.join(dirpath, name)


def _config_file(path: str, scanned: tuple[str, ...]) -> str | None:
    if not os.path.lexists(path):
        return None
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        text = fh.read()
    for section, subsection, key, value in parse_git_config(text):
        if section == "core" and key == "worktree" and subsection is None and _inside(
            os.path.dirname(path), value, scanned
        ):
            continue
        problem = config_entry_hazard(section, subsection, key, value)
        if problem:
            return problem
    return None


def _inside(gitdir: str, value: str | None, scanned: tuple[str, ...]) -> bool:
    """Whether ``core.worktree`` (relative to the repository holding it) names a directory
    in a tree whose attributes files are all read. Git writes one into every submodule's
    ``.git/modules/<name>/config``, pointing at the submodule's directory in the project:
    that work tree is checked like the rest of the project. One that leads anywhere else
    would make git read attributes nobody checked."""
    if not value or not value.strip().strip('"'):
        return False
    target = os.path.realpath(os.path.join(gitdir, value.strip().strip('"')))
    return any(target == root or target.startswith(root + os.sep) for root in scanned)


def parse_git_config(text: str) -> Iterator[tuple[str, str | None, str, str | None]]:
    """(section, subsection, key, value) for each entry; raises ValueError on what it can't read.

    Section and key names are lower-cased (git compares them case-insensitively); the old
    ``[section.sub]`` form is split at its first dot and its subsection lower-cased. A value
    is returned raw (quotes kept), enough for the checks here; a line continuation joins lines.
    """
    section: str | None = None
    subsection: str | None = None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        while line.endswith("\\") and not line.endswith("\\\\") and i < len(lines):
            line = line[:-1] + lines[i]
            i += 1
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("["):
            m = _SECTION_RE.match(stripped)
            if m is None:
                raise ValueError(f"config section line {i}")
            rest = stripped[m.end():].strip()
            name = m.group(1).lower()
            subsection = m.group(2)
            if subsection is None and "." in name:
                name, subsection = name.split(".", 1)
            section = name
            if not rest or rest[0] in "#;":
                continue
            stripped = rest  # "[core] key = value" on one line
        m = _KEY_RE.match(stripped)
        if m is None or section is None:
            raise ValueError(f"config line {i}")
        value = m.group(2)
        yield section, subsection, m.group(1).lower(), None if value is None else value.strip()


def _bool_false(value: str | None) -> bool:
    if value is None:
        return False  # a bare key means true
    return value.strip().strip('"').strip().lower() in _FALSE


def config_entry_hazard(
    section: str, subsection: str | None, key: str, value: str | None
) -> str | None:
    """Why one config entry lets read-only git run a program or reach further, or None."""
    full = f"{section}.{subsection}.{key}" if subsection is not None else f"{section}.{key}"
    if section in ("include", "includeif"):
        return f"git config includes another file ({full})"
    if section == "alias":
        return f"git config defines {full}"
    if section == "filter" and key in ("clean", "smudge", "process"):
        return f"git config defines {full}"
    if section == "diff" and (key in ("textconv", "command") or (
        subsection is None and key == "external"
    )):
        return f"git config defines {full}"
    if section == "merge" and key == "driver":
        return f"git config defines {full}"
    if section == "core" and key == "fsmonitor" and not _bool_false(value):
        return f"git config defines {full}"
    if section == "core" and key in (
        "attributesfile", "sshcommand", "gitproxy", "pager", "askpass", "worktree",
        "alternaterefscommand",
    ):
        return f"git config defines {full}"
    if section == "pager":
        return f"git config defines {full}"
    if section == "gpg" and key == "program":
        return f"git config defines {full}"
    if section == "log" and key == "showsignature" and not _bool_false(value):
        return f"git config defines {full}"
    if section == "remote" and key in ("uploadpack", "receivepack", "vcs", "promisor"):
        return f"git config defines {full}"
    if section == "extensions" and key == "partialclone":
        return f"git config defines {full}"
    if section == "trailer" and key in ("command", "cmd"):
        return f"git config defines {full}"
    return None


# Keys read-only git never reaches (its options switch hooks, editors, helpers and
# transports off) but the person's own git commands do: a commit runs hooks and the editor, a
# push the credential helper and the transport, ``git submodule update`` a ``!command``.
_OWN_GIT_KEYS = {
    "core": ("hookspath", "editor"),
    "sequence": ("editor",),
    "credential": ("helper",),
    "mergetool": ("cmd",),
    "difftool": ("cmd",),
    "browser": ("cmd",),
    "sendemail": ("smtpserver", "tocmd", "cccmd", "headercmd"),
}
_URL_KEYS = frozenset({"url", "pushurl", "insteadof", "pushinsteadof"})


def config_entry_runs_program(
    section: str, subsection: str | None, key: str, value: str | None
) -> str | None:
    """Why one config entry makes the person's own git (hooks on, any command, outside
    any sandbox) run a program, or None: :func:`config_entry_hazard` and the keys read-only
    git switches off by its options (``core.hooksPath``, editors, credential helpers, an
    ``ext::`` transport, a submodule's ``!command`` update)."""
    problem = config_entry_hazard(section, subsection, key, value)
    if problem:
        return problem
    full = f"{section}.{subsection}.{key}" if subsection is not None else f"{section}.{key}"
    raw = (value or "").strip().strip('"').strip()
    if key in _OWN_GIT_KEYS.get(section, ()) and (section != "credential" or raw):
        return f"git config defines {full}"
    if section == "protocol" and key == "allow" and (
        subsection is None or subsection.lower() == "ext") and raw.lower() != "never":
        return f"git config defines {full}"
    if section == "submodule" and key == "update" and raw.startswith("!"):
        return f"git config defines {full}"
    if section in ("remote", "url") and key in _URL_KEYS and (
        raw.lower().startswith("ext::") or (section == "url" and (subsection or "").lower()
                                            .startswith("ext::"))):
        return f"git config defines {full}"
    return None


_ATTR_FILTER_RE = re.compile(r"(?:^|\s)(filter)=(\S+)")


def _attributes_file(path: str) -> str | None:
    """An attributes file that routes any path through a filter.

    A filter attribute names a program to run (clean on ``status``/``diff``, smudge on
    checkout) from whichever config defines it, so any ``filter=`` is a hazard, also in a
    ``[attr]`` macro. ``diff=``/``merge=`` only name drivers: without a ``textconv``,
    ``command`` or ``driver`` in some config (refused above; the global config is switched
    off) nothing runs, so they are fine.
    """
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        for number, line in enumerate(fh, 1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            for attr, name in _ATTR_FILTER_RE.findall(stripped):
                return f"{path}:{number} sets {attr}={name}"
    return None


__all__ = [
    "GIT_ENV_TO_REMOVE",
    "HARDENED_GIT_ENV",
    "HARDENED_GIT_OPTIONS",
    "HARDENED_SUBCOMMAND_OPTIONS",
    "command_uses_git",
    "config_entry_hazard",
    "config_entry_runs_program",
    "git_config_hazard",
    "parse_git_config",
]
