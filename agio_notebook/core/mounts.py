"""This process's mount table (``/proc/self/mountinfo``), read in one place.

The store asks which filesystem holds a journal (is its ``flock`` its own?); the sandbox asks where
the cgroup filesystems are mounted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mount:
    point: str  # where it is mounted (escapes such as ``\\040`` for a space undone)
    kind: str  # the filesystem type: ext4, nfs4, cgroup2, ...
    device: str  # "major:minor", as ``st_dev`` of a file on it reads
    options: frozenset[str]  # the filesystem's own (super block) options
    root: str = "/"  # which directory of the filesystem is mounted there (a bind or cgroup namespace: not "/")


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts in the text of a ``mountinfo`` file (see proc(5)); malformed lines are skipped."""
    found = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        point, root = (re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), f) for f in (fields[4], fields[3]))
        found.append(Mount(point, rfields[0], fields[2], frozenset(rfields[2].split(",")), root))
    return found


def mounts() -> list[Mount]:
    """This process's mounts; none where the system has no ``/proc/self/mountinfo``."""
    try:
        return parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return []
