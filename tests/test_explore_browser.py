"""Saved diffs and run trees render through the JupyterLab extension in a reopened notebook (chromium)."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from playwright.sync_api import sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, running_lab

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "agio_notebook" / "labextension"

CELLS = [
    "%load_ext agio_notebook",
    """import asyncio
from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.storage import open_repository
repo = open_repository()

@tool
def weather(city: str) -> str:
    \"\"\"Weather of a city.\"\"\"
    return {"Paris": "sunny", "Oslo": "rain"}[city]

first = await StepRunner(Agent(model=ScriptedModel([Reply.call("weather", city="Paris"), "It is <b>sunny</b>."]),
                               tools=[weather]), repository=repo).run(None, "weather?")
second = await StepRunner(Agent(model=ScriptedModel([Reply.call("weather", city="Oslo"), "It is rainy."]),
                                tools=[weather], system_prompt="Answer <b>briefly</b>."),
                          repository=repo).retry(first.run_id)
fork = await StepRunner(Agent(model=ScriptedModel(["Forked."])), repository=repo).fork(first.session_id, 1)
session = first.session_id

from agio_notebook.models import set_prices
set_prices({"priced": {"prompt": 1000.0, "completion": 1000.0}})
priced = Agent(model=ScriptedModel(["A priced answer."], name="priced"), name="priced")""",
    "%%agio priced --new-session\nHow much?",
    "%agio diff {first.run_id} {second.run_id}",
    "%agio tree {session}",
]


@pytest.fixture(scope="module")
def lab(kernelspec_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp("explore_saved")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    saved = os.environ.get("AGIO_STORE")
    os.environ["AGIO_STORE"] = str(work / "store")
    try:
        NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120, resources={"metadata": {"path": str(work)}}).execute()
    finally:
        if saved is None:
            os.environ.pop("AGIO_STORE", None)
        else:
            os.environ["AGIO_STORE"] = saved
    mimes = [set(o.get("data", {})) for c in nb.cells for o in c.outputs]
    assert {"application/vnd.agio.diff+json", "text/html", "text/plain"} in mimes
    assert {"application/vnd.agio.tree+json", "text/html", "text/plain"} in mimes
    nb.metadata["kernelspec"] = {"name": "agio-absent", "display_name": "absent", "language": "python"}
    root = tmp_path_factory.mktemp("explore_lab")
    nbformat.write(nb, root / "explore.ipynb")
    # this checkout's build of the extension, ahead of any installed one
    data = root / "jupyter-data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "agio-notebook").symlink_to(BUILD)
    env = {**{k: v for k, v in os.environ.items() if k != "JUPYTER_PATH"}, "JUPYTER_PATH": str(data)}
    with running_lab(root, env, "--KernelSpecManager.allowed_kernelspecs=agio-absent") as served:
        yield served


def test_saved_diff_and_tree_render_through_the_extension(lab):
    assert (BUILD / "static").is_dir(), "build the extension first (scripts/build_labextension.sh)"
    assert os.path.exists(CHROMIUM), "Debian's chromium is needed (scripts/setup.sh --browser installs it)"
    base, token = lab
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1800})
        page.goto(f"{base}/lab/tree/explore.ipynb?token={token}")
        page.wait_for_selector(".jp-AgioRun .agio-tree", timeout=90000)
        dialog = page.locator(".jp-Dialog")
        try:  # JupyterLab asks which kernel to use for the unknown one: keep none
            dialog.wait_for(timeout=10000)
            dialog.locator("button.jp-mod-reject, button:has-text('No Kernel'), button:has-text('Cancel')").first.click()
            dialog.wait_for(state="detached", timeout=10000)
        except Exception:  # noqa: BLE001 - no dialog this time
            pass
        # the diff: rendered by the extension (not the HTML fallback), side by side, escaped, highlighted
        diff = page.locator(".jp-AgioRun .agio-diff")
        assert diff.count() == 1
        rows = diff.locator(".agio-diff-row")
        assert rows.count() == 4
        # the user's message is shared by the run and its retry: it lines up as the same step
        assert diff.locator(".agio-diff-changed").count() == 3 and diff.locator(".agio-diff-same").count() == 1
        assert "weather.city: \"Paris\" → \"Oslo\"" in diff.inner_text()
        # the retry's system prompt differs: said in each model step's row, and shown word by word above
        setup = diff.locator(".agio-diff-setup")
        assert setup.count() == 1 and "system prompt differs" in diff.inner_text()
        assert [t.strip() for t in setup.locator(".agio-diff-insert").all_inner_texts()] == ["Answer <b>briefly</b>."]
        assert setup.locator("b").count() == 0
        inserted = [t.strip() for t in diff.locator(".agio-diff-table .agio-diff-insert").all_inner_texts()]
        assert inserted == ["rain", "rainy."]  # the tool result, then the answer's changed word
        assert "<b>sunny</b>" in diff.inner_text()  # model text shown as text, never as markup
        assert diff.locator("b:has-text('sunny')").count() == 0
        # the tree: runs, the retry under the first attempt, the fork, the current attempt marked
        tree = page.locator(".jp-AgioRun .agio-tree")
        runs = tree.locator(".agio-tree-run")
        assert runs.count() == 3
        assert tree.locator(".agio-tree-current").count() == 2  # the retry and the fork's run
        assert tree.locator(".agio-tree-fork").count() == 1
        assert tree.locator(".agio-phase-tool").count() == 2
        transcript = runs.first.locator(".agio-tree-transcript").first
        assert not transcript.is_visible()
        runs.first.locator("summary").first.click()  # clicking a node shows that run's transcript
        transcript.wait_for(state="visible", timeout=10000)
        assert "weather?" in transcript.inner_text() and "It is <b>sunny</b>." in transcript.inner_text()
        # through the notebook: a node's button inserts a cell with the command below the tree's cell
        run_id = runs.first.get_attribute("data-run")
        cells_before = page.locator(".jp-Notebook .jp-Cell").count()
        runs.first.locator(".agio-tree-open").first.click()
        page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-Cell').length > {cells_before}",
                               timeout=30000)
        sources = page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor").all_inner_texts()
        assert any(f"%agio replay {run_id[:8]}" in text for text in sources)  # the id as the views show it
        # a saved transcript through this build of the renderer: the run's cost in its footer
        footer = page.locator(".jp-AgioRun .agio-run .agio-metrics").last
        assert "cost $0.0" in footer.inner_text()
        page.screenshot(path=str(out / "explore-diff-tree.png"), full_page=True)
        browser.close()
