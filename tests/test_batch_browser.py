"""A foreground %agio batch cell in a real JupyterLab in chromium: the monitor moves, Cancel stops the
batch while the cell still runs, the summary replaces the widget, and the saved notebook shows it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, open_with_kernel, run_all, running_lab

ROOT = Path(__file__).resolve().parent.parent
MIME = "application/vnd.agio.batch+json"

CELLS = [
    "%load_ext agio_notebook",
    '''import asyncio
from agio_notebook import Agent, FunctionModel, ExecutionConfig

async def slow(messages, tools):
    await asyncio.sleep(0.3)
    return "ok <b>not bold</b>"

slowpoke = Agent(model=FunctionModel(slow), name="slowpoke", config=ExecutionConfig(enable_retry=False))
questions = [f"q{i}" for i in range(60)]''',
    "h = %agio batch questions --agent slowpoke --concurrency 2 --name browser-batch",
    "print('after the batch:', h.metrics()['completed'] + h.metrics()['cancelled'])",
]


@pytest.fixture
def lab(kernelspec_dir, tmp_path):
    nb = new_notebook(cells=[new_code_cell(c) for c in CELLS],
                      metadata={"kernelspec": {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}})
    nbformat.write(nb, tmp_path / "batch.ipynb")
    env = {**os.environ, "AGIO_STORE": str(tmp_path / "store")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    with running_lab(tmp_path, env) as served:
        yield served, tmp_path


def done_count(text: str) -> int:
    m = re.search(r"(\d+)/60", text)
    return int(m.group(1)) if m else -1


def test_monitor_moves_cancel_works_and_the_saved_summary_renders(lab):
    (base, token), root = lab
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 1400})
        open_with_kernel(page, base, token, "batch.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
        page.wait_for_function("document.querySelector('.jp-Notebook-ExecutionIndicator, .jp-KernelStatus') !== null",
                               timeout=30000)
        page.wait_for_function("document.body.innerText.includes('agio test | Idle')", timeout=120000)
        run_all(page)  # retries a click that lands before the kernel is wired
        monitor = page.locator(".agio-batch-monitor").first
        try:
            monitor.wait_for(timeout=60000)
        except Exception:
            page.screenshot(path=str(out / "batch-no-monitor.png"))
            raise
        progress = monitor.locator(".agio-batch-progress")
        page.wait_for_function("(() => { const e = document.querySelector('.agio-batch-progress');"
                               " return e && /^([2-9]|\\d\\d+)\\/60/.test(e.innerText); })()", timeout=60000)
        first = done_count(progress.inner_text())
        page.wait_for_function(f"(() => {{ const e = document.querySelector('.agio-batch-progress');"
                               f" return e && parseInt(e.innerText) > {first}; }})()", timeout=60000)
        assert done_count(progress.inner_text()) > first  # it moves
        page.screenshot(path=str(out / "batch-running.png"))
        # the last cell has not run yet: Run All waits for the batch cell
        assert page.locator(".jp-Cell").nth(3).locator(".jp-OutputArea-output").count() == 0
        monitor.locator("button", has_text="Cancel").click()
        summary = page.locator(".agio-batch").first
        summary.wait_for(timeout=60000)
        page.wait_for_function("document.body.innerText.includes('after the batch: 60')", timeout=60000)
        text = summary.inner_text()
        completed = int(re.search(r"(\d+)/60 completed", text).group(1))
        assert "· cancelled ·" in text and 2 <= completed < 60 and "item 5: cancelled" not in text
        # after Cancel it says so: counts by status, the rate of completed items, no full bar
        assert f"{completed} completed · 0 failed · {60 - completed} cancelled" in text
        assert "completed/s" in text and "60/60" not in text
        assert summary.locator(".agio-batch-bar-cancelled").count() == 1
        assert page.locator(".agio-batch-monitor").count() == 0
        assert page.locator(".agio-batch b:has-text('not bold')").count() == 0
        page.screenshot(path=str(out / "batch-cancelled.png"))
        page.keyboard.press("Control+s")
        page.wait_for_function("document.title.indexOf('\u25cf') < 0", timeout=30000)
        page.wait_for_timeout(1000)
        saved = json.loads((root / "batch.ipynb").read_text())
        outputs = saved["cells"][2]["outputs"]
        assert [o for o in outputs if MIME in o.get("data", {})], outputs
        assert not [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        # reopened, the saved notebook shows the summary
        page.reload()
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
        reopened = page.locator(".agio-batch").first
        reopened.wait_for(timeout=60000)
        assert "cancelled" in reopened.inner_text() and reopened.locator("svg, span").count() > 0
        page.screenshot(path=str(out / "batch-saved.png"))
        browser.close()
