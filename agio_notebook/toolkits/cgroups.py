"""A control group per sandbox, where this machine lets the kernel's user make one.

Why: rlimits are per process, so a sandbox of ``processes`` processes could hold ``processes`` times
``memory_bytes``.  A cgroup caps the memory (and the number of processes) of the whole sandbox, and
lets the kernel kill everything in it at once.

The group is made below the kernel process's own cgroup (so any limit set above still applies):
cgroup v2 when its memory controller can be enabled there, else the v1 ``memory`` (and ``pids``)
hierarchies, which root can use on hybrid machines.  When neither can be made (no root, no
delegation, a read-only ``/sys/fs/cgroup``), :func:`create` returns None and the sandbox keeps to its
per-process rlimits; :func:`memory_bound` says which bound is in force.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import new_id
from ..core.mounts import mounts

RLIMIT_BOUND = "per-process address space (rlimit): no cgroup could be made here"


def _mounts() -> list[tuple[str, str, frozenset[str]]]:
    """(mount point, filesystem type, options) of every cgroup filesystem."""
    return [(m.point, m.kind, m.options) for m in mounts() if m.kind in ("cgroup", "cgroup2")]


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


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


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
                try:
                    d.rmdir()
                except OSError:
                    pass


def _make_v2(memory_bytes: int, processes: int, name: str) -> SandboxGroup | None:
    for mount, kind, _ in _mounts():
        own = _own(None)
        if kind != "cgroup2" or own is None:
            continue
        parent = Path(mount) / own.lstrip("/")
        group = parent / name
        try:
            group.mkdir()
        except OSError:
            return None
        controllers = lambda: (group / "cgroup.controllers").read_text().split()  # noqa: E731
        if "memory" not in controllers():
            _write(parent / "cgroup.subtree_control", "+memory +pids")
        if "memory" not in controllers() or not _write(group / "memory.max", str(memory_bytes)):
            group.rmdir()
            return None
        _write(group / "memory.swap.max", "0")
        if "pids" in controllers():
            _write(group / "pids.max", str(processes))
        return SandboxGroup(2, [group], memory_bytes)
    return None


def _make_v1(memory_bytes: int, processes: int, name: str) -> SandboxGroup | None:
    dirs: list[Path] = []
    for controller, files in (("memory", {"memory.limit_in_bytes": memory_bytes}), ("pids", {"pids.max": processes})):
        mount = next((m for m, kind, opts in _mounts() if kind == "cgroup" and controller in opts), None)
        own = _own(controller)
        if mount is None or own is None:
            if controller == "memory":
                return None
            continue
        group = Path(mount) / own.lstrip("/") / name
        try:
            group.mkdir()
        except OSError:
            break
        dirs.append(group)
        if not all(_write(group / f, str(v)) for f, v in files.items()):
            break
        if controller == "memory":
            _write(group / "memory.memsw.limit_in_bytes", str(memory_bytes))
    else:
        return SandboxGroup(1, dirs, memory_bytes)
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            pass
    return None


def _remove_orphans(parent: Path) -> None:
    """Empty groups left by a kernel that was killed before it could remove them."""
    try:
        entries = list(parent.glob("agio-sandbox-*"))
    except OSError:
        return
    for group in entries:
        owner = group.name.split("-")[2]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            try:
                group.rmdir()  # refused while a process is still inside: then it stays
            except OSError:
                pass


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


def create(memory_bytes: int, processes: int) -> SandboxGroup | None:
    """A new cgroup capping memory and processes, or None where this machine allows none."""
    name = f"agio-sandbox-{os.getpid()}-{new_id()[:12]}"
    group = _make_v2(memory_bytes, processes, name) or _make_v1(memory_bytes, processes, name)
    if group is None:
        return None
    for d in group.dirs:
        _remove_orphans(d.parent)
    if not _can_join(group):
        group.remove()
        return None
    return group


_probed: dict[str, str] = {}


def memory_bound(memory_bytes: int = 1 << 30) -> str:
    """Which memory bound a sandbox gets on this machine, in words (probed once, with a real group)."""
    if "kind" not in _probed:
        group = create(memory_bytes, 64)
        _probed["kind"] = f"cgroup v{group.version}" if group is not None else "rlimit"
        if group is not None:
            group.remove()
    if _probed["kind"] == "rlimit":
        return RLIMIT_BOUND
    return f"{memory_bytes >> 20} MiB for the whole sandbox ({_probed['kind']} memory limit)"
