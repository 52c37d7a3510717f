"""How long ``scripts/lab.sh`` takes to a serving JupyterLab: first launch, then a second one.

Copies the project (the files git knows, as they are in the work tree) into a temporary folder with
no ``.venv``, then runs ``scripts/lab.sh`` twice. Each launch is timed from the start of the script
until ``/lab`` answers 200 (JupyterLab's page, extensions included), then the server is stopped.
The first launch sets everything up (venv, pip install, npm ci, extension build); the second finds
nothing changed and skips setup. With ``--cold`` the pip and npm caches are empty, as on a fresh
machine.

    python3 bench/lab_launch.py [--cold] [--launches 2]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def copy_project(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(project: Path, env: dict[str, str], log: Path, timeout: float) -> float:
    port, token = free_port(), secrets.token_hex(16)
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(["scripts/lab.sh", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                                 f"--IdentityProvider.token={token}", "--LabApp.news_url=",
                                 "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                                cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while time.perf_counter() - t0 < timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"lab.sh exited with {proc.returncode}; see {log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=5) as r:
                    if r.status == 200:
                        return time.perf_counter() - t0
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"not serving after {timeout}s; see {log}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="empty pip and npm caches (a fresh machine)")
    parser.add_argument("--launches", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agio-lab-launch-"))
    project = work / "project"
    copy_project(project)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "JUPYTER_PATH")}
    env.update(JUPYTER_CONFIG_DIR=str(work / "jupyter-config"), JUPYTER_DATA_DIR=str(work / "jupyter-data"))
    if args.cold:
        env.update(PIP_NO_CACHE_DIR="1", npm_config_cache=str(work / "npm-cache"))
    times = []
    load_before = os.getloadavg()[0]
    try:
        for i in range(args.launches):
            times.append(launch(project, env, work / f"launch{i + 1}.log", args.timeout))
            print(f"launch {i + 1}: {times[-1]:.1f} s", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"scripts/lab.sh to a serving JupyterLab ({os.cpu_count()} cores, "
          f"{'cold' if args.cold else 'warm'} pip/npm caches, fresh venv; 1-minute load average "
          f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after)\n")
    print("| launch | what it does | seconds | vs first |")
    print("|---|---|---:|---:|")
    for i, t in enumerate(times):
        what = "creates .venv, installs, builds the extension" if i == 0 else "nothing changed: setup skipped"
        print(f"| {i + 1} | {what} | {t:.1f} | {t / times[0]:.2f} |")


if __name__ == "__main__":
    main()
