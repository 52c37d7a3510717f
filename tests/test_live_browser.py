"""A %%agio cell run from a real JupyterLab in chromium: the live widget streams, then becomes the transcript."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, open_with_kernel, run_all, running_lab

ROOT = Path(__file__).resolve().parent.parent

CELLS = [
    "%load_ext agio_notebook",
    '''import asyncio, os
from agio_notebook import Agent, FunctionModel

async def slow(messages, tools):
    for i in range(60):
        await asyncio.sleep(0.05)
        yield f"word{i} <b>bold?</b> "
        while i == 29 and not os.path.exists("release"):  # half-way, until the test has looked
            await asyncio.sleep(0.05)

streamer = Agent(model=FunctionModel(slow), name="streamer")''',
    "%%agio streamer\nstream please",
]


@pytest.fixture
def lab_with_kernel(kernelspec_dir, tmp_path):
    nb = new_notebook(cells=[new_code_cell(c) for c in CELLS],
                      metadata={"kernelspec": {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}})
    nbformat.write(nb, tmp_path / "live.ipynb")
    env = {**os.environ, "AGIO_STORE": str(tmp_path / "store")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    with running_lab(tmp_path, env) as served:
        yield (*served, tmp_path)


def test_live_widget_streams_then_the_transcript_replaces_it(lab_with_kernel):
    base, token, root = lab_with_kernel
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 1400})
        open_with_kernel(page, base, token, "live.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
        page.wait_for_function("document.querySelector('.jp-Notebook-ExecutionIndicator, .jp-KernelStatus') !== null",
                               timeout=30000)
        run_all(page, agio_cells=1)
        # while running: the ipywidgets view, with some of the text but not all of it
        live = page.locator(".agio-run.widget-vbox, .widget-vbox.agio-run").first
        live.wait_for(timeout=60000)
        page.wait_for_function("document.body.innerText.includes('word5 ')", timeout=60000)
        partial = live.inner_text()
        assert "word59" not in partial and "<b>bold?</b>" in partial
        assert page.locator(".agio-run b:has-text('bold?')").count() == 0  # escaped, not markup
        page.screenshot(path=str(out / "live-running.png"))
        (root / "release").touch()  # the model streams the second half (the kernel's cwd is the lab's root)
        # at the end: the same output area shows the transcript through the extension
        page.wait_for_selector(".jp-AgioRun .agio-run", timeout=60000)
        final = page.locator(".jp-AgioRun .agio-run").first
        assert final.locator(".agio-status").first.inner_text() == "completed"
        assert "word59" in final.inner_text()
        assert page.locator(".widget-vbox.agio-run").count() == 0
        assert page.get_by_text("Retry from step").count() == 1
        page.screenshot(path=str(out / "live-finished.png"))
        browser.close()
