"""The browser tests' answer to JupyterLab's "Select Kernel" dialog keeps the notebook's running kernel.

Under load, JupyterLab asked which kernel to use when Run All came before the page had connected to the
notebook's kernel (the server had started it; the page's notebook had none yet). The tests' answer, the
proposed kernelspec, started a second kernel in place of the first, and the cells queued to the first
were never run (``bench/lab_extension_under_load.py``, ``docs/benchmarks.md``). Here the page is put in
that state on a quiet machine: its notebook has no kernel while the server runs one for it.
"""

from __future__ import annotations

import json
import time
import urllib.request

import nbformat
from playwright.sync_api import sync_playwright

from kernel_support import KERNEL_NAME
from lab_support import CHROMIUM, CHROMIUM_ARGS, KERNEL_CONNECTED, accept_kernel_choice, run_all, running_lab
from test_transcript_controls_browser import LONG, kernel_notebook


def kernels(base: str, token: str) -> list[dict]:
    return json.loads(urllib.request.urlopen(f"{base}/api/kernels?token={token}").read())


def test_the_dialog_is_answered_with_the_kernel_the_server_runs_for_the_notebook(lab_env):
    root, env = lab_env
    nb = kernel_notebook(["x = 6 * 7", "print(x)"])
    nb.metadata["kernelspec"] = {"name": "agio-absent", "display_name": "absent", "language": "python"}
    nbformat.write(nb, root / "choice.ipynb")
    with sync_playwright() as pw:
        with running_lab(root, env) as (base, token):
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"{base}/lab/tree/choice.ipynb?token={token}")
            # its kernelspec is unknown here: JupyterLab asks, and the notebook is left with no kernel
            dialog = page.locator(".jp-Dialog:has-text('Select Kernel')")
            dialog.wait_for(timeout=LONG)
            dialog.locator("button.jp-mod-reject").click()
            dialog.wait_for(state="detached", timeout=LONG)
            # meanwhile the server runs a kernel for the notebook (as open_with_kernel starts it)
            body = json.dumps({"path": "choice.ipynb", "name": "choice.ipynb", "type": "notebook",
                               "kernel": {"name": KERNEL_NAME}}).encode()
            urllib.request.urlopen(urllib.request.Request(
                f"{base}/api/sessions?token={token}", data=body, method="POST",
                headers={"Content-Type": "application/json"}), timeout=LONG / 1000).read()
            (running,) = kernels(base, token)
            # Kernel > Change Kernel…, once the page's lists of running kernels and sessions (it polls the
            # server for each) have it, as the dialog under load had it
            deadline = time.monotonic() + LONG / 1000
            while True:
                page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
                page.locator(".lm-Menu-itemLabel", has_text="Change Kernel…").first.click()
                dialog.wait_for(timeout=LONG)
                if dialog.locator("option[title^='Path: choice.ipynb']").count() or time.monotonic() > deadline:
                    break
                dialog.locator("button.jp-mod-reject").click()  # not listed yet: look again in a moment
                dialog.wait_for(state="detached", timeout=LONG)
                page.wait_for_timeout(500)
            assert dialog.locator("option:checked").get_attribute("value") == '{"name":"%s"}' % KERNEL_NAME
            assert accept_kernel_choice(page)
            page.wait_for_function(KERNEL_CONNECTED, polling=250, timeout=LONG)
            run_all(page)
            page.locator(".jp-Notebook .jp-CodeCell").nth(1).get_by_text("42").wait_for(timeout=LONG)
            assert [k["id"] for k in kernels(base, token)] == [running["id"]]  # joined it: none started
            browser.close()
        assert (root / "jupyter-lab.log").read_text().count("Kernel started:") == 1
