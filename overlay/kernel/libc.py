"""The one handle on the C library: the constants specrun passes it and typed wrappers.

Every call the ``os`` module lacks (``prctl``, ``mount``, ``unshare``, ``syncfs``, the
Landlock and ``openat2`` system calls through ``syscall(2)`` ...) goes through here, so the
handle is loaded once per process, a failure is always ``OSError`` with the kernel's errno,
and a system call's number is looked up in one table. The sandbox calls some of these in a
freshly cloned child, where every Python object touched costs a copied page: the wrappers
are thin, and what can be looked up is looked up once, at import.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

# prctl(2) options and arguments (linux/prctl.h, linux/securebits.h, linux/seccomp.h)
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2

# namespaces: clone(2), unshare(2), setns(2)
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MNT_DETACH = 2  # umount2(2)
RESOLVE_NO_SYMLINKS = 0x04  # openat2(2)
RESOLVE_BENEATH = 0x08

# System calls glibc has no wrapper for, by machine (the generic table is aarch64's).
_NUMBERS = {
    "x86_64": {"clone": 56, "pivot_root": 155, "openat2": 437},
    "aarch64": {"clone": 220, "pivot_root": 41, "openat2": 437},
}
_NUMBERS["amd64"] = _NUMBERS["x86_64"]
_NUMBERS["arm64"] = _NUMBERS["aarch64"]
_MACHINE = platform.machine()
_HERE = _NUMBERS.get(_MACHINE.lower(), {})
# Landlock's are the same on every architecture.
_LANDLOCK_CREATE_RULESET = 444
_LANDLOCK_ADD_RULE = 445
_LANDLOCK_RESTRICT_SELF = 446

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_syncfs = getattr(_libc, "syncfs", None)  # glibc >= 2.14, musl
_malloc_trim = getattr(_libc, "malloc_trim", None)  # glibc's; musl has none


def _check(result: int, what: str) -> int:
    """``result`` unless it is the C library's -1 (errno set): then an OSError naming ``what``."""
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what} failed: {os.strerror(err)}")
    return result


def _number(name: str) -> int:
    number = _HERE.get(name)
    if number is None:
        raise OSError(errno.ENOSYS, f"no {name}(2) number for {_MACHINE}")
    return number


def prctl(option: int, arg2: int = 0, arg3: int = 0, *, what: str = "prctl") -> None:
    _check(_libc.prctl(option, arg2, arg3, 0, 0), what)


def set_no_new_privs() -> None:
    """No exec can grant privileges from here on (required before an unprivileged
    seccomp filter or Landlock ruleset)."""
    prctl(PR_SET_NO_NEW_PRIVS, 1, what="prctl(PR_SET_NO_NEW_PRIVS)")


def set_seccomp_filter(program: ctypes.Structure) -> None:
    """Install the ``struct sock_fprog`` ``program`` on this thread and its children."""
    _check(
        _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0),
        "installing the seccomp filter",
    )


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    _check(
        _libc.mount(
            None if source is None else source.encode(),
            target.encode(),
            None if fstype is None else fstype.encode(),
            flags,
            None if data is None else data.encode(),
        ),
        f"mount {target}",
    )


def umount2(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def unshare(flags: int, *, what: str = "unshare") -> None:
    _check(_libc.unshare(flags), what)


def setns(fd: int, nstype: int, *, what: str = "setns") -> None:
    _check(_libc.setns(fd, nstype), what)


def pivot_root(new_root: str, put_old: str) -> None:
    _check(
        int(_libc.syscall(_number("pivot_root"), new_root.encode(), put_old.encode())),
        "pivot_root",
    )


def clone(flags: int) -> int:
    """fork(2) with ``flags`` (namespaces, the exit signal); 0 in the child."""
    return _check(
        int(_libc.syscall(_number("clone"), ctypes.c_ulong(flags), None, None, None, None)),
        "clone",
    )


class _Statfs(ctypes.Structure):
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 112)]


def statfs_type(path: str) -> int:
    """The magic number of the file system holding ``path`` (``statfs(2)``'s f_type)."""
    buf = _Statfs()
    _check(_libc.statfs(path.encode(), ctypes.byref(buf)), f"statfs {path}")
    return int(buf.f_type) & 0xFFFFFFFF


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


def openat2(dir_fd: int, path: str, flags: int, resolve: int) -> int:
    """``openat2(2)``: an fd for ``path`` below ``dir_fd``; ENOSYS where the kernel or the
    machine has none."""
    how = _OpenHow(flags, 0, resolve)
    fd = int(
        _libc.syscall(
            _number("openat2"),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(path)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return fd


def landlock_abi(version_flag: int) -> int:
    """``landlock_create_ruleset(NULL, 0, version_flag)``: the kernel's ABI version."""
    return _check(
        int(
            _libc.syscall(
                _LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(version_flag)
            )
        ),
        "landlock_create_ruleset",
    )


def landlock_create_ruleset(attr: ctypes.Structure, size: int) -> int:
    """A ruleset fd handling what ``attr`` (its first ``size`` bytes) names."""
    return _check(
        int(_libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)),
        "landlock_create_ruleset",
    )


def landlock_add_rule(ruleset_fd: int, rule_type: int, rule: ctypes.Structure, what: str) -> None:
    _check(
        int(_libc.syscall(_LANDLOCK_ADD_RULE, ruleset_fd, rule_type, ctypes.byref(rule), 0)),
        what,
    )


def landlock_restrict_self(ruleset_fd: int) -> None:
    _check(int(_libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0)), "landlock_restrict_self")


def has_syncfs() -> bool:
    return _syncfs is not None


def syncfs(fd: int, path: str) -> None:
    """Flush the whole file system holding ``fd`` (open on ``path``, named in the error)."""
    if _syncfs is None:
        raise OSError(errno.ENOSYS, "syncfs is not available")
    if _syncfs(ctypes.c_int(fd)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)


def malloc_trim() -> None:
    """Give the C heap's free pages back to the kernel; nothing where the C library has no
    ``malloc_trim`` (musl)."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def pidfd_open(pid: int) -> int | None:
    """A pidfd that becomes readable when ``pid`` exits; None if it is already gone."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None
