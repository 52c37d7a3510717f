"""Retry, Fork and attempt selection from a run's output in a real JupyterLab (Debian's chromium):
each click inserts and runs one cell with the equivalent %agio command, live and after the notebook
is saved, the server restarted and the notebook reopened with a kernel. No widget is left behind.
Also: %%agio cells get Markdown highlighting, not Python's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook
from playwright.sync_api import Page, sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, open_with_kernel, loaded_extension_entry, run_all, running_lab, save_until, source_extension_entry

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test-output"
MIME = "application/vnd.agio.run+json"
WIDGET = "application/vnd.jupyter.widget-view+json"
LONG = 90_000  # ms: generous, the machine is shared

CELLS = [
    "%load_ext agio_notebook",
    '''import time
from agio_notebook import Agent, FunctionModel, Reply, tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

answers = iter(range(1, 1000))

def counting(messages, tools):
    if messages[-1]["role"] == "user" and "add" in messages[-1]["content"]:
        return Reply.call("add", a=2, b=3)
    return f"answer {next(answers)}"

coder = Agent(model=FunctionModel(counting), tools=[add], name="coder2")
time.sleep(4)  # long enough to click a control while the kernel is busy''',
    "%%agio coder --new-session\nplease add 2 and 3",
]

def kernel_notebook(cells: list[str]):
    spec = {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}
    return new_notebook(cells=[new_code_cell(c) for c in cells], metadata={"kernelspec": spec})


def sources(page: Page) -> list[str]:
    return page.evaluate("""() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(
        c => c.querySelector('.cm-content') ? c.querySelector('.cm-content').innerText : '')""")


def cell(page: Page, i: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(i)


def wait_cells(page: Page, n: int) -> None:
    page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-Cell').length >= {n}", timeout=LONG)


def wait_output(page: Page, i: int, text: str) -> None:
    page.wait_for_function(
        """([i, text]) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
                           return c && c.querySelector('.jp-OutputArea') &&
                                  c.querySelector('.jp-OutputArea').innerText.includes(text); }""",
        arg=[i, text], timeout=LONG)


def wait_transcript(page: Page, i: int, kind: str) -> None:
    page.wait_for_function(
        """([i, kind]) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
                           const r = c && c.querySelector('.jp-AgioRun .agio-run');
                           return r && r.querySelector('.agio-header b').textContent === kind &&
                                  r.querySelector('.agio-status').textContent === 'completed' &&
                                  r.querySelector('.agio-controls') !== null; }""",
        arg=[i, kind], timeout=LONG)


def save_and_read(page: Page, path: Path, ready) -> nbformat.NotebookNode:
    """Save from the browser and wait until the file on disk holds what ``ready`` expects."""
    return save_until(page, path, ready, timeout=LONG / 1000)


def out_text(c) -> str:
    return json.dumps(c.get("outputs", []))


def no_widgets(nb) -> bool:
    return all(WIDGET not in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def open_notebook(pw, base, token, name):
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1300, "height": 1600})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    open_with_kernel(page, base, token, name)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=LONG)
    # the kernel has started and is idle (the status bar says so): keys and clicks now reach it
    page.wait_for_function("document.body.innerText.includes('agio test | Idle')", timeout=LONG)
    return browser, page, errors


WATCH_RESTART = """() => {
  window.__restarted = false;
  setInterval(() => { if (document.body.innerText.includes('Restarting')) window.__restarted = true; }, 10);
}"""


def restart_kernel(page: Page) -> None:
    """Kernel > Restart Kernel…, as a person does it; returns once the new kernel is idle."""
    page.evaluate(WATCH_RESTART)
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    page.locator(".lm-Menu-itemLabel", has_text="Restart Kernel…").first.click()
    page.locator(".jp-Dialog-button.jp-mod-accept").click()
    page.wait_for_function("window.__restarted && document.body.innerText.includes('agio test | Idle')",
                           timeout=LONG)


def output_text(page: Page, i: int) -> str:
    return cell(page, i).locator(".jp-OutputArea").inner_text()


def no_out_prompt(page: Page, i: int) -> bool:
    """The cell shows no ``Out[n]`` value (an execute_result) beside what it printed or drew."""
    return cell(page, i).locator(".jp-OutputArea-executeResult").count() == 0


def click_every_control(page: Page, run_id: str, session_id: str, first: int, retry_works: bool) -> None:
    """Retry, Fork, feedback and Use attempt under the first run; each inserts one cell, in click order,
    below the cells inserted for that run before (from index ``first`` on)."""
    run = cell(page, 2).locator(".agio-run")
    run.locator("button.agio-retry").click()
    wait_cells(page, first + 1)
    assert sources(page)[first] == f"%agio retry {run_id[:8]} --from-seq 4"
    if retry_works:
        wait_transcript(page, first, "agio Retry")
        assert no_out_prompt(page, first)
    else:  # the agent is not defined in this kernel: one line naming it, never the offline model
        wait_output(page, first, "Agent(name='coder2'")
        assert "offline" not in output_text(page, first)
        assert cell(page, first).locator(".agio-run").count() == 0
    run.locator("button.agio-fork").click()
    wait_cells(page, first + 2)
    assert sources(page)[first + 1] == f"%agio fork {session_id} --at 4 --run {run_id[:8]}"
    wait_output(page, first + 1, "forked into session")
    assert output_text(page, first + 1).count("forked into session") == 1 and no_out_prompt(page, first + 1)
    run.locator(".agio-feedback button.agio-thumb-up").click()
    wait_cells(page, first + 3)
    assert sources(page)[first + 2] == f"%agio feedback {run_id[:8]} +1"
    wait_output(page, first + 2, "feedback +1 stored")
    run.locator("button.agio-use-attempt").click()
    wait_cells(page, first + 4)
    assert sources(page)[first + 3].startswith(f"%agio use-attempt {run_id[:8]} ")
    wait_output(page, first + 3, "is current")
    assert "already loaded" not in page.locator(".jp-Notebook").inner_text()


def test_controls_work_live_after_a_restart_and_in_a_fresh_kernel(lab_env):
    root, env = lab_env
    path = root / "controls.ipynb"
    nbformat.write(kernel_notebook(CELLS), path)
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        # -- live: a run that called a tool; Fork works on the first click ---------------------------------
        with running_lab(root, env) as (base, token):
            assert loaded_extension_entry(base, token) == source_extension_entry()
            browser, page, errors = open_notebook(pw, base, token, "controls.ipynb")
            run_all(page, agio_cells=1)
            wait_transcript(page, 2, "agio Run")
            first = cell(page, 2).locator(".agio-run")
            run_id = first.get_attribute("data-agio-run")
            assert no_out_prompt(page, 2), "no Out[n] repr under a %%agio cell"
            # the pickers offer only steps their commands accept: no fork inside the tool batch (after 2,
            # before its result 3), no retry from the tool result
            assert first.locator(".agio-fork-picker option").evaluate_all("os => os.map(o => o.value)") == ["1", "3", "4"]
            assert first.locator(".agio-retry-picker option").evaluate_all("os => os.map(o => o.value)") == ["2", "4"]
            assert first.locator(".agio-fork-picker").input_value() == "4"
            assert first.locator(".agio-retry-picker").input_value() == "4"  # the answer
            # icons are drawn, not emoji: SVG with text labels and accessible names
            assert first.locator(".agio-tool-card summary svg.agio-icon-tool").count() == 1
            up = first.locator(".agio-feedback button.agio-thumb-up")
            assert up.get_attribute("aria-label") == "Feedback: this run was good (+1)"
            assert up.locator("svg").count() == 1 and "Good" in up.inner_text()
            assert not re.search("[\U0001F300-\U0001FAFF\u2442]", first.inner_text())

            first.locator("button.agio-fork").click()
            wait_cells(page, 4)
            session_id = sources(page)[3].split()[2]
            assert len(session_id) == 8  # the ids the transcript shows
            assert sources(page)[3] == f"%agio fork {session_id} --at 4 --run {run_id[:8]}"
            wait_output(page, 3, "forked into session")
            assert output_text(page, 3).count("forked into session") == 1 and no_out_prompt(page, 3)
            new_session = output_text(page, 3).split("forked into session ")[1].split(";")[0]
            assert output_text(page, 3).count(new_session) == 1  # the new id, once

            first.locator("button.agio-retry").click()  # goes below the fork cell: click order
            wait_cells(page, 5)
            assert sources(page)[4] == f"%agio retry {run_id[:8]} --from-seq 4"
            wait_transcript(page, 4, "agio Retry")
            assert "answer 2" in cell(page, 4).locator(".agio-run").inner_text() and no_out_prompt(page, 4)
            # the first transcript now says it is superseded, and its controls act on it
            page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell')[2]"
                                   ".querySelector('.agio-superseded-note') !== null", timeout=LONG)
            assert "superseded" in first.locator(".agio-header").inner_text()
            assert first.locator(".agio-attempt-picker").input_value() == "1"

            first.locator(".agio-feedback button.agio-thumb-up").click()
            wait_cells(page, 6)
            assert sources(page)[5] == f"%agio feedback {run_id[:8]} +1"
            wait_output(page, 5, "feedback +1 stored")
            first.locator("button.agio-use-attempt").click()
            wait_cells(page, 7)
            assert sources(page)[6] == f"%agio use-attempt {run_id[:8]} 1"
            wait_output(page, 6, "is current")
            assert "already loaded" not in page.locator(".jp-Notebook").inner_text()
            assert page.get_by_text("Error displaying widget").count() == 0
            page.screenshot(path=str(OUT / "controls-live.png"), full_page=True)

            # -- the kernel restarted: every control still works in one click -------------------------------
            restart_kernel(page)
            click_every_control(page, run_id, session_id, 7, retry_works=False)
            page.screenshot(path=str(OUT / "controls-after-restart.png"), full_page=True)
            cell(page, 10).locator(".jp-InputPrompt").click()
            nb = save_and_read(page, path, lambda nb: len(nb.cells) == 11 and all(c.get("outputs") for c in nb.cells[2:]))
            assert no_widgets(nb), "a widget was saved in an output"
            assert [c.metadata.get("agio", {}).get("inserted_for") for c in nb.cells[3:]] == [run_id] * 8
            assert not errors, errors
            browser.close()

        # -- reopened in a fresh kernel that never ran %load_ext -------------------------------------------
        with running_lab(root, env) as (base, token):
            browser, page, errors = open_notebook(pw, base, token, "controls.ipynb")
            page.wait_for_function("document.querySelectorAll('.jp-AgioRun .agio-run .agio-controls').length >= 2",
                                   timeout=LONG)
            # define the agent (not %load_ext) and, while that cell still runs, click Retry twice:
            # one cell, which waits its turn
            cell(page, 1).locator(".cm-content").click()
            page.keyboard.press("Control+Enter")
            page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell')[1]"
                                   ".querySelector('.jp-InputPrompt').innerText.includes('*')", timeout=LONG)
            retry = cell(page, 2).locator(".agio-run button.agio-retry")
            retry.click()
            wait_cells(page, 12)
            retry.click()
            wait_transcript(page, 11, "agio Retry")
            assert len(sources(page)) == 12, "a second click while the cell waited added a second cell"
            assert sources(page)[11] == f"%agio retry {run_id[:8]} --from-seq 4"
            assert "answer 1" in cell(page, 11).locator(".agio-run").inner_text()  # the kernel's own agent
            assert no_out_prompt(page, 11)
            # and the rest of the controls
            run = cell(page, 2).locator(".agio-run")
            run.locator("button.agio-fork").click()
            wait_cells(page, 13)
            wait_output(page, 12, "forked into session")
            run.locator(".agio-feedback button.agio-thumb-down").click()
            wait_cells(page, 14)
            assert sources(page)[13] == f"%agio feedback {run_id[:8]} -1"
            wait_output(page, 13, "feedback -1 stored")
            run.locator("button.agio-use-attempt").click()
            wait_cells(page, 15)
            wait_output(page, 14, "is current")
            page.screenshot(path=str(OUT / "controls-reopened.png"), full_page=True)
            assert page.get_by_text("Error displaying widget").count() == 0
            cell(page, 14).locator(".jp-InputPrompt").click()
            nb = save_and_read(page, path, lambda nb: len(nb.cells) == 15 and all(c.get("outputs") for c in nb.cells[2:]))
            retried = [o["data"][MIME] for o in nb.cells[11].outputs if MIME in o.get("data", {})]
            assert retried and retried[-1]["run"]["status"] == "completed" and retried[-1]["run"]["kind"] == "retry"
            assert no_widgets(nb)
            assert not errors, errors
            browser.close()


def test_agio_cells_are_highlighted_as_markdown(lab_env):
    root, env = lab_env
    nbformat.write(kernel_notebook(["%%agio\nWhat's the weather in {city}?", "x = 'it' + 's'"]),
                   root / "highlight.ipynb")
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw, running_lab(root, env) as (base, token):
        assert loaded_extension_entry(base, token) == source_extension_entry()
        browser, page, _ = open_notebook(pw, base, token, "highlight.ipynb")
        # run the Python cell: the kernel's language info arrives and resets every cell's mode; ours stays
        cell(page, 1).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell')[1]"
                               ".querySelector('.jp-InputPrompt').innerText.includes('[1]')", timeout=LONG)
        colors = """([i, needle]) => {
            const line = [...document.querySelectorAll('.jp-Notebook .jp-Cell')[i].querySelectorAll('.cm-line')]
                .find(l => l.textContent.includes(needle));
            return line ? [...line.querySelectorAll('span')]
                .map(s => [s.textContent, getComputedStyle(s).color]) : null;
        }"""
        page.wait_for_function(f"({colors})([1, \"'it'\"]).some(([t]) => t === \"'it'\")", timeout=LONG)
        string_color = next(c for t, c in page.evaluate(colors, [1, "'it'"]) if t == "'it'")
        assert cell(page, 0).get_attribute("data-agio-highlight") == "text/x-markdown"
        assert cell(page, 1).get_attribute("data-agio-highlight") is None
        spans = page.evaluate(colors, [0, "What's"])
        assert spans is not None and all(c != string_color for _, c in spans), spans
        # typed into a new cell, the mode follows the text
        page.keyboard.press("Escape")
        page.keyboard.press("b")
        wait_cells(page, 3)
        cell(page, 2).locator(".cm-content").click()
        page.keyboard.type("%%agio\nIt's typed here")
        page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell')[2]"
                               ".getAttribute('data-agio-highlight') === 'text/x-markdown'", timeout=LONG)
        spans = page.evaluate(colors, [2, "It's"])
        assert spans is not None and all(c != string_color for _, c in spans), spans
        page.screenshot(path=str(OUT / "agio-cell-highlighting.png"))
        browser.close()
