"""In a real JupyterLab and Debian's chromium: a saved code-interpreter run shows its figure (a decoded
PNG) and its table under the tool card, from the saved file alone, with the extension built from this
checkout."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import sync_playwright

from lab_support import CHROMIUM, CHROMIUM_ARGS, running_lab
from test_actions_notebook import executed_interpreter_notebook

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def lab(tmp_path):
    nb = executed_interpreter_notebook(tmp_path)
    root = tmp_path / "lab"
    root.mkdir()
    nb.metadata["kernelspec"] = {"name": "agio-absent", "display_name": "absent", "language": "python"}
    nbformat.write(nb, root / "interpreter.ipynb")
    # this checkout's build of the extension, first on the path
    data = tmp_path / "data" / "labextensions"
    data.mkdir(parents=True)
    (data / "agio-notebook").symlink_to(ROOT / "agio_notebook" / "labextension")
    lab_env = {**{k: v for k, v in os.environ.items() if k != "JUPYTER_PATH"}, "JUPYTER_PATH": str(tmp_path / "data")}
    with running_lab(root, lab_env, "--KernelSpecManager.allowed_kernelspecs=agio-absent") as served:
        yield served


def test_saved_figure_and_table_render_in_jupyterlab(lab):
    base, token = lab
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1600})
        page.goto(f"{base}/lab/tree/interpreter.ipynb?token={token}")
        page.wait_for_selector(".jp-AgioRun .agio-run", timeout=90000)
        dialog = page.locator(".jp-Dialog")
        try:
            dialog.wait_for(timeout=10000)
            dialog.locator("button.jp-mod-reject, button:has-text('No Kernel'), button:has-text('Cancel')").first.click()
        except Exception:  # noqa: BLE001 - no dialog this time
            pass
        image = page.locator(".jp-AgioRun .agio-displays img.agio-display-image")
        image.wait_for(timeout=30000)
        page.wait_for_function(
            "document.querySelector('.jp-AgioRun .agio-displays img').naturalWidth > 100", timeout=30000)
        table = page.locator(".jp-AgioRun .agio-display-html table")
        assert table.locator("th").all_inner_texts()[:3] == ["", "x", "y"]
        # the isolation level is on the card's summary line, visible without opening it
        assert page.locator(".jp-AgioRun .agio-tool-card summary .agio-isolation").inner_text().strip() == \
            "· sandbox: bubblewrap"
        out = ROOT / "test-output"
        out.mkdir(exist_ok=True)
        page.screenshot(path=str(out / "actions-figure-in-lab.png"))
        browser.close()
