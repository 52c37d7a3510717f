"""scripts/classroom.sh starts a class on this machine for a demo: PostgreSQL, `agio classroom init`, and a
JupyterHub whose login page answers; Ctrl-C stops the hub and the database; started again, it reuses them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from agio_notebook.toolkits.workspace import reachable_temp_dir
from lab_support import free_port

ROOT = Path(__file__).resolve().parent.parent


def start(folder: Path, port: int) -> tuple[subprocess.Popen, Path]:
    log = folder.with_suffix(".log")
    with log.open("a") as out:
        proc = subprocess.Popen([str(ROOT / "scripts" / "classroom.sh"), "--dir", str(folder), "--port", str(port),
                                 "--password", "demo-password-1"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.time() + 300
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/hub/login", timeout=2).read()
            return proc, log
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                raise AssertionError("the class did not start: " + log.read_text()[-4000:]) from None
            time.sleep(0.5)


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in its terminal
    proc.wait(120)


def database_running(folder: Path) -> bool:
    return (folder / "postgres" / "data" / "postmaster.pid").exists()


def test_the_demo_class_starts_stops_and_starts_again():
    # reachable by the postgres user when the tests run as root
    parent = Path(tempfile.mkdtemp(prefix="agio-class-", dir=reachable_temp_dir()))
    parent.chmod(0o755)
    folder = parent / "class"
    port = free_port()
    proc, log = start(folder, port)
    try:
        secrets = json.loads((folder / "secrets.json").read_text())
        assert set(secrets["passwords"]) == {"tina", "alice", "bob"}
        assert os.stat(folder / "secrets.json").st_mode & 0o777 == 0o600
        assert "log in as tina or alice or bob" in log.read_text()
        config = (folder / "jupyterhub_config.py").read_text()
        assert "agio_classroom_store" in config and not any(p in config for p in secrets["passwords"].values())
        assert database_running(folder)
    finally:
        stop(proc)
    assert not database_running(folder)
    proc, log = start(folder, port)  # again: the same database, roles and passwords
    try:
        assert json.loads((folder / "secrets.json").read_text()) == secrets
        assert log.read_text().count("made the role") == 3  # the first start only
    finally:
        stop(proc)
        shutil.rmtree(parent, ignore_errors=True)
