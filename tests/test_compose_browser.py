"""Nested runs in a real JupyterLab (chromium): an agent called as a tool streams inside its tool card live,
then the saved notebook, reopened, shows the same nesting through the extension."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, open_with_kernel, run_all, running_lab, save_until

ROOT = Path(__file__).resolve().parent.parent
MIME = "application/vnd.agio.run+json"

CELLS = [
    "%load_ext agio_notebook",
    '''import asyncio, os
from agio_notebook import Agent, FunctionModel, Reply

async def inner_model(messages, tools):
    for i in range(40):
        await asyncio.sleep(0.03)
        yield f"inner{i} <b>bold?</b> "
        while i == 19 and not os.path.exists("release"):  # half-way, until the test has looked
            await asyncio.sleep(0.05)

def outer_model(messages, tools):
    if messages[-1]["role"] == "user":
        return Reply.call("researcher", query="dig")
    return "outer got: " + messages[-1]["content"][-30:]

researcher = Agent(model=FunctionModel(inner_model), name="researcher")
planner = Agent(model=FunctionModel(outer_model), tools=[researcher], name="planner")''',
    "%%agio planner\nplan please",
]


@pytest.fixture
def lab(kernelspec_dir, tmp_path):
    for name, cells in (("nested", CELLS), ("stopped", STOPPED)):
        nb = new_notebook(cells=[new_code_cell(c) for c in cells],
                          metadata={"kernelspec": {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}})
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    env = {**os.environ, "AGIO_STORE": str(tmp_path / "store")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    with running_lab(tmp_path, env) as served:
        yield (*served, tmp_path)


def test_a_nested_run_streams_in_its_tool_card_and_the_saved_notebook_shows_it(lab):
    base, token, root = lab
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser, page = run_in_lab(pw, base, token, "nested.ipynb")
        # live: the inner agent's run streams inside the outer tool card, half of it so far
        live = page.locator(".widget-vbox.agio-run").first
        live.wait_for(timeout=60000)
        nested = live.locator(".agio-tool-card .agio-nested-run").first
        nested.wait_for(timeout=60000)
        page.wait_for_function(
            "[...document.querySelectorAll('.widget-vbox.agio-run .agio-tool-card .agio-nested-run')]"
            ".some(n => n.innerText.includes('inner5 '))", timeout=60000)
        partial = nested.inner_text()
        assert "researcher" in partial and "inner20" not in partial  # it waits after inner19
        assert live.locator(".agio-tool-card .agio-status").first.inner_text() == "running"
        assert page.locator(".agio-run b:has-text('bold?')").count() == 0  # escaped, not markup
        page.screenshot(path=str(out / "compose-live.png"))
        (root / "release").touch()  # the inner model streams the rest (the kernel's cwd is the lab's root)
        page.wait_for_selector(".jp-AgioRun .agio-run", timeout=60000)
        final = page.locator(".jp-AgioRun .agio-run").first
        assert final.locator(".agio-status").first.inner_text() == "completed"
        inner = final.locator(".agio-tool-card .agio-nested-run").first
        assert "inner39" in inner.inner_text()
        assert inner.locator(".agio-nested-agent").inner_text() == "researcher"
        # saved, then reopened: the extension draws the nesting from the saved events
        page.keyboard.press("Control+s")
        page.wait_for_function("document.title.indexOf('\u25cf') < 0", timeout=30000)
        page.wait_for_timeout(1000)
        saved = json.loads((root / "nested.ipynb").read_text())
        bundles = [o["data"][MIME] for o in saved["cells"][2]["outputs"] if MIME in o.get("data", {})]
        assert bundles and any(e["type"] == "nested" for e in bundles[0]["events"])
        page.reload()
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
        reopened = page.locator(".jp-AgioRun .agio-run").first
        reopened.wait_for(timeout=60000)
        box = reopened.locator(".agio-tool-card .agio-nested-run").first
        assert box.locator(".agio-nested-agent").inner_text() == "researcher"
        assert "inner39" in box.inner_text() and box.locator(".agio-status").first.inner_text() == "completed"
        assert page.locator(".agio-run b:has-text('bold?')").count() == 0
        box.locator("summary").first.click()  # collapsible
        assert box.evaluate("n => n.open") is False
        page.screenshot(path=str(out / "compose-saved.png"))
        browser.close()


STOPPED = [
    "%load_ext agio_notebook",
    '''import asyncio
from agio_notebook import Agent, FunctionModel, Reply, tool

@tool
async def dig(topic: str) -> str:
    """Dig a topic up (slowly: until stopped)."""
    await asyncio.sleep(600)
    return topic

def inner_model(messages, tools):
    return "found" if messages[-1]["role"] == "tool" else Reply.call("dig", topic="owls")

def outer_model(messages, tools):
    return "done" if messages[-1]["role"] == "tool" else Reply.call("researcher", query="owls")

researcher = Agent(model=FunctionModel(inner_model), tools=[dig], name="researcher", description="digs")
planner = Agent(model=FunctionModel(outer_model), tools=[researcher], name="planner")''',
    "%%agio planner --new-session\nplan please",
]


def run_in_lab(pw, base: str, token: str, name: str):
    """A browser with notebook ``name`` open on its kernel, Run All clicked; (browser, page)."""
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1200, "height": 1600})
    open_with_kernel(page, base, token, name)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    run_all(page, agio_cells=1)
    return browser, page


def test_after_stop_a_nested_run_counts_what_it_shows(lab):
    """Stop while a nested run's tool runs: the cancelled nested card's footer counts its steps and its tool
    call (which never finished), the same in the transcript the extension draws and after reopening."""
    base, token, root = lab
    with sync_playwright() as pw:
        browser, page = run_in_lab(pw, base, token, "stopped.ipynb")
        live = page.locator(".widget-vbox.agio-run").first
        live.wait_for(timeout=60000)
        page.wait_for_function("[...document.querySelectorAll('.widget-vbox.agio-run .agio-nested-run .agio-tool-card')]"
                               ".some(c => c.innerText.includes('dig'))", timeout=60000)
        live.locator("button", has_text="Stop").click()
        final = page.locator(".jp-AgioRun .agio-run").first
        final.wait_for(timeout=60000)
        for view in (final, None):
            if view is None:  # reopened: drawn from the saved events alone
                save_until(page, root / "stopped.ipynb", lambda nb: any(
                    MIME in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", [])))
                page.reload()
                view = page.locator(".jp-AgioRun .agio-run").first
                view.wait_for(timeout=60000)
            assert view.locator(".agio-header .agio-status").inner_text() == "cancelled"
            nested = view.locator(".agio-nested-run").first
            footer = nested.locator(":scope > .agio-metrics").inner_text()
            assert footer.startswith("2 steps (1 model call) · 1 tool call (1 not finished)"), footer
            assert nested.locator(".agio-tool-card .agio-status").inner_text() == "cancelled"
            outer = view.locator(":scope > .agio-metrics").inner_text()
            assert "1 tool call (1 not finished)" in outer, outer
        page.screenshot(path=str(ROOT / "test-output" / "compose-stopped.png"))
        browser.close()
