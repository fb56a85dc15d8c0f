"""Namespaces and the file system a contained command sees.

The sandbox helper enters a user namespace once (``enter_user_namespace``: our uid and
gid mapped to themselves, so files keep their owners and nothing is gained outside) and
prepares a root there (``prepare_root``): an empty tmpfs with

* read-only binds of the system's toolchain directories (``/usr``, ``/bin``, ``/lib*``,
  ``/opt``), never the user's home, ``/tmp``, ``/run`` or ``/var``;
* an ``/etc`` holding only what toolchains read (``ETC_ALLOWED``: users and groups, name
  resolution, the dynamic linker's cache, TLS certificates, alternatives, time zone,
  language runtimes' and tools' system configuration), each entry bound read-only, and
  within those only what every user may read: a file readable by root alone (a database's
  access rules, a key) is never there, whatever it is called;
* a minimal ``/dev`` (null, zero, full, random, urandom, a small ``shm``).

Each command then gets fresh mount, network, IPC, UTS and PID namespaces
(``unshare_command``) and, as pid 1 of its PID namespace, adds its own mounts and pivots
into the root (``enter_root``): a ``/proc`` of its PID namespace, a private tmpfs ``/tmp``
(a speculation's commands share one, with their ``HOME``: ``worker.contain.session``),
and the project at its own path — read-only always (contents and metadata), as an
overlayfs with the speculation's writes (and its carry layer) on top when there are any,
or writable into a capture directory (the opt-in ``speculateShell``, with ``.git`` bound
read-only);
``.specrun`` and a memory directory inside the project hidden under an empty tmpfs.

The runtime directory of the service (its sockets and pid file), other speculations'
overlays and the user's specrun state are simply not there.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from overlay.kernel import libc
from worker.contain.session import HOME as SESSION_HOME

_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_NOATIME = 1024
_MS_NODIRATIME = 2048
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_RELATIME = 1 << 21
# statvfs f_flag bit -> mount flag (a bind remount inside a user namespace must keep the
# flags the kernel locked on the original mount, or it is refused).
_LOCKED_FLAGS = (
    (os.ST_NOSUID, _MS_NOSUID),
    (os.ST_NODEV, _MS_NODEV),
    (os.ST_NOEXEC, _MS_NOEXEC),
    (os.ST_NOATIME, _MS_NOATIME),
    (os.ST_NODIRATIME, _MS_NODIRATIME),
    (os.ST_RELATIME, _MS_RELATIME),
)

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
# Secrets that live among the system files: hidden (an empty file or directory instead).
MASKED = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/security/opasswd",
)
# What of /etc a command sees (names or shell patterns, relative to /etc); the rest of
# /etc is not there. Within these, files and directories other users may not read are
# hidden too (``_etc``).
ETC_ALLOWED = (
    # users, groups and names
    "passwd", "group", "hosts", "hostname", "nsswitch.conf", "resolv.conf", "host.conf",
    "gai.conf", "services", "protocols", "networks", "ethertypes", "rpc", "netconfig",
    # the dynamic linker
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    # TLS trust
    "ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
    "pki/tls/certs", "pki/tls/openssl.cnf", "pki/ca-trust", "crypto-policies",
    # what programs look up
    "alternatives", "localtime", "timezone", "mime.types", "magic", "magic.mime",
    "locale.alias", "locale.conf", "default/locale", "environment", "terminfo", "inputrc",
    "os-release", "lsb-release", "debian_version", "redhat-release", "shells", "mtab",
    "xattr.conf", "fonts",
    # language runtimes and tools
    "python3", "python3.*", "pip.conf", "gitconfig", "npmrc", "java-*", "maven", "perl",
    "bash.bashrc", "profile", "wgetrc", "vimrc", "vim",
)
DEVICES = ("null", "zero", "full", "random", "urandom")
OVERLAYFS_MAGIC = 0x794C7630


class MountError(OSError):
    """The kernel refused a namespace or a mount."""


def enter_user_namespace() -> None:
    """Once per sandbox helper: a user namespace (our uid and gid mapped to themselves, so
    files keep their owners and nothing is gained outside) with a mount namespace of its
    own, where the helper prepares the commands' root. Single-threaded callers only."""
    uid, gid = os.geteuid(), os.getegid()
    libc.unshare(libc.CLONE_NEWUSER | libc.CLONE_NEWNS, what="unshare(user, mount)")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def empty_network_namespace() -> int:
    """A network namespace with no interface up, owned by the helper's user namespace,
    held open by the returned descriptor. The helper makes one and its commands join it
    (``setns``): creating and tearing down a namespace per command costs milliseconds,
    serialized in the kernel (a few ms here, spikes to 100 ms under load), and a
    command's processes never outlive it, so nothing passes from one command to the next."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(ready_r)
            os.close(done_w)
            try:
                libc.unshare(libc.CLONE_NEWNET)
            except OSError:
                code = 1
            os.write(ready_w, b"1" if code == 0 else b"0")
            os.read(done_r, 1)  # stay in it until the helper holds it open
        finally:
            os._exit(code)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"1":
            raise MountError(0, "unshare(network) failed")
        return os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready_r)
        os.close(done_w)
        os.waitpid(pid, 0)


def join_network_namespace(fd: int) -> None:
    libc.setns(fd, libc.CLONE_NEWNET, what="setns(network)")


def unshare_command(*, network: bool = True, pid: bool = True) -> None:
    """Per command: a mount namespace copied from the helper's (so its mounts stay its
    own), IPC and UTS namespaces, and unless a test switches them off, a network namespace
    (no interface up, not even loopback) and a PID namespace (for the next child)."""
    flags = libc.CLONE_NEWNS | libc.CLONE_NEWIPC | libc.CLONE_NEWUTS
    if network:
        flags |= libc.CLONE_NEWNET
    if pid:
        flags |= libc.CLONE_NEWPID
    libc.unshare(flags)


def _escape(path: str) -> str:
    """overlayfs option syntax: ``:`` separates layers and ``,`` options."""
    return path.replace("\\", "\\\\").replace(":", "\\:").replace(",", "\\,")


def has_entries(directory: str | os.PathLike[str] | None) -> bool:
    if directory is None:
        return False
    try:
        with os.scandir(directory) as entries:
            return any(True for _ in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False


def _locked_flags(path: str) -> int:
    info = os.statvfs(path)
    return sum(ms for st, ms in _LOCKED_FLAGS if info.f_flag & st)


def _bind(source: str, target: str, *, read_only: bool) -> None:
    libc.mount(source, target, None, _MS_BIND | _MS_REC, None)
    if read_only:
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _locked_flags(target)
        libc.mount(None, target, None, flags, None)


def bind_read_only(path: str) -> None:
    """``path`` (a file or a directory) bound read-only onto itself in the caller's mount
    namespace: a write, a rename onto it or an unlink of it fails there, nowhere else."""
    _bind(path, path, read_only=True)


def _unescape_mountinfo(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as three-digit octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def submounts_below(path: str) -> tuple[str, ...]:
    """Mount points strictly below ``path`` in this mount namespace."""
    prefix = path.rstrip("/") + "/"
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as info:
        points = [_unescape_mountinfo(line.split()[4]) for line in info]
    return tuple(p for p in points if p.startswith(prefix))


@dataclass(frozen=True)
class View:
    """What the command's file system holds. ``overlay_dir`` holds the speculation's
    writes (or None); with ``capture_upper``/``capture_work`` the project is writable and
    every write lands in ``capture_upper``."""

    project: str
    scratch: str
    overlay_dir: str | None = None
    capture_upper: str | None = None
    capture_work: str | None = None
    hidden: tuple[str, ...] = (".specrun",)
    # mount points below the project (each must be made read-only on its own)
    submounts: tuple[str, ...] = ()
    read_only_in_writable_view: tuple[str, ...] = (".git",)
    # host paths (directories or files) shown read-only at their own place: the toolchains
    # a command may run (``worker.contain.toolchains``)
    toolchains: tuple[str, ...] = ()
    # the writable view's overlayfs keeps its metadata in user.* xattrs (``userxattr``):
    # without it, in a user namespace, new directories cannot be renamed and project
    # directories cannot be deleted (``userxattr_supported`` decides, once per helper)
    userxattr: bool = True
    # the speculation's session (``worker.contain.session``): its carry layer (between the
    # overlay and the project), and its /tmp and HOME, bound instead of a fresh /tmp
    carry: str | None = None
    session_tmp: str | None = None
    session_home: str | None = None

    @property
    def writable(self) -> bool:
        return self.capture_upper is not None


def hidden_in_view(project: str, private: Iterable[str] = ()) -> tuple[str, ...]:
    """What the view hides under an empty directory: ``.specrun`` and every private
    directory (the memory directories) that lies inside the project, as resolved paths
    relative to it (a ``.specrun`` that is a link into the project hides its target)."""
    real = os.path.realpath(project)
    hidden = [".specrun"]
    for path in (os.path.join(real, ".specrun"), *private):
        target = os.path.realpath(os.path.join(real, path))
        if target.startswith(real.rstrip("/") + "/"):
            rel = os.path.relpath(target, real)
            if rel not in hidden:
                hidden.append(rel)
    return tuple(hidden)


def _mkdirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def _mount_project(view: View, target: str) -> None:
    lowers = [view.project]
    if has_entries(view.carry):
        assert view.carry is not None
        lowers.insert(0, view.carry)
    if has_entries(view.overlay_dir):
        assert view.overlay_dir is not None
        lowers.insert(0, view.overlay_dir)
    if view.writable:
        assert view.capture_upper is not None and view.capture_work is not None
        options = _writable_options(lowers, view.capture_upper, view.capture_work)
        if view.userxattr:
            options += ",userxattr"
        libc.mount("overlay", target, "overlay", _MS_NOSUID | _MS_NODEV, options)
        for rel in view.read_only_in_writable_view:
            inner = os.path.join(target, rel)
            if os.path.isdir(inner) and not os.path.islink(inner):
                _bind(inner, inner, read_only=True)
    elif len(lowers) > 1:
        options = f"lowerdir={':'.join(_escape(p) for p in lowers)}"
        if view.userxattr and has_entries(view.carry):  # its opaque directories' marks
            options += ",userxattr"
        libc.mount("overlay", target, "overlay", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, options)
    else:
        _bind(view.project, target, read_only=True)
        for point in view.submounts:
            inner = f"{target}{point[len(view.project):]}"
            flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _locked_flags(inner)
            libc.mount(None, inner, None, flags, None)
    for rel in view.hidden:
        inner = os.path.join(target, rel)
        if os.path.isdir(inner) and not os.path.islink(inner):
            _empty_dir_over(inner)


def _writable_options(lowers: list[str], upper: str, work: str) -> str:
    return (
        f"lowerdir={':'.join(_escape(p) for p in lowers)},"
        f"upperdir={_escape(upper)},workdir={_escape(work)}"
    )


def userxattr_supported(scratch: str) -> bool:
    """Can a writable overlayfs with ``userxattr`` be mounted here (Linux >= 5.11, and an
    upper file system that takes user.* xattrs)? Tried once, in the helper's own mount
    namespace, with throwaway directories under ``scratch`` (on the file system the capture
    directories live on); the caller removes ``scratch``."""
    dirs = {name: os.path.join(scratch, name) for name in ("lower", "upper", "work", "merged")}
    for path in dirs.values():
        _mkdirs(path)
    options = _writable_options([dirs["lower"]], dirs["upper"], dirs["work"]) + ",userxattr"
    try:
        libc.mount("overlay", dirs["merged"], "overlay", _MS_NOSUID | _MS_NODEV, options)
    except OSError:
        return False
    libc.umount2(dirs["merged"], libc.MNT_DETACH)
    return True


def _bind_toolchains(root: str, paths: Iterable[str]) -> None:
    """Each host path read-only, nosuid, at its own place; not recursive (a mount below
    one is not shown, so nothing under it stays writable)."""
    for path in paths:
        target = f"{root}{path}"
        if os.path.isdir(path):
            _mkdirs(target)
        else:
            _mkdirs(os.path.dirname(target))
            if not os.path.lexists(target):
                Path(target).touch()
        libc.mount(path, target, None, _MS_BIND, None)
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
        libc.mount(None, target, None, flags | _locked_flags(target), None)


def _empty_dir_over(path: str) -> None:
    libc.mount("tmpfs", path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "size=4k,mode=0755")


def _populate_dev(root: str) -> None:
    dev = f"{root}/dev"
    _mkdirs(dev)
    libc.mount("tmpfs", dev, "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=0755,size=64k")
    for name in DEVICES:
        target = f"{dev}/{name}"
        Path(target).touch()
        libc.mount(f"/dev/{name}", target, None, _MS_BIND, None)
    for name, link in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(link, f"{dev}/{name}")
    _mkdirs(f"{dev}/shm")
    libc.mount("tmpfs", f"{dev}/shm", "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=64m")
    libc.mount(None, dev, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC, None)


def _system_dirs(root: str, dirs: Iterable[str]) -> None:
    for path in dirs:
        if os.path.islink(path):
            os.symlink(os.readlink(path), f"{root}{path}")
        elif os.path.isdir(path):
            _mkdirs(f"{root}{path}")
            _bind(path, f"{root}{path}", read_only=True)


def _world_readable(info: os.stat_result) -> bool:
    need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(info.st_mode) else 0)
    return info.st_mode & need == need


def _etc_entries() -> list[str]:
    """The allowed entries that exist here (patterns expanded), relative to /etc."""
    found: list[str] = []
    for pattern in ETC_ALLOWED:
        parent, _, name = pattern.rpartition("/")
        directory = os.path.join("/etc", parent)
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        found += [os.path.join(parent, n) for n in names if fnmatch.fnmatchcase(n, name)]
    return found


def _etc(root: str) -> None:
    """``/etc`` inside ``root``: the allowed entries only, read-only, and within them
    nothing that other users may not read."""
    _mkdirs(f"{root}/etc")
    for rel in _etc_entries():
        source, target = f"/etc/{rel}", f"{root}/etc/{rel}"
        _mkdirs(os.path.dirname(target))
        info = os.lstat(source)
        if stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(source), target)
        elif not _world_readable(info):
            continue
        elif stat.S_ISDIR(info.st_mode):
            _mkdirs(target)
            _bind(source, target, read_only=True)
            _hide_private(root, source, target)
        elif stat.S_ISREG(info.st_mode):
            Path(target).touch()
            _bind(source, target, read_only=True)


def _hide_private(root: str, source: str, target: str) -> None:
    """Cover what other users may not read inside a bound directory of /etc."""
    for dirpath, dirnames, filenames in os.walk(source):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode) or _world_readable(info):
                continue
            inner = target + path[len(source):]
            if stat.S_ISDIR(info.st_mode):
                _empty_dir_over(inner)
                dirnames.remove(name)
            else:
                libc.mount(f"{root}/dev/null", inner, None, _MS_BIND, None)


def _mask(root: str, paths: Iterable[str]) -> None:
    for path in paths:
        inner = f"{root}{path}"
        if os.path.islink(inner) or not os.path.lexists(inner):
            continue
        if os.path.isdir(inner):
            _empty_dir_over(inner)
        else:
            libc.mount(f"{root}/dev/null", inner, None, _MS_BIND, None)


def _pivot(root: str) -> None:
    os.chdir(root)
    libc.pivot_root(".", ".")
    libc.umount2(".", libc.MNT_DETACH)
    os.chdir("/")


def prepare_root(mount_point: str, project: str) -> None:
    """Once per sandbox helper, in its own mount namespace: an empty tmpfs on
    ``mount_point`` with the system directories, ``/dev``, the masks and empty mount points
    for ``/proc``, ``/tmp`` and the project. Commands then only add their own mounts
    (``enter_root``). Calling it again for another project adds that project's mount point."""
    root = mount_point.rstrip("/")
    if not os.path.isdir(f"{root}/proc"):
        libc.mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
        libc.mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
        _system_dirs(root, [d for d in SYSTEM_DIRS if d != "/etc"])
        _populate_dev(root)
        _etc(root)
        _mask(root, MASKED)
        _mkdirs(f"{root}/proc")
        _mkdirs(f"{root}/tmp")
        _mkdirs(f"{root}{SESSION_HOME}")
    _mkdirs(f"{root}{project}")


def release_root(mount_point: str) -> None:
    """Undo ``prepare_root`` in the helper's namespace, so the (host) directory under it
    can be removed."""
    if os.path.isdir(os.path.join(mount_point, "proc")):
        libc.umount2(mount_point, libc.MNT_DETACH)


def enter_root(view: View, mount_point: str, tmp_bytes: int, *, proc: bool = True) -> None:
    """Per command, in a fresh mount namespace copied from the helper's prepared one (and,
    with ``proc``, as pid 1 of a new PID namespace): mount ``/proc``, a private ``/tmp`` and
    the project's view, make the root read-only, pivot into it."""
    root = mount_point.rstrip("/")
    if proc:
        libc.mount("proc", f"{root}/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None)
    else:  # a test without the PID layer: the helper's /proc
        _bind("/proc", f"{root}/proc", read_only=False)
    if view.session_tmp is not None and view.session_home is not None:
        # the speculation's own, kept from one command to the next (``session``)
        _bind(view.session_tmp, f"{root}/tmp", read_only=False)
        _bind(view.session_home, f"{root}{SESSION_HOME}", read_only=False)
    else:
        tmp_options = f"mode=1777,size={tmp_bytes}"
        libc.mount("tmpfs", f"{root}/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, tmp_options)
    _bind_toolchains(root, view.toolchains)  # before the project: never over its view
    # A project below /tmp needs its mount point again, inside this command's own /tmp.
    _mkdirs(f"{root}{view.project}")
    _mount_project(view, f"{root}{view.project}")
    libc.mount(None, root, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
    _pivot(root)


def is_overlayfs(path: str) -> bool:
    """True if ``path`` is on an overlayfs mount (the writable capture view)."""
    try:
        return libc.statfs_type(path) == OVERLAYFS_MAGIC
    except OSError:
        return False


def mount_capture_space(path: str, size_bytes: int, inodes: int) -> None:
    """A tmpfs on ``path`` (in the helper's mount namespace) that holds at most
    ``size_bytes`` and ``inodes``: a captured command's upper layer lives there, so what
    it writes can never take more of the host than the quota left."""
    options = f"size={max(size_bytes, 4096)},nr_inodes={max(inodes, 8)},mode=0700"
    libc.mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, options)


def detach(path: str) -> None:
    """Unmount ``path`` lazily: whoever still holds a descriptor inside it keeps it."""
    libc.umount2(path, libc.MNT_DETACH)
