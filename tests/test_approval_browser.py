"""The approval card in a real JupyterLab (Debian's chromium): the person edits the arguments twice while
another cell runs, then approves, and the second edit is what runs. While a cell runs, the browser
sends a widget only one update until the kernel reports it done (``notebook/approval.py``)."""

from __future__ import annotations

import nbformat
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from lab_support import CHROMIUM, CHROMIUM_ARGS, open_with_kernel, run_all, running_lab
from test_notebook_approval import SETUP
from test_transcript_controls_browser import LONG, kernel_notebook

CELLS = [
    SETUP,  # the kernel tests' guarded agent: its tool needs approval
    "%%agio guarded --new-session\nclean up",
    # runs while the card waits (the cell above is released): a cell that awaits, as waiting for a run does
    "while not _agio.done:\n    await asyncio.sleep(0.05)\nprint('deleted:', deleted)",
]

EDITOR = ".agio-approval textarea"


def edit(page, text: str) -> None:
    """Type into the card's editor and leave it (Tab), as a person does; the editor sends on leaving."""
    page.evaluate(f"document.querySelector('{EDITOR}').dataset.typedIn = '1'")
    box = page.locator(EDITOR)
    box.fill(text)
    box.press("Tab")


def test_a_second_edit_made_while_a_cell_runs_is_the_one_that_runs(lab_env):
    root, env = lab_env
    nbformat.write(kernel_notebook(CELLS), root / "approve.ipynb")
    with sync_playwright() as pw:
        with running_lab(root, env) as (base, token):
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1300, "height": 1400})
            open_with_kernel(page, base, token, "approve.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=LONG)
            run_all(page, agio_cells=1)
            page.locator(EDITOR).wait_for(timeout=LONG)
            # the %%agio cell is released (it has its number) and the last cell runs
            page.wait_for_function("""() => {
                const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
                  .map(p => p.textContent);
                return /\\[\\d+\\]/.test(prompts[1]) && /\\[\\*\\]/.test(prompts[2]);
            }""", timeout=LONG)
            edit(page, '{"name": "first.txt"}')
            try:  # a moment later the person looks again: the card shows a fresh editor once the edit is in
                page.wait_for_selector(f"{EDITOR}:not([data-typed-in])", timeout=10000)
            except PlaywrightTimeout:
                pass  # (without a fresh editor they type into the same one)
            edit(page, '{"name": "second.txt"}')
            page.locator(".agio-approval button:has-text('Approve')").click()
            page.wait_for_selector(".jp-AgioRun .agio-run", timeout=LONG)  # the run's transcript
            last = page.locator(".jp-Notebook .jp-CodeCell").nth(2).locator(".jp-OutputArea")
            last.get_by_text("deleted:").wait_for(timeout=LONG)
            assert last.inner_text().strip() == "deleted: ['second.txt']"
            transcript = page.locator(".jp-AgioRun .agio-run").first.inner_text()
            assert "deleted second.txt" in transcript and "first.txt" not in transcript
            browser.close()
