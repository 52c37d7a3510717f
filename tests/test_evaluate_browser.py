"""The evaluation view in a real JupyterLab in chromium: live after Run All, then saved and reopened as an
untrusted notebook with no kernel (the summary, the interval plot drawn with CSS, and the changed samples
opening onto their transcripts, all still there)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.sign import NotebookNotary
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import sync_playwright

from evaluate_support import SETUP as EVALUATE_SETUP
from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, open_with_kernel, run_all, running_lab

ROOT = Path(__file__).resolve().parent.parent
MIME = "application/vnd.agio.evaluation+json"

CELLS = [
    "%load_ext agio_notebook",
    EVALUATE_SETUP,
    '''ev = agio.evaluate({"hasty": Agent(model=FunctionModel(hasty), name="hasty"),
                    "careful": Agent(model=FunctionModel(careful), name="careful")},
                   data, [correct], epochs=2, seed=3, prompt="{question}", name="browser")
ev''',
]


@pytest.fixture
def lab(kernelspec_dir, tmp_path):
    nb = new_notebook(cells=[new_code_cell(c) for c in CELLS],
                      metadata={"kernelspec": {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}})
    nbformat.write(nb, tmp_path / "evaluate.ipynb")
    env = {**os.environ, "AGIO_STORE": str(tmp_path / "store")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    with running_lab(tmp_path, env) as served:
        yield served, tmp_path


def wait_saved(path: Path, timeout: float = 30) -> dict:
    """The notebook as saved, once the evaluation's output (data and HTML) is in the file."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        saved = json.loads(path.read_text())
        outputs = saved["cells"][2]["outputs"]
        if [o for o in outputs if MIME in o.get("data", {}) and "text/html" in o["data"]]:
            return saved
        assert time.monotonic() < deadline, outputs
        time.sleep(0.2)


def check_view(page, out: Path, name: str) -> None:
    view = page.locator(".jp-NotebookPanel:visible .agio-evaluation").first  # the notebook shown now
    view.wait_for(timeout=90000)
    assert view.locator(".agio-eval-variant").count() == 2
    assert "95% percentile cluster bootstrap (samples resampled)" in view.locator(".agio-eval-method").first.inner_text()
    # the plot: each interval is a bar and each mean a dot, placed by their inline styles
    track = view.locator(".agio-eval-track").first.bounding_box()
    bars = [view.locator(".agio-eval-interval").nth(i).bounding_box() for i in range(2)]
    dots = [view.locator(".agio-eval-mean").nth(i).bounding_box() for i in range(2)]
    assert track["width"] > 200
    hasty_bar, careful_bar = bars
    assert hasty_bar["width"] > 0.1 * track["width"]  # hasty's interval is wide (0.67 of 9 samples)
    assert careful_bar["width"] < 0.05 * track["width"]  # careful's is a point at 1.0
    assert dots[1]["x"] > dots[0]["x"] + 0.2 * track["width"]  # 1.0 sits right of 0.67
    # the changed samples, each opening onto its transcripts
    changed = view.locator(".agio-eval-changed")
    assert changed.count() == 3 and view.locator(".agio-eval-better").count() == 3
    transcript = changed.first.locator(".agio-tree-transcript").first
    assert not transcript.is_visible()
    changed.first.locator("summary").click()
    transcript.wait_for(state="visible", timeout=10000)
    text = changed.first.inner_text()
    assert "What is 0 plus 2?" in text and "3 <b>sure</b>" in text  # the run's exchange, model output as text
    assert changed.first.locator("b:has-text('sure')").count() == 0
    assert "%agio replay" in text
    assert view.locator("svg").count() == 0
    page.screenshot(path=str(out / f"{name}.png"), full_page=True)


def test_the_view_live_and_reopened_untrusted_without_a_kernel(lab):
    (base, token), root = lab
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1600})
        open_with_kernel(page, base, token, "evaluate.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
        run_all(page)
        check_view(page, out, "evaluation-live")
        page.keyboard.press("Control+s")
        page.wait_for_function("document.title.indexOf('\u25cf') < 0", timeout=30000)
        saved = wait_saved(root / "evaluate.ipynb")
        # a copy opened for the first time is untrusted; with no kernel it shows the saved output
        nb = nbformat.reads(json.dumps(saved), as_version=4)
        nb.metadata["kernelspec"] = {"name": "agio-absent", "display_name": "absent", "language": "python"}
        nbformat.write(nb, root / "reopened.ipynb")
        notary = NotebookNotary()
        assert notary.check_signature(nbformat.read(root / "evaluate.ipynb", as_version=4))  # JupyterLab signed its save
        assert not notary.check_signature(nbformat.read(root / "reopened.ipynb", as_version=4))  # the copy: untrusted
        shutil.rmtree(root / "store")  # nothing of the store is needed to read it
        page.goto(f"{base}/lab/tree/reopened.ipynb?token={token}")
        dialog = page.locator(".jp-Dialog")
        try:  # JupyterLab asks which kernel to use for the unknown one: keep none
            dialog.wait_for(timeout=15000)
            dialog.locator("button.jp-mod-reject, button:has-text('No Kernel'), button:has-text('Cancel')").first.click()
            dialog.wait_for(state="detached", timeout=10000)
        except Exception:  # noqa: BLE001 - no dialog this time
            pass
        page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for(timeout=60000)
        assert page.locator(".jp-NotebookPanel:visible").count() == 1
        page.wait_for_function("document.title.startsWith('reopened.ipynb')", timeout=30000)
        check_view(page, out, "evaluation-reopened")
        browser.close()
