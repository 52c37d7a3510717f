"""The extension's own unit tests (vitest + jsdom), run from the one test command."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

LAB = Path(__file__).resolve().parent.parent / "labextension"


def test_renderer_unit_tests_pass():
    assert shutil.which("npm"), "npm is needed to test the JupyterLab extension"
    assert (LAB / "node_modules").is_dir(), "run scripts/setup.sh first (it installs the extension's packages)"
    proc = subprocess.run(["npm", "test", "--silent"], cwd=LAB, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "passed" in proc.stdout
