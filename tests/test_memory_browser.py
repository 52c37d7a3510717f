"""In a real JupyterLab (Debian's chromium): a saved notebook, reopened with no kernel, shows the
memory card and draws the run's trace graph, from this package's own build of the extension."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from playwright.sync_api import sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, open_with_kernel, loaded_extension_entry, running_lab, source_extension_entry

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "agio_notebook" / "labextension"

SETUP = '''
%load_ext agio_notebook
from agio_notebook import Agent, FunctionModel, Reply, memory, tool
from agio_notebook.models.scripted import call

memory.add_skill("units", "Always give the unit <b>in bold</b>.", scope="tutor")

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

def reply(messages, tools):
    if messages[-1]["role"] == "user":
        return Reply.calls(call("add", a=1, b=2), call("add", a=3, b=4))
    return "3 and 7 units"

tutor = Agent(model=FunctionModel(reply), tools=[add], name="tutor")
'''


@pytest.fixture(scope="module")
def lab(kernelspec_dir, tmp_path_factory):
    assert (BUILD / "package.json").exists(), "build the extension first (scripts/build_labextension.sh)"
    work = tmp_path_factory.mktemp("memory-lab")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell('%%agio tutor --new-session\nadd the units <img src=x onerror="window.__pwned=1">')])
    env_backup = {k: os.environ.get(k) for k in ("AGIO_STORE", "OPENAI_API_KEY", "OPENAI_BASE_URL")}
    os.environ.update({"AGIO_STORE": str(work / "store"), "OPENAI_API_KEY": ""})
    os.environ.pop("OPENAI_BASE_URL", None)
    try:
        NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120, resources={"metadata": {"path": str(work)}}).execute()
    finally:
        for k, v in env_backup.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    nb.metadata["kernelspec"] = {"name": "agio-absent", "display_name": "absent", "language": "python"}
    root = work / "served"
    root.mkdir()
    nbformat.write(nb, root / "memory.ipynb")
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_PATH"}
    with running_lab(root, env, "--KernelSpecManager.allowed_kernelspecs=agio-absent") as served:
        yield served


def test_memory_card_and_trace_graph_in_a_reopened_notebook(lab):
    base, token = lab
    assert loaded_extension_entry(base, token) == source_extension_entry()  # this tree's build
    assert os.path.exists(CHROMIUM), "Debian's chromium is needed (scripts/setup.sh --browser installs it)"
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1600})
        page.goto(f"{base}/lab/tree/memory.ipynb?token={token}")
        page.wait_for_selector(".jp-AgioRun .agio-run", timeout=60000)
        dialog = page.locator(".jp-Dialog")
        try:
            dialog.wait_for(timeout=10000)
            dialog.locator("button.jp-mod-reject, button:has-text('No Kernel'), button:has-text('Cancel')").first.click()
            dialog.wait_for(state="detached", timeout=10000)
        except Exception:  # noqa: BLE001 - no dialog this time
            pass
        run = page.locator(".jp-AgioRun .agio-run").first
        card = run.locator(".agio-step-memory details.agio-memory-card")
        card.wait_for(timeout=30000)  # only this package's build draws it
        assert "1 skill, 0 experiences · hybrid" in card.locator("summary").inner_text()
        card.locator("summary").click()
        assert "Always give the unit <b>in bold</b>." in card.locator("li").inner_text()
        assert "## Memory" in card.locator("pre.agio-memory-text").inner_text()
        trace = run.locator("details.agio-trace")
        assert trace.locator("img").count() == 0  # drawn only when opened
        trace.locator("summary").click()
        img = trace.locator("img.agio-trace-image")
        img.wait_for(timeout=30000)
        page.wait_for_function("document.querySelector('img.agio-trace-image').naturalWidth > 0", timeout=30000)
        size = img.evaluate("i => [i.naturalWidth, i.naturalHeight]")
        assert size[0] > 100 and size[1] > 200  # user, memory, model, two tools, model: a tall DAG
        assert page.evaluate("window.__pwned") is None
        assert run.locator("img:not(.agio-trace-image)").count() == 0
        page.screenshot(path=str(out / "memory-trace.png"), full_page=True)
        browser.close()


@pytest.fixture
def lab_with_kernel(kernelspec_dir, tmp_path):
    """A notebook executed and saved, served by a lab that can start the test kernel on the same store."""
    store = tmp_path / "store"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell("%%agio tutor --new-session\nadd the units")],
        metadata={"kernelspec": {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}})
    env = {**os.environ, "AGIO_STORE": str(store)}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    saved = {k: os.environ.get(k) for k in ("AGIO_STORE",)}
    os.environ["AGIO_STORE"] = str(store)
    try:
        NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if saved["AGIO_STORE"] is None:
            os.environ.pop("AGIO_STORE", None)
        else:
            os.environ["AGIO_STORE"] = saved["AGIO_STORE"]
    nbformat.write(nb, tmp_path / "thumbs.ipynb")
    with running_lab(tmp_path, env) as served:
        yield served, store


def test_thumbs_in_a_reopened_notebook_store_feedback_through_the_kernel(lab_with_kernel):
    (base, token), store = lab_with_kernel
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1600})
        open_with_kernel(page, base, token, "thumbs.ipynb")
        page.wait_for_selector(".jp-AgioRun .agio-run", timeout=90000)
        page.wait_for_function("document.body.innerText.includes('agio test | Idle')", timeout=90000)
        # the learner reopens the notebook and runs its first cell (the extension and the agent) again
        page.locator(".jp-Notebook .jp-Cell").first.locator(".cm-content").click()
        page.keyboard.press("Control+Enter")  # the kernel runs requests in order: this one before the thumb's
        run = page.locator(".jp-AgioRun .agio-run").first
        run_id = run.get_attribute("data-agio-run")
        run.locator(".agio-feedback button.agio-thumb-down").click()
        try:
            page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length >= 3", timeout=90000)
        except Exception:
            page.screenshot(path=str(ROOT / "test-output" / "memory-thumbs-failed.png"), full_page=True)
            raise
        source = page.evaluate("() => document.querySelectorAll('.jp-Notebook .jp-Cell')[2]"
                               ".querySelector('.cm-content').innerText")
        assert source == f"%agio feedback {run_id[:8]} -1"  # the command only: the click loaded agio silently
        try:
            page.wait_for_function(
                """() => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[2];
                           const o = c && c.querySelector('.jp-OutputArea');
                           return o && o.innerText.includes('proposed experience'); }""", timeout=90000)
        except Exception:
            page.screenshot(path=str(ROOT / "test-output" / "memory-thumbs-failed.png"), full_page=True)
            raise
        said = page.locator(".jp-Notebook .jp-Cell").nth(2).inner_text()
        assert "feedback -1 stored on run" in said
        # a rating without words still proposes a lesson with content, and says how to give the words
        assert "rated wrong" in said and "Do not answer this way again" not in said and "add your words" in said
        page.screenshot(path=str(ROOT / "test-output" / "memory-thumbs.png"), full_page=True)
        browser.close()
    from agio_notebook import memory
    from agio_notebook.storage import TinyDBRepository

    repo = TinyDBRepository(store)
    frame = memory.feedback(repository=repo)
    assert list(frame["run_id"]) == [run_id] and list(frame["rating"]) == [-1]
    assert list(memory.proposals(repository=repo)["status"]) == ["proposed"]
