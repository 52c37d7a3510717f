"""A control group per sandbox, where this machine lets the kernel's user make one.

Why: rlimits are per process, so a sandbox of ``processes`` processes could hold ``processes`` times
``memory_bytes``.  A cgroup caps the memory (and the number of processes) of the whole sandbox, and
lets the kernel kill everything in it at once.

cgroup v2 first, else the v1 ``memory`` (and ``pids``) hierarchies, which root can use on hybrid
machines; either way the group sits below the kernel's own cgroup, so any limit set above still applies.

cgroup v2 lets a cgroup hand a controller such as memory to its children only while it holds no
process itself (the "no internal processes" rule), and the kernel is in its own cgroup.  So where
that cgroup is delegated to the kernel (memory in its ``cgroup.controllers``) and holds no other
process, the kernel moves itself into a leaf, ``agio-kernel-<pid>``, beside its sandboxes' groups, and
enables the controllers for its cgroup's children; when its last sandbox group is gone it disables
what it enabled and moves back, so the host is left as it was found.  It never changes the
hierarchy's root (a host-wide setting): there it uses the controllers the root already hands down.

When no group can be made (no root, no delegation, a read-only ``/sys/fs/cgroup``, a shared cgroup),
:func:`create` returns None, :func:`why_none` says why in one line, and the sandbox keeps to its
per-process rlimits; :func:`memory_bound` says which bound is in force.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import new_id
from ..core.mounts import Mount, mounts

# the controllers a sandbox's v2 group gets, the first one required
V2_CONTROLLERS: tuple[str, ...] = ("memory", "pids")


def _v2_limits(memory_bytes: int, processes: int) -> list[tuple[str, int, bool]]:
    """(file, value, required): each file belongs to the controller its name starts with."""
    return [("memory.max", memory_bytes, True), ("memory.swap.max", 0, False), ("pids.max", processes, False)]


def _mounts(kind: str) -> list[Mount]:
    return [m for m in mounts() if m.kind == kind]


def _own(controller: str | None) -> str | None:
    """This process's cgroup path for a v1 ``controller``, or the v2 path (controller None)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if (controller is None and names == "") or (controller is not None and controller in names.split(",")):
            return path
    return None


def _dir(mount: Mount, path: str) -> Path | None:
    """Where the cgroup ``path`` (as ``/proc/self/cgroup`` names it) is under ``mount``, if it shows there."""
    root = mount.root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    found = Path(mount.point) / path[len(root):].lstrip("/")
    return found if found.is_dir() else None


def _write(path: Path, value: str) -> str | None:
    """None when written, else why not."""
    try:
        path.write_text(value)
        return None
    except OSError as exc:
        return exc.strerror or str(exc)


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:  # refused while a process is still inside: then it stays
        pass


@dataclass
class SandboxGroup:
    """One sandbox's cgroup: ``dirs`` (one per v1 hierarchy, or the one v2 directory)."""

    version: int
    dirs: list[Path]
    memory_bytes: int

    @property
    def procs_files(self) -> list[str]:
        """What the launcher writes its own pid into before it starts anything."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    @property
    def bound(self) -> str:
        return f"{self.memory_bytes >> 20} MiB for the whole sandbox (cgroup v{self.version} memory limit)"

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.dirs[0] / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def oom_kills(self) -> int:
        """Processes the kernel killed for the group's memory limit so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.dirs[0] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill(self, timeout: float = 10.0) -> bool:
        """Kill every process in the group and wait until it is empty (True if it emptied)."""
        if self.version == 2:
            _write(self.dirs[0] / "cgroup.kill", "1")
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in pids:  # a process with SIGKILL pending cannot fork, so this converges
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.002)

    def remove(self) -> None:
        if self.kill():
            for d in self.dirs:
                _rmdir(d)
        if self.version == 2:
            _v2.release()


class _Delegation:
    """The kernel's v2 cgroup, made ready for sandbox groups while any exists, then put back as it was."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.parent: Path | None = None  # where the sandbox groups go: the kernel's (original) cgroup
        self.leaf: Path | None = None  # where the kernel moved, if it had to
        self.added: list[str] = []  # controllers this process enabled in the parent's subtree_control
        self.groups = 0

    def acquire(self) -> Path | str:
        """The directory to make a group in (held until :meth:`release`), or why there is none."""
        with self._lock:
            parent = self.parent or self._prepare()
            if isinstance(parent, Path):
                self.groups += 1
            return parent

    def release(self) -> None:
        """One group fewer; with the last, undo what :meth:`_prepare` changed."""
        with self._lock:
            self.groups = max(0, self.groups - 1)
            if not self.groups:
                self._undo()

    def _prepare(self) -> Path | str:
        own = _own(None)
        if own is None:
            return "this process is in no cgroup v2"
        parent = next((d for m in _mounts("cgroup2") if (d := _dir(m, own)) is not None), None)
        if parent is None:
            return f"no cgroup v2 hierarchy is mounted where this process's cgroup {own} shows"
        required = V2_CONTROLLERS[0]
        enabled = _words(parent / "cgroup.subtree_control")
        if required in enabled:  # handed down already (the root, or a cgroup set up for the kernel)
            self.parent = parent
            return parent
        available = _words(parent / "cgroup.controllers")
        if required not in available:
            return (f"the {required} controller is not available in {own} (not in its cgroup.controllers: "
                    "bound to a cgroup v1 hierarchy, or not delegated)")
        if not (parent / "cgroup.type").exists():
            return (f"the {required} controller is not enabled for the children of the cgroup v2 root, a "
                    "host-wide setting agio leaves alone")
        others = [p for p in _words(parent / "cgroup.procs") if p != str(os.getpid())]
        if others:
            return (f"the kernel's cgroup {own} holds {len(others)} other process(es), and cgroup v2 gives no "
                    f"{required} controller to the children of a cgroup that holds processes: start the kernel "
                    "alone in a cgroup of its own (e.g. a kernelspec whose argv begins with systemd-run "
                    "--user --scope -p Delegate=yes)")
        leaf = parent / f"agio-kernel-{os.getpid()}"
        try:
            leaf.mkdir(exist_ok=True)
        except OSError as exc:
            return f"cannot make a cgroup in {own} ({exc.strerror})"
        problem = _write(leaf / "cgroup.procs", str(os.getpid()))
        if problem is not None:
            _rmdir(leaf)
            return f"cannot move the kernel into a leaf of its cgroup {own} ({problem})"
        self.parent, self.leaf = parent, leaf
        for controller in (c for c in V2_CONTROLLERS if c in available and c not in enabled):
            problem = _write(parent / "cgroup.subtree_control", f"+{controller}")
            if problem is None:
                self.added.append(controller)
            elif controller == required:
                self._undo()
                return f"cannot enable the {required} controller for the children of {own} ({problem})"
        return parent

    def _undo(self) -> None:
        """Disable the controllers this process enabled, and move the kernel back (lock held)."""
        parent, leaf, added = self.parent, self.leaf, self.added
        self.parent, self.leaf, self.added = None, None, []
        if parent is None:
            return
        for controller in reversed(added):
            _write(parent / "cgroup.subtree_control", f"-{controller}")
        if leaf is not None:
            _write(parent / "cgroup.procs", str(os.getpid()))
            _rmdir(leaf)  # stays while a process the kernel started meanwhile is in it


_v2 = _Delegation()


def _make_v2(memory_bytes: int, processes: int, name: str) -> SandboxGroup | str:
    parent = _v2.acquire()
    if isinstance(parent, str):
        return parent
    group = parent / name
    try:
        group.mkdir()
    except OSError as exc:
        _v2.release()
        return f"cannot make a cgroup in {parent} ({exc.strerror})"
    enabled = _words(group / "cgroup.controllers")
    required = V2_CONTROLLERS[0]
    problem = None if required in enabled else f"the {required} controller did not reach the new group"
    for file, value, needed in _v2_limits(memory_bytes, processes):
        controller = file.split(".")[0]
        if problem is None and controller in enabled and controller in V2_CONTROLLERS:
            written = _write(group / file, str(value))
            if written is not None and needed:
                problem = f"cannot set {file} ({written})"
    if problem is not None:
        _rmdir(group)
        _v2.release()
        return problem
    return SandboxGroup(2, [group], memory_bytes)


def _make_v1(memory_bytes: int, processes: int, name: str) -> SandboxGroup | str:
    dirs: list[Path] = []
    problem = None
    for controller, files in (("memory", {"memory.limit_in_bytes": memory_bytes}), ("pids", {"pids.max": processes})):
        mount = next((m for m in _mounts("cgroup") if controller in m.options), None)
        own = _own(controller)
        parent = _dir(mount, own) if mount is not None and own is not None else None
        if parent is None:
            if controller == "memory":
                return "no v1 memory hierarchy holds this process"
            continue
        group = parent / name
        try:
            group.mkdir()
        except OSError as exc:
            problem = f"cannot make a cgroup in {parent} ({exc.strerror})"
            break
        dirs.append(group)
        problem = next((f"cannot set {f} ({w})" for f, v in files.items() if (w := _write(group / f, str(v)))), None)
        if problem is not None:
            break
        if controller == "memory":
            _write(group / "memory.memsw.limit_in_bytes", str(memory_bytes))
    else:
        return SandboxGroup(1, dirs, memory_bytes)
    for d in dirs:
        _rmdir(d)
    return problem or "no v1 memory group could be made"


def _remove_orphans(parent: Path) -> None:
    """Empty groups (and kernel leaves) left by a kernel that was killed before it could remove them."""
    try:
        entries = [*parent.glob("agio-sandbox-*"), *parent.glob("agio-kernel-*")]
    except OSError:
        return
    for group in entries:
        owner = group.name.split("-")[2]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            _rmdir(group)


_joinable: dict[int, bool] = {}


def _can_join(group: SandboxGroup) -> bool:
    """Can a process this user starts move itself into the group (what the sandbox's launcher does)?
    Making a group is not enough where the hierarchy is only partly delegated; tried once per version."""
    if group.version not in _joinable:
        import subprocess

        try:
            r = subprocess.run(["/bin/sh", "-c", 'for f in "$@"; do echo $$ > "$f" || exit 1; done', "sh",
                                *group.procs_files], capture_output=True, timeout=30)
            _joinable[group.version] = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _joinable[group.version] = False
    return _joinable[group.version]


_last_problem: list[str] = ["no sandbox cgroup was tried yet"]


def why_none() -> str:
    """Why the last :func:`create` made no group, in one line."""
    return _last_problem[0]


def create(memory_bytes: int, processes: int) -> SandboxGroup | None:
    """A new cgroup capping memory and processes, or None where this machine allows none (see :func:`why_none`)."""
    name = f"agio-sandbox-{os.getpid()}-{new_id()[:12]}"
    problems = []
    for version, make in ((2, _make_v2), (1, _make_v1)):
        group = make(memory_bytes, processes, name)
        if isinstance(group, str):
            problems.append(f"cgroup v{version}: {group}")
            continue
        for d in group.dirs:
            _remove_orphans(d.parent)
        if _can_join(group):
            return group
        group.remove()
        problems.append(f"cgroup v{version}: a process started here cannot join the group (a partly delegated "
                        "hierarchy)")
    _last_problem[0] = "; ".join(problems)
    return None


_probed: dict[str, str] = {}


def memory_bound(memory_bytes: int = 1 << 30) -> str | None:
    """Which memory bound a sandbox gets on this machine, in words, or None where it gets no cgroup
    (probed once, with a real group; :func:`why_none` then says why)."""
    if "kind" not in _probed:
        group = create(memory_bytes, 64)
        _probed["kind"] = f"cgroup v{group.version}" if group is not None else "rlimit"
        if group is not None:
            group.remove()
    if _probed["kind"] == "rlimit":
        return None
    return f"{memory_bytes >> 20} MiB for the whole sandbox ({_probed['kind']} memory limit)"
