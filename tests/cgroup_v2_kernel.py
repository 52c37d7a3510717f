"""A stand-in kernel on a cgroup v2 hierarchy of its own, for ``test_cgroups_v2.py``.

Run as root under ``unshare --mount --propagation private``: it hides the machine's cgroup mounts (in
its own mount namespace only), mounts ``cgroup2`` on a temporary directory, and plays a kernel whose
cgroup is delegated to it: a fresh cgroup ``T`` below the root holding this process alone (or with
another process, or the root itself). It then makes sandbox groups with ``toolkits.cgroups`` and
prints, as one JSON line, what it saw; everything it made is removed, and the root's
``subtree_control`` is put back as found, before it exits.

The controller that stands for memory is memory itself where cgroup v2 has it; where memory is bound
to a cgroup v1 hierarchy (these machines), hugetlb, the one controller free for v2 there: the same code
runs, but there is no memory limit to write or enforce. The JSON says which one ran.

argv: scenario (alone | shared | root | enforce)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from agio_notebook.core.mounts import mounts  # noqa: E402
from agio_notebook.toolkits import cgroups  # noqa: E402


def words(path: Path) -> list[str]:
    return path.read_text().split()


def own() -> str:
    return next(line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                if line.startswith("0::"))


def why_none() -> str | None:
    return cgroups.why_none() if hasattr(cgroups, "why_none") else None  # (also reports on older versions)


def join(group: Path, pid: int | None = None) -> None:
    (group / "cgroup.procs").write_text(str(pid or os.getpid()))


def snapshot(d: Path) -> dict[str, object]:
    return {"subtree_control": words(d / "cgroup.subtree_control"),
            "children": sorted(p.name for p in d.iterdir() if p.is_dir())}


def main(scenario: str) -> dict[str, object]:
    for m in sorted((m for m in mounts() if m.kind in ("cgroup", "cgroup2")), key=lambda m: -len(m.point)):
        subprocess.run(["umount", "-l", m.point], check=True)  # this mount namespace only
    top = Path(tempfile.mkdtemp(prefix="agio-cgroup2-"))
    mounted = subprocess.run(["mount", "-t", "cgroup2", "none", str(top)], capture_output=True, text=True)
    if mounted.returncode != 0:
        top.rmdir()
        return {"unavailable": f"mount -t cgroup2 failed: {mounted.stderr.strip()}"}
    try:
        return scenario_on(top, scenario)
    finally:
        subprocess.run(["umount", str(top)])
        top.rmdir()


def scenario_on(top: Path, scenario: str) -> dict[str, object]:
    free = words(top / "cgroup.controllers")
    controller = "memory" if "memory" in free else "hugetlb" if "hugetlb" in free else None
    if controller is None:
        return {"unavailable": f"no controller is free for cgroup v2 here (the root offers {free or 'none'})"}
    if scenario == "enforce" and controller != "memory":
        return {"unavailable": "the memory controller is bound to a cgroup v1 hierarchy here, so cgroup v2 "
                               "cannot enforce a memory limit on this machine"}
    cgroups.V2_CONTROLLERS = (controller,) if controller != "memory" else cgroups.V2_CONTROLLERS
    report: dict[str, object] = {"controller": controller}
    root_found = words(top / "cgroup.subtree_control")
    sub = top / f"agio-test-{os.getpid()}"
    others: list[subprocess.Popen[bytes]] = []
    try:
        if scenario == "root":
            report["before"] = snapshot(top)
            report["group"] = str(cgroups.create(64 << 20, 16))
            report["why"] = why_none()
            report["after"] = snapshot(top)
            return report
        if controller not in root_found:  # hand the controller down to the test's sub-tree; undone below
            (top / "cgroup.subtree_control").write_text(f"+{controller}")
        sub.mkdir()
        join(sub)
        if scenario == "shared":
            others.append(subprocess.Popen(["sleep", "600"]))
            join(sub, others[0].pid)
        report["own_before"] = own()
        report["before"] = snapshot(sub)
        group = cgroups.create(256 << 20, 16)
        report["why"] = why_none()
        report["own_during"] = own()
        report["during"] = snapshot(sub)
        if group is not None:
            report["group"] = str(group.dirs[0].relative_to(top))
            report["group_controllers"] = words(group.dirs[0] / "cgroup.controllers")
            if controller == "memory":
                report["memory.max"] = (group.dirs[0] / "memory.max").read_text().strip()
            report["bound"] = cgroups.memory_bound(256 << 20)
            if scenario == "enforce":
                report["enforced"] = enforce()
            group.remove()
        else:
            report["group"] = None
            report["bound"] = cgroups.memory_bound(256 << 20)
        report["own_after"] = own()
        report["after"] = snapshot(sub)
        return report
    finally:
        for p in others:
            p.kill()
            p.wait()
        join(top)
        if sub.is_dir():
            for d in sorted(sub.rglob("*"), key=lambda p: -len(p.parts)):
                if d.is_dir():
                    d.rmdir()
            sub.rmdir()
        if controller not in root_found:
            (top / "cgroup.subtree_control").write_text(f"-{controller}")
        report["root_restored"] = words(top / "cgroup.subtree_control") == root_found


HOGS = """import os, time
pids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        block = b'x' * (150 << 20)
        time.sleep(3)
        os._exit(0)
    pids.append(pid)
[('killed' if os.WIFSIGNALED(os.waitpid(p, 0)[1]) else 'ok') for p in pids]
"""


def enforce() -> dict[str, object]:
    """Four processes of 150 MiB under a 256 MiB cap for the whole sandbox (each under its own rlimit)."""
    from agio_notebook.storage import InMemoryRepository
    from agio_notebook.toolkits import SandboxLimits, python_sandbox
    from agio_notebook.toolkits.sandbox import pool

    from actions_support import one_tool_step

    os.environ["AGIO_WORKSPACES"] = tempfile.mkdtemp(prefix="agio-cgroup2-ws-")
    tools = python_sandbox(limits=SandboxLimits(timeout=60, memory_bytes=256 << 20))
    step = one_tool_step(InMemoryRepository(), "v2", tools, "run_python", code=HOGS)
    pool.close_all()
    return {"content": step.content, "output": step.extra["actions"][0]["output"]}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
