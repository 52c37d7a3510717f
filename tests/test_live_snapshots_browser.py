"""A notebook saved while a batch or a run goes on, in a real JupyterLab in Debian's chromium: the saved file
holds the view's snapshot and no widget, the page keeps the live widget (Cancel and Stop still work while
a cell awaits), and the notebook reopened without that kernel shows the snapshot, never a dead widget."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import (CHROMIUM, CHROMIUM_ARGS, KERNEL_CONNECTED, KERNEL_IDLE, close_session, open_with_kernel,
                         run_all, running_lab, save_until)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
BATCH = "application/vnd.agio.batch+json"
RUN = "application/vnd.agio.run+json"
NOTE = "snapshot saved while it ran"

BATCH_CELLS = [
    "%load_ext agio_notebook",
    '''import asyncio
import agio_notebook as agio
from agio_notebook import Agent, FunctionModel, ExecutionConfig

async def slow(messages, tools):
    await asyncio.sleep(0.3)
    return "ok <b>not bold</b>"

slowpoke = Agent(model=FunctionModel(slow), name="slowpoke", config=ExecutionConfig(enable_retry=False))
questions = [f"q{i}" for i in range(400)]''',
    'h = agio.batch(slowpoke, questions, name="saved-batch", concurrency=2)\nh',
    "await h;",
    "print('after the batch:', h.metrics()['completed'] + h.metrics()['cancelled'])",
]

RUN_CELLS = [
    "%load_ext agio_notebook",
    '''import asyncio
from agio_notebook import Agent, Reply, ScriptedModel, tool

@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"

sleeper = Agent(model=ScriptedModel([Reply.call("nap", seconds=120), "never said"]), tools=[nap], name="sleeper")''',
    "%%agio sleeper\nNap for two minutes.",
    "print('after the run:', _agio.status)",
]

OUT = Path(__file__).resolve().parent.parent / "test-output"
WIDGET_ERROR = "document.body.innerText.includes('Error displaying widget')"


@pytest.fixture(scope="module")
def lab(kernelspec_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("saved-live")
    meta = {"kernelspec": {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}}
    for name, cells in (("batch.ipynb", BATCH_CELLS), ("run.ipynb", RUN_CELLS)):
        nbformat.write(new_notebook(cells=[new_code_cell(c) for c in cells], metadata=meta), root / name)
    # no autosave: what the file holds is what this test saved, mid-run
    settings = root / ".settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    runtime = root / "runtime"
    OUT.mkdir(exist_ok=True)
    env = {**os.environ, "AGIO_STORE": str(root / "store"), "JUPYTER_RUNTIME_DIR": str(runtime)}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    with running_lab(root, env) as served:
        yield served, root, runtime / "agio-snapshots"


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def wait_for(predicate, timeout: float, what: str):
    """Poll ``predicate`` until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def kernel_snapshot(snapshots: Path, mime: str, ready) -> dict | None:
    """A snapshot the kernel keeps for a live ``mime`` view that satisfies ``ready``."""
    for path in snapshots.glob("*.json") if snapshots.exists() else ():
        try:
            bundle = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if mime in bundle and ready(bundle[mime]):
            return bundle[mime]
    return None


def save_and_read(page, path: Path, cell: int, mime: str) -> dict:
    """Save from the page; once the file on disk holds ``cell``'s outputs, the one of the view
    (``mime``), after checking that no output there is a widget."""
    saved = save_until(page, path, lambda nb: nb["cells"][cell].get("outputs"), timeout=30)
    nbformat.validate(saved)
    outputs = [o.get("data", {}) for o in saved["cells"][cell]["outputs"]]
    assert not [d for d in outputs if WIDGET_VIEW in d], f"the saved notebook carries a widget: {outputs}"
    [data] = [d for d in outputs if mime in d]
    return data


def reopen_without_the_kernel(browser, page, base: str, token: str, session: str, name: str):
    """Close the page and shut its kernel down, then open the saved notebook again (a fresh kernel)."""
    page.close()
    close_session(base, token, session)
    again = browser.new_page(viewport={"width": 1200, "height": 1400})
    session = open_with_kernel(again, base, token, name, workspace="reopened-" + name.split(".")[0])
    again.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    # the widget manager has met the new kernel: a dead widget would say so by now
    again.wait_for_function(KERNEL_CONNECTED, polling=250, timeout=120000)
    again.wait_for_function(KERNEL_IDLE, timeout=120000)
    return again, session


def test_a_notebook_saved_mid_batch_keeps_the_summary_and_cancel_still_works(lab, browser):
    (base, token), root, snapshots = lab
    page = browser.new_page(viewport={"width": 1200, "height": 1400})
    session = open_with_kernel(page, base, token, "batch.ipynb", workspace="batch")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    run_all(page)
    monitor = page.locator(".agio-batch-monitor").first
    monitor.wait_for(timeout=60000)
    # the kernel's snapshot has moved on from the one displayed with the monitor (0 completed)
    wait_for(lambda: kernel_snapshot(snapshots, BATCH, lambda d: d["completed"] >= 3), 60, "a fresher snapshot")
    data = save_and_read(page, root / "batch.ipynb", 2, BATCH)
    assert data[BATCH]["status"] == "running" and data[BATCH]["completed"] >= 3 and data[BATCH]["snapshot_at"]
    assert data["text/plain"].startswith(f"[{NOTE}") and NOTE in data["text/html"]
    assert "<b>not bold</b>" not in data["text/html"]
    # the page still shows the live monitor (a save does not reload the document), and it still moves
    assert page.locator(".agio-batch-monitor").count() == 1 and page.locator(".agio-snapshot").count() == 0
    shown = page.locator(".agio-batch-progress").first.inner_text()
    page.wait_for_function(f"(() => {{ const e = document.querySelector('.agio-batch-progress');"
                           f" return e && e.innerText !== {json.dumps(shown)}; }})()", timeout=60000)
    # Cancel while the next cell awaits the batch: heard, the summary replaces the monitor, Run All goes on
    monitor.locator("button", has_text="Cancel").click()
    page.wait_for_function("document.body.innerText.includes('after the batch: 400')", timeout=60000)
    final = page.locator(".jp-Cell").nth(2).locator(".agio-batch").first
    assert "· cancelled ·" in final.inner_text() and page.locator(".agio-batch-monitor").count() == 0
    # reopened without that kernel: the snapshot as saved, drawn by the extension, no dead widget
    page, session = reopen_without_the_kernel(browser, page, base, token, session, "batch.ipynb")
    reopened = page.locator(".jp-Cell").nth(2).locator(".jp-AgioRun")
    reopened.locator(".agio-batch").wait_for(timeout=60000)
    assert reopened.locator(".agio-snapshot").inner_text().startswith(NOTE)
    assert reopened.locator(".agio-batch-status").inner_text() == "running"
    assert f"{data[BATCH]['completed']}/400 completed" in reopened.inner_text()
    assert not page.evaluate(WIDGET_ERROR) and page.locator(".agio-batch-monitor").count() == 0
    page.screenshot(path=str(OUT / "batch-saved-mid-run.png"))
    close_session(base, token, session)
    page.close()


def test_a_notebook_saved_mid_run_keeps_its_transcript_so_far_and_stop_still_works(lab, browser):
    (base, token), root, snapshots = lab
    page = browser.new_page(viewport={"width": 1200, "height": 1400})
    session = open_with_kernel(page, base, token, "run.ipynb", workspace="run")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    run_all(page, agio_cells=1)
    live = page.locator(".agio-run.widget-vbox").first
    live.wait_for(timeout=60000)

    def naps(run: dict) -> bool:
        return any(e["type"] == "tool_call_started" for e in run["events"])

    wait_for(lambda: kernel_snapshot(snapshots, RUN, naps), 60, "a snapshot with the tool call")
    data = save_and_read(page, root / "run.ipynb", 2, RUN)
    assert naps(data[RUN]) and data[RUN]["snapshot_at"] and data["text/plain"].startswith(f"[{NOTE}")
    assert page.locator(".agio-run.widget-vbox").count() == 1  # still live in the page
    # Stop, while the cell awaits its run: heard, the transcript replaces the live view
    live.locator("button", has_text="Stop").click()
    page.wait_for_function("document.body.innerText.includes('after the run: cancelled')", timeout=60000)
    assert page.locator(".jp-AgioRun .agio-run .agio-header .agio-status").first.inner_text() == "cancelled"
    # reopened without that kernel: the transcript as it was saved, marked as a snapshot
    page, session = reopen_without_the_kernel(browser, page, base, token, session, "run.ipynb")
    reopened = page.locator(".jp-Cell").nth(2).locator(".jp-AgioRun")
    reopened.locator(".agio-run").wait_for(timeout=60000)
    assert reopened.locator(".agio-snapshot").inner_text().startswith(NOTE)
    assert reopened.locator(".agio-tool-name").first.inner_text() == "nap"
    assert "Nap for two minutes." in reopened.inner_text()
    assert not page.evaluate(WIDGET_ERROR) and page.locator(".agio-run.widget-vbox").count() == 0
    page.screenshot(path=str(OUT / "run-saved-mid-run.png"))
    close_session(base, token, session)
    page.close()
