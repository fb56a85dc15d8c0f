"""What the containment profile can enforce on this machine, found by using it.

The helper runs one real command (``true``) in the full profile at start; a layer that
fails to set up is reported inactive with the kernel's reason, and every command then
fails at the same layer (``ContainmentUnavailable``), so nothing runs with less. The
optional parts (Landlock TCP rules, Landlock scoping, a per-namespace pid cap) are
reported in the details: the other walls of their layer hold without them.
"""

from __future__ import annotations

import os
import platform

from protocol.wire.work import LayerName, LayerStatus
from worker.contain import cgroup, landlock, seccomp

LAYER_OF_STAGE: dict[str, LayerName] = {
    "namespaces": "filesystem",
    "filesystem": "filesystem",
    "limits": "limits",
    "privileges": "privileges",
    "landlock": "landlock",
    "seccomp": "seccomp",
    "exec": "filesystem",
    "network": "network",
}


def report(
    failed_stage: str | None,
    failure: str,
    pid_cap: bool,
    *,
    group: bool = False,
    userxattr: bool | None = None,
) -> tuple[LayerStatus, ...]:
    """The layer list for ``status``/``workers``, given where the probe failed (None: it
    ran), whether the kernel took a per-namespace pid cap, whether the speculation's
    commands share a control group, and whether the writable view's overlayfs takes
    ``userxattr`` (None: not tried)."""
    abi = landlock.abi()
    broken = LAYER_OF_STAGE.get(failed_stage or "", "filesystem") if failed_stage else None
    # A failure to create the namespaces takes the layers built on them along.
    namespace_failure = failed_stage == "namespaces"

    def status(name: LayerName, detail: str, needs_namespaces: bool = False) -> LayerStatus:
        if name == broken or (namespace_failure and needs_namespaces):
            return LayerStatus(name, False, f"unavailable: {failure}")
        return LayerStatus(name, True, detail)

    tcp = ", Landlock denies TCP bind/connect" if abi >= 4 else ""
    scope = ", Landlock scopes signals and abstract sockets" if abi >= 6 else ""
    pids = _process_cap(group=group, pid_cap=pid_cap)
    whole = cgroup.describe() if group else (
        "per-process limits only: no control group could be made"
    )
    writable = _writable_view(userxattr)
    # where the group bounds memory, an address-space cap is left off (limits.apply_rlimits)
    space = "" if group and cgroup.covers("memory") else "address space, "
    layers = [
        status(
            "filesystem",
            "private mount namespace: project read-only (speculation's writes on top), "
            "toolchain directories read-only, private /tmp, nothing else of the user"
            + writable,
            True,
        ),
        status(
            "network",
            f"a network namespace with no interface up (the speculation's own){tcp}",
            True,
        ),
        status(
            "ipc_signals",
            f"own PID and IPC namespaces, no unix socket can be created{scope}",
            True,
        ),
        status(
            "limits",
            f"per process: CPU, {space}file size, open files; {whole}; {pids}",
        ),
        status("privileges", "no capabilities, no_new_privs, nosuid mounts"),
        status("landlock", f"ABI {abi}: read/write/execute only beneath allowed paths")
        if abi > 0
        else LayerStatus("landlock", False, "unavailable: the kernel has no Landlock"),
        status("seccomp", f"filter for {platform.machine()}")
        if seccomp.supported()
        else LayerStatus("seccomp", False, f"unavailable: no filter for {platform.machine()}"),
    ]
    return tuple(layers)


def _process_cap(*, group: bool, pid_cap: bool) -> str:
    """What caps a command's live tasks here (root is not held by RLIMIT_NPROC)."""
    root = os.geteuid() == 0
    if group and cgroup.covers("pids"):
        return "live tasks: the group's pids.max"
    if pid_cap:
        return "live tasks: below the limit + 300 by a pid_max per PID namespace" + (
            " (RLIMIT_NPROC is not enforced for root)" if root else ", and RLIMIT_NPROC"
        )
    return "live tasks: RLIMIT_NPROC only" + (
        ", which the kernel does not enforce for root: NO process cap" if root else ""
    )


def _writable_view(userxattr: bool | None) -> str:
    """What speculateShell's writable view can do, given whether overlayfs took
    ``userxattr`` (None: not tried, nothing to say)."""
    if userxattr is True:
        return (
            "; speculateShell's writable view: overlayfs with userxattr (new directories "
            "rename, project directories delete; renaming a directory that was already in "
            "the project gives EXDEV)"
        )
    if userxattr is False:
        return (
            "; speculateShell's writable view: overlayfs WITHOUT userxattr (refused here: "
            "Linux < 5.11 or no user xattrs on the temp file system), so renaming a new "
            "directory gives EXDEV and deleting a project directory gives EIO"
        )
    return ""


def of_speculations(layers: tuple[LayerStatus, ...]) -> tuple[LayerStatus, ...]:
    """The layers of the profile a speculation's commands run in: all but the main chat's
    backstop (``chat_backstop``), which holds the main chat's own commands."""
    return tuple(layer for layer in layers if layer.name != "chat_backstop")


def all_active(layers: tuple[LayerStatus, ...]) -> bool:
    return bool(layers) and all(layer.active for layer in layers)
