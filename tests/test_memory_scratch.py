"""The memory index of a store with no directory of its own (in memory, PostgreSQL) leaves nothing in
TMPDIR: not while it lives, not when it is dropped, not when its process exits or is killed (as a
notebook runner kills its kernels), however many such stores a kernel makes."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import tempfile
import weakref

import pytest

from agio_notebook import memory
from agio_notebook.memory.store import memory_for
from agio_notebook.storage import InMemoryRepository


@pytest.fixture
def tmpdir_(tmp_path, monkeypatch):
    """A private TMPDIR, for this process (tempfile) and the processes it starts."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def in_memory_store_with_memory() -> tuple[InMemoryRepository, object]:
    repo = InMemoryRepository()
    memory.add_skill("sums", "Answer sums with digits.", repository=repo)
    store = memory_for(repo)
    assert [key for key, _ in store.index.search("sums digits", "skill", ("global",), 3)]  # indexed, and found
    return repo, store


def test_a_kernel_making_in_memory_stores_all_day_leaves_nothing(tmpdir_):
    indexes = []
    for _ in range(12):
        repo, store = in_memory_store_with_memory()
        indexes.append(weakref.ref(store.index))
        del repo, store
    assert list(tmpdir_.iterdir()) == []
    gc.collect()  # the store and its journal refer to each other: a cycle, freed by the collector
    assert [ref for ref in indexes if ref() is not None] == []  # and the indexes with them


def test_the_index_still_answers_after_a_change_and_a_close(tmpdir_):
    repo, store = in_memory_store_with_memory()
    memory.add_skill("owls", "Owls hunt at night.", repository=repo)
    assert [k for k, _ in store.index.search("owls night", "skill", ("global",), 3)] == \
        [s.id for s in memory.skills(repository=repo).itertuples() if s.name == "owls"]
    store.close()
    assert list(tmpdir_.iterdir()) == []


KILLED = """
import os, signal
from agio_notebook import memory
from agio_notebook.storage import InMemoryRepository
repo = InMemoryRepository()
memory.add_skill("sums", "Answer sums with digits.", repository=repo)
assert memory.skills(repository=repo).name.tolist() == ["sums"]
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_process_leaves_nothing(tmpdir_):
    r = subprocess.run([sys.executable, "-c", KILLED], capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert list(tmpdir_.iterdir()) == []
