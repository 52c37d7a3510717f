"""The tutorial notebooks run offline, each against a throwaway store of its own (as a learner's first
run would: an agent of one tutorial never shows up in another's frames)."""

import os
import shutil
import tempfile

import pytest

for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
    os.environ.pop(name, None)
_notebook = [None]
_stores: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a notebook's kernel starts (its first cell's setup), give it a new, empty store."""
    if item.parent is not _notebook[0]:
        _notebook[0] = item.parent
        os.environ["AGIO_STORE"] = tempfile.mkdtemp(prefix="agio-notebooks-")
        _stores.append(os.environ["AGIO_STORE"])


def pytest_unconfigure(config):
    """The throwaway stores go when the run ends (their kernels are shut down by then)."""
    for store in _stores:
        shutil.rmtree(store, ignore_errors=True)
