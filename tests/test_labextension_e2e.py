"""The transcript renderer in a real JupyterLab, in Debian's chromium, on a saved notebook, no kernel."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(saved_notebook, tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    nb = nbformat.read(saved_notebook, as_version=4)
    # a kernel this server does not know: the notebook opens without starting any kernel
    nb.metadata["kernelspec"] = {"name": "agio-absent", "display_name": "absent", "language": "python"}
    broken = nbformat.v4.new_code_cell("# a transcript damaged by hand")
    broken.outputs = [nbformat.v4.new_output("display_data", data={
        "application/vnd.agio.run+json": {"version": 1, "events": [42]}, "text/plain": "damaged"})]
    nb.cells.append(broken)
    nbformat.write(nb, root / "saved_runs.ipynb")
    # render every cell (no virtual scrolling), so all transcripts are in the page at once
    settings = root / ".settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_PATH"}
    env["JUPYTER_CONFIG_DIR"] = str(root / ".config")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", "--allow-root", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False",
         f"--LabApp.user_settings_dir={root / '.settings'}", f"--LabApp.workspaces_dir={root / '.ws'}",
         "--LabApp.news_url=",
         # no kernel can start: the transcripts must render from the saved file alone
         "--KernelSpecManager.allowed_kernelspecs=agio-absent", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("jupyter lab did not start: " + (proc.stdout.read() if proc.stdout else ""))
    yield base, token
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_saved_transcripts_render_richly_and_safely(lab):
    base, token = lab
    assert os.path.exists(CHROMIUM), "Debian's chromium is needed (scripts/setup.sh --browser installs it)"
    extensions = json.load(urllib.request.urlopen(f"{base}/lab/api/extensions?token={token}"))
    assert any(e["name"] == "agio-notebook" and e["enabled"] for e in extensions)
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1800})
        page.on("dialog", lambda d: d.dismiss())
        page.goto(f"{base}/lab/tree/saved_runs.ipynb?token={token}")
        page.wait_for_selector(".jp-AgioRun .agio-run", timeout=60000)
        # JupyterLab asks which kernel to use for the unknown one: keep none
        dialog = page.locator(".jp-Dialog")
        try:
            dialog.wait_for(timeout=10000)
            page.screenshot(path=str(out / "labextension-kernel-dialog.png"))
            dialog.locator("button.jp-mod-reject, button:has-text('No Kernel'), button:has-text('Cancel')").first.click()
            dialog.wait_for(state="detached", timeout=10000)
        except Exception:  # noqa: BLE001 - no dialog this time
            pass
        runs = page.locator(".jp-AgioRun .agio-run:not(.agio-invalid)")
        page.wait_for_function("document.querySelectorAll('.jp-AgioRun .agio-run').length >= 4", timeout=30000)
        assert runs.count() == 3
        invalid = page.locator(".jp-AgioRun .agio-invalid")
        assert invalid.count() == 1 and "Cannot show this agio transcript: the transcript has a malformed event" \
            in invalid.inner_text()
        first, retry, hostile = runs.nth(0), runs.nth(1), runs.nth(2)
        # the run with a tool error: steps, cards, metrics
        assert first.locator(".agio-header .agio-status").inner_text() == "completed"
        assert first.locator(".agio-step-user").count() == 1
        assert first.locator(".agio-step-assistant").count() == 2
        cards = first.locator(".agio-tool-card")
        assert cards.count() == 2
        assert "ZeroDivisionError" in cards.nth(0).locator(".agio-tool-error").inner_text()
        assert not cards.nth(1).locator(".agio-tool-result").is_visible()  # ok cards start collapsed
        cards.nth(1).locator("summary").click()
        assert cards.nth(1).locator(".agio-tool-result").inner_text().strip() == "2.0"
        assert '"a": 6' in cards.nth(1).locator(".agio-tool-args").inner_text()
        assert "3 tool calls" not in first.locator(".agio-metrics").last.inner_text()
        assert "2 tool calls (1 failed)" in first.locator(".agio-metrics").last.inner_text()
        assert "tokens" in first.locator(".agio-step-metrics").first.inner_text()
        # the retry is marked as such
        assert "attempt 2, retry of" in retry.locator(".agio-attempt").inner_text()
        assert "Second attempt" in retry.inner_text()
        # hostile text is shown as text and never runs
        assert "<img src=x" in hostile.inner_text()
        hostile.locator(".agio-tool-card summary").first.click()
        assert "<IMG SRC=X" in hostile.locator(".agio-tool-result").first.inner_text().upper()
        assert hostile.locator("img").count() == 0
        assert page.evaluate("window.__pwned") is None
        page.screenshot(path=str(out / "labextension-transcripts.png"), full_page=True)
        kernels = json.load(urllib.request.urlopen(f"{base}/api/kernels?token={token}"))
        assert kernels == [], "the transcripts must render with no kernel running"
        browser.close()
