"""The transcript renderer in a real JupyterLab, in Debian's chromium, on a saved notebook, no kernel."""

from __future__ import annotations

import html
import json
import os
import re
import urllib.request
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import sync_playwright

from lab_support import CHROMIUM, CHROMIUM_ARGS, running_lab

ROOT = Path(__file__).resolve().parent.parent


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
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_PATH"}
    # no kernel can start: the transcripts must render from the saved file alone
    with running_lab(root, env, "--KernelSpecManager.allowed_kernelspecs=agio-absent") as served:
        yield served


def test_saved_transcripts_render_richly_and_safely(lab):
    base, token = lab
    assert os.path.exists(CHROMIUM), "Debian's chromium is needed (scripts/setup.sh --browser installs it)"
    extensions = json.load(urllib.request.urlopen(f"{base}/lab/api/extensions?token={token}"))
    assert any(e["name"] == "agio-notebook" and e["enabled"] for e in extensions)
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
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
        # the extension's footer and the HTML fallback's footer say the same (e.g. both show the total time)
        saved = nbformat.read(ROOT / "test-output" / "saved_runs.ipynb", as_version=4)
        html_footers = [html.unescape(re.search(r'<div class="agio-metrics"[^>]*>([^<]*)</div>', o["data"]["text/html"])[1])
                        for c in saved.cells for o in c.get("outputs", [])
                        if "application/vnd.agio.run+json" in o.get("data", {})]
        lab_footers = [runs.nth(i).locator(":scope > .agio-metrics").inner_text() for i in range(3)]
        assert lab_footers == html_footers and all("total" in f for f in lab_footers)
        page.screenshot(path=str(out / "labextension-transcripts.png"), full_page=True)
        kernels = json.load(urllib.request.urlopen(f"{base}/api/kernels?token={token}"))
        assert kernels == [], "the transcripts must render with no kernel running"
        browser.close()
