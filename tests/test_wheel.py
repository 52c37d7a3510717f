"""The wheel ships the extension prebuilt: installed from it, `jupyter labextension list` shows it enabled."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_carries_the_prebuilt_extension_and_jupyter_lists_it(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), "-q"], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("agio_notebook-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    prefix = "agio_notebook-0.1.0.data/data/share/jupyter/labextensions/agio-notebook/"
    assert prefix + "package.json" in names and prefix + "install.json" in names
    assert any(re.match(re.escape(prefix) + r"static/remoteEntry\.[0-9a-f]+\.js$", n) for n in names)
    assert not any("node_modules" in n or n.endswith(".ts") for n in names)

    # install the wheel's data files the way an installer does (<name>.data/data/* -> <prefix>/*),
    # without touching this environment's own (editable) installation
    target = tmp_path / "prefix"
    data = "agio_notebook-0.1.0.data/data/"
    with zipfile.ZipFile(wheel) as zf:
        for name in names:
            if name.startswith(data) and not name.endswith("/"):
                dest = target / name[len(data):]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(zf.read(name))
    env = {**os.environ, "JUPYTER_PATH": str(target / "share" / "jupyter")}
    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                            text=True, env=env, timeout=120)
    report = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    section = report.split(str(target / "share" / "jupyter" / "labextensions"), 1)
    assert len(section) == 2, report
    assert re.search(r"agio-notebook v0\.1\.0 enabled\s+OK", section[1].split("\n\n")[0]), report
