"""Shared fixtures: a kernelspec for this interpreter, and a notebook executed and saved once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from kernel_support import FAKE_KEY, KERNEL_NAME, install_kernelspec
from store_backends import BACKENDS, running_postgres, store_url as _store_url

ROOT = Path(__file__).resolve().parent.parent
collect_ignore_glob = ["fixtures/*"]  # notebooks executed by tests, not tests themselves



@pytest.fixture(autouse=True)
def explain_browser_timeouts(request):
    """A JupyterLab test's wait that times out says what the page showed, with a screenshot. (Not the
    actions' browser tests: their timeouts against hostile pages are expected.)"""
    name = request.module.__name__
    if not name.endswith(("_browser", "_lab", "_e2e")) or name.endswith("actions_browser"):
        yield
        return
    from lab_support import explained_timeouts
    with explained_timeouts(request.node.name):
        yield


_OWN_VARIABLES = ("AGIO_", "OPENAI_")


@pytest.fixture(autouse=True)
def _own_variables_restored():
    """The library's variables as they were before each test: an in-process ``%agio config --store`` (or a
    test that forgot) must not decide where the next test's store is."""
    before = {k: v for k, v in os.environ.items() if k.startswith(_OWN_VARIABLES)}
    yield
    for key in [k for k in os.environ if k.startswith(_OWN_VARIABLES) and k not in before]:
        del os.environ[key]
    os.environ.update(before)


@pytest.fixture(scope="session")
def kernelspec_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("jupyter")
    install_kernelspec(root)
    return root


@pytest.fixture
def lab_env(kernelspec_dir, tmp_path):
    """(root, env) for a JupyterLab of a browser test: this interpreter's kernelspec, a store under
    ``root``, and no model endpoint (offline)."""
    env = {**os.environ, "AGIO_STORE": str(tmp_path / "store")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    return tmp_path, env


@pytest.fixture(scope="session")
def saved_notebook(kernelspec_dir, tmp_path_factory) -> Path:
    """tests/fixtures/transcripts.ipynb executed in a real kernel and saved (with a key in the env)."""
    work = tmp_path_factory.mktemp("saved")
    nb = nbformat.read(ROOT / "tests" / "fixtures" / "transcripts.ipynb", as_version=4)
    saved_env = {k: os.environ.get(k) for k in ("AGIO_STORE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL")}
    os.environ.update({"AGIO_STORE": str(work / "store"), "OPENAI_API_KEY": FAKE_KEY})
    os.environ.pop("OPENAI_BASE_URL", None)
    try:
        # the key is set but the notebook's agents are scripted: nothing leaves the machine
        NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120,
                       resources={"metadata": {"path": str(work)}}).execute()
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    path = work / "saved_runs.ipynb"
    nbformat.write(nb, path)
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    shutil.copy(path, out / "saved_runs.ipynb")
    return path


@pytest.fixture(scope="session")
def postgres_server():
    """One real PostgreSQL server for the whole run; each test gets a database of its own."""
    with running_postgres() as server:
        yield server


@pytest.fixture(params=BACKENDS)
def store_url(request, tmp_path):
    """A new, empty store URL (or path), once per backend: TinyDB, SQLite, PostgreSQL."""
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    return _store_url(request.param, tmp_path, server)



# Files that start a local Ray cluster run one after another, on one worker: two clusters at once on a
# small machine starve each other's raylets.
RAY_FILES = {"test_ray_backend.py", "test_evaluate_backends.py", "test_provider_loops.py"}


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """With ``-n`` (pytest-xdist): a file's tests stay together on one worker, in order (a notebook's cells
    share its kernel; a module's JupyterLab or proxy starts once), and the Ray files share one worker."""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "ray" if Path(path).name in RAY_FILES else path

    return ByFile(config, log)
