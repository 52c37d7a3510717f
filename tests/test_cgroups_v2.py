"""The sandbox's cgroup on cgroup v2, on a hierarchy each test mounts itself (``cgroup_v2_kernel.py``).

cgroup v2 gives a cgroup's children no memory controller while the cgroup holds processes, and the
kernel is in its own cgroup: the kernel moves into a leaf beside its sandboxes' groups, enables the
controller for its cgroup's children, and puts both back when its last group is gone. It never changes
the hierarchy's root. Where memory is bound to cgroup v1 (these machines), hugetlb stands in for it
(see the support module and ``docs/actions.md``); the memory limit itself is checked on v2 only where
cgroup v2 has the memory controller.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("cgroup_v2_kernel.py")


def stand_in_kernel(scenario: str) -> dict:
    if os.geteuid() != 0:
        pytest.skip("mounting a cgroup2 hierarchy needs root (tests run as root here and in CI)")
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is missing: no private mount namespace for the test's cgroup2 mount")
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", sys.executable, str(CHILD), scenario],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    if "unavailable" in report:
        pytest.skip(report["unavailable"])
    assert report["root_restored"], report  # the test's own change to the root was undone
    return report


def test_the_kernel_moves_into_a_leaf_and_leaves_its_cgroup_as_found():
    r = stand_in_kernel("alone")
    sub = r["own_before"]
    assert r["group"] is not None, r["why"]
    # while a sandbox group lives: the kernel is in its leaf, the group beside it, the controller handed down
    assert r["own_during"] == f"{sub}/agio-kernel-{r['own_during'].rsplit('-', 1)[1]}"
    assert r["own_during"].rsplit("-", 1)[1].isdigit()
    group_name = r["group"].rsplit("/", 1)[1]
    assert r["group"] == f"{sub.lstrip('/')}/{group_name}" and group_name.startswith("agio-sandbox-")
    assert sorted(r["during"]["children"]) == sorted([r["own_during"].rsplit("/", 1)[1], group_name])
    assert r["controller"] in r["during"]["subtree_control"]
    assert r["controller"] in r["group_controllers"]
    if r["controller"] == "memory":
        assert r["memory.max"] == str(256 << 20)
        assert r["bound"] == "256 MiB for the whole sandbox (cgroup v2 memory limit)"
    # the last group gone: the kernel is back, its cgroup exactly as it was found
    assert r["own_after"] == sub
    assert r["after"] == r["before"] == {"subtree_control": [], "children": []}


def test_a_cgroup_shared_with_other_processes_is_left_alone_and_the_fallback_says_why():
    r = stand_in_kernel("shared")
    assert r["group"] is None
    assert r["own_during"] == r["own_after"] == r["own_before"]  # the kernel did not move
    assert r["during"] == r["after"] == r["before"] == {"subtree_control": [], "children": []}
    assert r["why"] == (
        f"cgroup v2: the kernel's cgroup {r['own_before']} holds 1 other process(es), and cgroup v2 gives no "
        f"{r['controller']} controller to the children of a cgroup that holds processes: start the kernel alone "
        "in a cgroup of its own (e.g. a kernelspec whose argv begins with systemd-run --user --scope -p "
        "Delegate=yes); "
        "cgroup v1: no v1 memory hierarchy holds this process")
    assert r["bound"] is None  # the toolkit then names the per-process bound, with this reason


def test_the_hierarchy_root_is_never_changed():
    r = stand_in_kernel("root")
    assert r["group"] == "None"
    assert r["after"] == r["before"]
    assert r["why"].startswith(f"cgroup v2: the {r['controller']} controller is not enabled for the children of "
                               "the cgroup v2 root, a host-wide setting agio leaves alone; ")


def test_memory_is_capped_for_the_whole_sandbox_on_cgroup_v2():
    """Where cgroup v2 has the memory controller: four 150 MiB processes under a 256 MiB cap."""
    r = stand_in_kernel("enforce")
    enforced = r["enforced"]
    assert "'killed'" in enforced["content"], enforced
    assert enforced["output"]["memory_kills"] >= 1
    assert "(cgroup v2 memory limit)" in enforced["output"]["memory_bound"]
    assert r["after"] == r["before"]


def test_a_cgroup_is_found_under_a_mount_of_part_of_the_hierarchy(tmp_path):
    """A cgroup namespace's or bind mount's root is not the hierarchy's: paths are taken relative to it."""
    from agio_notebook.core.mounts import parse_mountinfo
    from agio_notebook.toolkits.cgroups import _dir

    (tmp_path / "b" / "c").mkdir(parents=True)
    (mount,) = parse_mountinfo(f"41 31 0:38 /a {tmp_path} rw,relatime - cgroup2 cgroup2 rw\n")
    assert mount.root == "/a"
    assert _dir(mount, "/a/b/c") == tmp_path / "b" / "c"
    assert _dir(mount, "/a") == tmp_path
    assert _dir(mount, "/ab/c") is None and _dir(mount, "/b/c") is None  # outside the mounted part
