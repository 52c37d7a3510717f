"""The tutorial notebooks (``pytest notebooks --nbval-lax``) run offline, each against a throwaway store of its
own, as a learner's first run would: an agent of one tutorial never shows up in another's frames.

It lives at the root, not in notebooks/, so the course's folder (JupyterLab's root in ``scripts/lab.sh``)
shows the tutorials and nothing else. It touches only notebook items; the tests in tests/ are left alone.
"""

import os
import shutil
import tempfile

import pytest

OFFLINE = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL")
_notebook = [None]
_scratch: list[str] = []
_before: dict[str, str | None] = {}  # the variables as they were before the notebook's first cell


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a notebook's kernel starts (its first cell's setup): offline, and a new, empty store."""
    if item.path.suffix != ".ipynb" or item.parent is _notebook[0]:
        return
    _notebook[0] = item.parent
    _before.update({name: os.environ.get(name) for name in (*OFFLINE, "AGIO_STORE")})
    for name in OFFLINE:
        os.environ.pop(name, None)
    scratch = tempfile.mkdtemp(prefix="agio-notebooks-")  # the store, and the tutorial's own store beside it
    _scratch.append(scratch)
    os.environ["AGIO_STORE"] = os.path.join(scratch, "store")


def pytest_runtest_teardown(item, nextitem):
    """After a notebook's last cell, the variables are as they were: a test file run next by the same
    worker must not find the tutorial's store."""
    if item.path.suffix != ".ipynb" or (nextitem is not None and nextitem.parent is item.parent):
        return
    _notebook[0] = None
    for name, value in _before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _before.clear()


def pytest_unconfigure(config):
    """The throwaway stores go when the run ends (their kernels are shut down by then)."""
    for scratch in _scratch:
        shutil.rmtree(scratch, ignore_errors=True)
