"""A real JupyterHub on 127.0.0.1 for the classroom's tests: configurable-http-proxy from npm (scripts/setup.sh
--browser puts it in .venv/chp), single-user servers on this machine (SimpleLocalProcessSpawner), and the
configuration `agio classroom init --trial-password` writes, plus what a test needs (ports, paths, this tree's
build of the JupyterLab extension, the test kernel)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

from lab_support import free_port, source_extension_path

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / ".venv" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"


def quiet_lab_settings(home: Path) -> None:
    """Every notebook cell rendered (no virtual scrolling) in the JupyterLab a user's server serves."""
    settings = home / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    news = home / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True, exist_ok=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))


@contextlib.contextmanager
def running_hub(workdir: Path, config: str) -> Iterator[str]:
    """Serve JupyterHub with ``config`` (as `agio classroom init` wrote it); yields its URL."""
    assert PROXY.exists(), "configurable-http-proxy is missing: scripts/setup.sh --browser installs it"
    port, hub_port, api_port = free_port(), free_port(), free_port()
    jupyter_path = os.pathsep.join(filter(None, [str(source_extension_path(workdir)), os.environ.get("JUPYTER_PATH")]))
    extra = f"""
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.command = [{str(PROXY)!r}]
c.JupyterHub.db_url = "sqlite:///{workdir / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = {str(workdir / 'cookie_secret')!r}
c.JupyterHub.pid_file = {str(workdir / 'jupyterhub.pid')!r}
c.ConfigurableHTTPProxy.pid_file = {str(workdir / 'proxy.pid')!r}
c.Spawner.cmd = [{str(Path(sys.executable).with_name('jupyterhub-singleuser'))!r}]
c.Spawner.environment.update({{"JUPYTER_PATH": {jupyter_path!r}}})
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
"""
    path = workdir / "jupyterhub_config.py"
    path.write_text(config + extra)
    log = workdir / "jupyterhub.log"
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    env.pop("AGIO_STORE", None)
    with log.open("a") as out:
        hub = subprocess.Popen([str(Path(sys.executable).with_name("jupyterhub")), "-f", str(path)], cwd=workdir,
                               stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/hub/api", timeout=2)
                break
            except OSError:
                if hub.poll() is not None or time.time() > deadline:
                    raise RuntimeError("JupyterHub did not start: " + log.read_text()[-4000:]) from None
                time.sleep(0.3)
        yield base
    finally:
        hub.terminate()  # it stops the users' servers and its proxy as it goes
        try:
            hub.wait(60)
        except subprocess.TimeoutExpired:
            hub.kill()
