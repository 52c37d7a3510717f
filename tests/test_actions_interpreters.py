"""The sandbox runs wherever Python is installed: a venv under /tmp (hidden by the sandbox's private
/tmp if it were mounted after the binds), under $HOME, under /opt, reached through a symlink; the
system interpreter; a standalone (conda-style) prefix.  Each runs the real ``run_python`` tool through
real bubblewrap from that interpreter; and when the interpreter cannot be found, the message says so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest

from agio_notebook.toolkits import sandbox

ROOT = Path(__file__).resolve().parent.parent

DRIVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from actions_support import one_tool_step
from agio_notebook.storage import TinyDBRepository
from agio_notebook.toolkits import python_sandbox
from agio_notebook.toolkits.sandbox import pool

repo = TinyDBRepository(sys.argv[2])
step = one_tool_step(repo, "s", python_sandbox(), "run_python",
                     code="import sys, os; print(sys.executable); open('made-here.txt', 'w').write('x'); 6 * 7")
pool.close_all()
print(json.dumps({"status": step.status, "content": step.content, "executable": sys.executable}))
"""


def run_tool_with(python: str, tmp_path: Path) -> dict:
    """Run the sandboxed tool from ``python`` (a fresh process), with this checkout and its packages."""
    env = dict(os.environ, AGIO_WORKSPACES=str(tmp_path / "ws"),
               PYTHONPATH=os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]]))
    r = subprocess.run([python, "-c", DRIVER, str(ROOT / "tests"), str(tmp_path / "store")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def assert_ran_in_sandbox(result: dict, python: str) -> None:
    assert result["status"] == "ok", result["content"]
    assert result["content"].startswith("[sandbox: bubblewrap"), result["content"]
    assert "[value] 42" in result["content"], result["content"]
    assert result["executable"] == python  # the interpreter under test ran the tool, not another one
    assert python in result["content"]  # ... and the sandboxed code ran in that interpreter too


def make_venv(where: Path) -> str:
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", "--system-site-packages", str(where)], check=True,
                   timeout=120)
    return str(where / "bin" / "python")


@pytest.fixture
def scratch():
    made: list[Path] = []
    yield made
    for path in made:
        if path.is_symlink():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)


def test_a_venv_under_tmp(tmp_path, scratch):
    venv = Path("/tmp") / f"agio-venv-{uuid.uuid4().hex[:8]}"
    scratch.append(venv)
    python = make_venv(venv)
    result = run_tool_with(python, tmp_path)
    assert_ran_in_sandbox(result, python)
    assert (tmp_path / "ws" / "sessions" / "s" / "made-here.txt").read_text() == "x"


def test_a_venv_reached_through_a_symlink(tmp_path, scratch):
    real = Path("/tmp") / f"agio-real-{uuid.uuid4().hex[:8]}"
    link = Path("/tmp") / f"agio-link-{uuid.uuid4().hex[:8]}"
    scratch += [link, real]
    make_venv(real / "venv")
    link.symlink_to(real)
    python = str(link / "venv" / "bin" / "python")
    assert_ran_in_sandbox(run_tool_with(python, tmp_path), python)


@pytest.mark.parametrize("parent", ["home", "opt"])
def test_a_venv_under_home_or_opt(tmp_path, scratch, parent):
    base = Path.home() / ".cache" if parent == "home" else Path("/opt")
    if not os.access(base if base.exists() else base.parent, os.W_OK):
        pytest.skip(f"{base} is not writable by this user")
    venv = base / f"agio-venv-{uuid.uuid4().hex[:8]}"
    scratch.append(venv)
    python = make_venv(venv)
    assert_ran_in_sandbox(run_tool_with(python, tmp_path), python)


def test_the_base_installation_as_a_standalone_prefix(tmp_path):
    """The interpreter a venv was made from, run directly: sys.prefix == sys.base_prefix, wherever it is
    installed (pyenv under $HOME, a conda-style prefix, or /usr)."""
    python = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    assert os.path.exists(python), python
    assert_ran_in_sandbox(run_tool_with(python, tmp_path), python)


def test_the_system_interpreter(tmp_path):
    python = "/usr/bin/python3"
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True).stdout.strip()
    if version != str(sys.version_info[:2]):
        pytest.skip(f"{python} is Python {version}; this checkout's packages are built for {sys.version_info[:2]}")
    assert_ran_in_sandbox(run_tool_with(python, tmp_path), python)


def test_an_interpreter_hidden_from_the_sandbox_is_named_not_blamed_on_namespaces(monkeypatch):
    """What a venv under /tmp met when the private /tmp was mounted over it: bubblewrap started, and the
    interpreter was not there inside."""
    monkeypatch.setattr(sandbox, "_probe", {})
    hidden = f"/opt/agio-hidden-{uuid.uuid4().hex[:8]}"
    os.makedirs(hidden + "/bin")
    try:
        os.symlink(sys.executable, hidden + "/bin/python3")
        monkeypatch.setattr(sys, "executable", hidden + "/bin/python3")
        monkeypatch.setattr(sandbox, "_python_dirs", lambda: [])  # the binds that would show it, missing
        problem = sandbox.isolation_problem()
    finally:
        shutil.rmtree(hidden)
    assert problem is not None
    assert f"bubblewrap started, but could not run the interpreter {hidden}/bin/python3 inside the sandbox" \
        in problem, problem
    assert "No such file or directory" in problem and "namespaces" not in problem, problem


def test_a_missing_interpreter_is_one_clear_line(monkeypatch):
    monkeypatch.setattr(sandbox, "_probe", {})
    missing = f"/opt/agio-missing-{uuid.uuid4().hex[:8]}/bin/python3"
    monkeypatch.setattr(sys, "executable", missing)
    problem = sandbox.isolation_problem()
    assert problem == (f"the interpreter {missing} does not exist or cannot be run (was its virtualenv moved "
                       "or deleted?); restart the kernel from a working Python")


def test_the_failed_step_is_named():
    assert "namespaces" in sandbox.describe_failure(1, "bwrap: No permissions to creating new namespace, likely "
                                                       "because the kernel does not allow non-privileged user namespaces.")
    assert "(setpriv)" in sandbox.describe_failure(127, "setpriv: setresuid failed: Operation not permitted")
    assert "mount --bind" in sandbox.describe_failure(111, "mount: /tmp/x: permission denied.")
    assert "cgroup" in sandbox.describe_failure(112, "sh: 1: cannot create /sys/fs/cgroup/x: Permission denied")
