"""Stop and the live footer in a real JupyterLab, in Debian's chromium: what a person sees and clicks.

"Run All" on a notebook with a slow run (latency, a slow tool) and a run whose tool naps for a minute:
the footer follows the run's phase, and Stop on the second (foreground) cell cancels it within 0.5 s.
"""

from __future__ import annotations

import os
import time
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
    '''import asyncio
from agio_notebook import Agent, Reply, ScriptedModel, tool

@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"

slow = Agent(model=ScriptedModel([Reply.call("nap", _text="Let me rest a moment first.", seconds=4),
                                  "Rested, and ready to answer now."], ttft=1.0, tokens_per_second=6),
             tools=[nap], name="slow")
sleeper = Agent(model=ScriptedModel([Reply.call("nap", seconds=120), "never said"]), tools=[nap], name="sleeper")''',
    "%%agio slow\nRest, then answer.",
    "%%agio sleeper\nNap for two minutes.",
]

# collects every phase the footer shows, as the page renders them
WATCH_PHASES = """() => {
  window.__phases = [];
  setInterval(() => {
    for (const el of document.querySelectorAll('.agio-phase')) {
      const t = el.textContent;
      if (window.__phases[window.__phases.length - 1] !== t) window.__phases.push(t);
    }
  }, 10);
}"""

# clicks Stop and measures, in the page, the time until the cell shows the cancelled transcript
CLICK_STOP = """async () => {
  const live = [...document.querySelectorAll('.agio-run.widget-vbox, .widget-vbox.agio-run')].pop();
  const stop = [...live.querySelectorAll('button')].find(b => b.textContent.includes('Stop'));
  const t0 = performance.now();
  stop.click();
  while (performance.now() - t0 < 60000) {
    const done = [...document.querySelectorAll('.jp-AgioRun .agio-header .agio-status')]
      .some(s => s.textContent === 'cancelled');
    if (done) return performance.now() - t0;
    await new Promise(r => setTimeout(r, 5));
  }
  return -1;
}"""


@pytest.fixture
def lab_with_kernel(kernelspec_dir, tmp_path):
    nb = new_notebook(cells=[new_code_cell(c) for c in CELLS],
                      metadata={"kernelspec": {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}})
    nbformat.write(nb, tmp_path / "stop.ipynb")
    env = {**os.environ, "AGIO_STORE": str(tmp_path / "store")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    with running_lab(tmp_path, env) as served:
        yield served


def test_footer_phases_then_stop_cancels_a_foreground_run(lab_with_kernel):
    base, token = lab_with_kernel
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 1400})
        open_with_kernel(page, base, token, "stop.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90000)
        page.wait_for_function("document.querySelector('.jp-Notebook-ExecutionIndicator, .jp-KernelStatus') !== null",
                               timeout=60000)
        page.evaluate(WATCH_PHASES)
        run_all(page, agio_cells=2)

        # the slow run: the footer names the tool while it runs
        page.wait_for_function("[...document.querySelectorAll('.agio-phase')]"
                               ".some(e => e.textContent === 'running 1 tool (nap)…')", timeout=120000)
        page.screenshot(path=str(out / "footer-running-tool.png"))
        page.wait_for_function("document.querySelectorAll('.jp-AgioRun .agio-run').length >= 1", timeout=120000)
        phases = page.evaluate("window.__phases")
        for expected in ("waiting for the model…", "streaming…", "running 1 tool (nap)…"):
            assert expected in phases, phases
        assert phases.index("streaming…") < phases.index("running 1 tool (nap)…"), phases
        assert phases.index("running 1 tool (nap)…") < len(phases) - 1 - phases[::-1].index("streaming…"), \
            f"the answer streams after the tool: {phases}"
        first = page.locator(".jp-AgioRun .agio-run").first
        assert first.locator(".agio-header .agio-status").inner_text() == "completed"
        assert "TTFT" in first.inner_text()

        # the second cell starts only now ("Run All" stays sequential); Stop it while its tool naps
        page.wait_for_function("document.querySelectorAll('.agio-run.widget-vbox, .widget-vbox.agio-run').length"
                               " >= 1 && [...document.querySelectorAll('.agio-phase')]"
                               ".some(e => e.textContent === 'running 1 tool (nap)…')", timeout=120000)
        page.screenshot(path=str(out / "stop-before-click.png"))
        elapsed_ms = page.evaluate(CLICK_STOP)
        page.screenshot(path=str(out / "stop-cancelled.png"))
        print(f"Stop click -> cancelled transcript: {elapsed_ms:.0f} ms")
        assert 0 <= elapsed_ms <= 500, f"Stop took {elapsed_ms:.0f} ms"
        cancelled = page.locator(".jp-AgioRun .agio-run").nth(1)
        assert cancelled.locator(".agio-step-user").count() == 1
        assert cancelled.locator(".agio-step-assistant").count() == 1  # the completed step is kept
        page.wait_for_function("[...document.querySelectorAll('.jp-OutputArea-output')]"
                               ".some(e => e.textContent.includes('stopped; its completed steps'))",
                               timeout=30000)
        browser.close()


STORY = " ".join(f"word{i}" for i in range(300))

PARTIAL_CELLS = [
    "%load_ext agio_notebook",
    f'''from agio_notebook import Agent, ScriptedModel
teller = Agent(model=ScriptedModel([{STORY!r}], tokens_per_second=8), name="teller")''',
    "%%agio teller\nTell me a long story.",
]


def test_stop_keeps_the_partial_answer_live_and_after_reopening(kernelspec_dir, tmp_path):
    """Stop while the answer streams: the words already shown stay, marked partial, in the live cell
    and in the saved transcript; the note under it is a status line, not stderr."""
    spec = {"name": KERNEL_NAME, "display_name": "agio test", "language": "python"}
    path = tmp_path / "partial.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in PARTIAL_CELLS], metadata={"kernelspec": spec}), path)
    env = {**os.environ, "AGIO_STORE": str(tmp_path / "store")}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        env.pop(name, None)
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        errors: list[str] = []
        with running_lab(tmp_path, env) as (base, token):
            page = browser.new_page(viewport={"width": 1200, "height": 1400})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            open_with_kernel(page, base, token, "partial.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90000)
            page.wait_for_function("document.body.innerText.includes('agio test | Idle')", timeout=90000)
            run_all(page, agio_cells=1)
            # some words have streamed into the live view: Stop now
            page.wait_for_function("[...document.querySelectorAll('.agio-run.widget-vbox, .widget-vbox.agio-run')]"
                                   ".some(v => v.innerText.includes('word12'))", timeout=120000)
            shown = page.evaluate("[...document.querySelectorAll('.agio-run.widget-vbox, .widget-vbox.agio-run')]"
                                  ".pop().innerText")
            elapsed_ms = page.evaluate(CLICK_STOP)
            assert elapsed_ms >= 0, "no cancelled transcript after Stop"
            run = page.locator(".jp-AgioRun .agio-run").first
            partial = run.locator(".agio-step-assistant.agio-partial")
            assert partial.count() == 1
            text = partial.locator(".agio-text").inner_text()
            assert text.startswith("word0 word1 word2") and "word12" in text, text
            assert len(text.split()) < 300 and STORY.startswith(text.strip())
            assert "word12" in shown
            assert partial.locator(".agio-partial-note").inner_text() == "stopped: partial answer"
            page.wait_for_function("[...document.querySelectorAll('.jp-OutputArea-output')]"
                                   ".some(e => e.textContent.includes('the partial answer are kept'))", timeout=30000)
            note = page.locator(".jp-OutputArea-output", has_text="the partial answer are kept")
            assert note.get_attribute("data-mime-type") == "application/vnd.jupyter.stdout"  # no stderr red
            page.screenshot(path=str(out / "stop-partial-live.png"))
            page.keyboard.press("Escape")
            page.keyboard.press("Control+s")
            deadline = time.time() + 90
            while time.time() < deadline:
                nb = nbformat.read(path, as_version=4)
                if any("application/vnd.agio.run+json" in o.get("data", {}) for o in nb.cells[2].get("outputs", [])):
                    break
                page.wait_for_timeout(300)
            saved = [o["data"]["application/vnd.agio.run+json"] for o in nb.cells[2].outputs
                     if "application/vnd.agio.run+json" in o.get("data", {})][-1]
            assert saved["run"]["status"] == "cancelled"
            assert any(e["type"] == "step_completed" and e["payload"]["step"].get("status") == "cancelled"
                       and e["payload"]["step"]["content"] == text for e in saved["events"])
            assert not [o for o in nb.cells[2].outputs if o.get("name") == "stderr"]
            page.close()  # before its server stops (else the lost connection is logged as an error)
        with running_lab(tmp_path, env) as (base, token):  # reopened: no kernel needed to see it
            page = browser.new_page(viewport={"width": 1200, "height": 1400})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{base}/lab/tree/partial.ipynb?token={token}")
            page.wait_for_selector(".jp-AgioRun .agio-run .agio-partial", timeout=90000)
            assert page.locator(".jp-AgioRun .agio-partial .agio-text").inner_text() == text
            page.screenshot(path=str(out / "stop-partial-reopened.png"))
            page.close()
        browser.close()
        assert not errors, errors
