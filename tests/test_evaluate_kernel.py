"""evaluate() in a real ipykernel: the result displays as the evaluation view (data, HTML, text), a stored
evaluation displays the same after a kernel restart, and compare() of two stored ones too."""

from __future__ import annotations

import re

import pytest

from evaluate_support import SETUP as EVALUATE_SETUP
from kernel_support import of_type, offline_kernel

MIME = "application/vnd.agio.evaluation+json"
SETUP = "%load_ext agio_notebook\n" + EVALUATE_SETUP


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "evaluate_kernel", SETUP)
    yield k
    k.close()


def _result(res):
    shown = of_type(res["messages"], "execute_result")
    assert shown, [m["content"] for m in of_type(res["messages"], "error", "stream")]
    return shown[0]["content"]["data"]


def test_an_evaluation_displays_its_view_and_a_stored_one_after_a_restart(kernel):
    res = kernel.execute("ev = agio.evaluate({'hasty': Agent(model=FunctionModel(hasty), name='hasty'), "
                         "'careful': Agent(model=FunctionModel(careful), name='careful')}, data, [correct], "
                         "epochs=2, seed=3, prompt='{question}', name='in-kernel')\nev", timeout=120)
    data = _result(res)
    assert set(data) >= {MIME, "text/html", "text/plain"}
    view = data[MIME]
    assert view["kind"] == "evaluation" and view["variants"] == ["hasty", "careful"] and view["epochs"] == 2
    html = data["text/html"]
    assert html.count("class='agio-eval-variant'") == 2 and html.count("class='agio-eval-track'") == 2
    assert "95% percentile cluster bootstrap (samples resampled), 2,000 resamples" in html
    assert html.count("class='agio-eval-changed agio-eval-better'") == 3  # q0, q3, q6
    assert "&lt;b&gt;sure&lt;/b&gt;" in html and "<b>sure</b>" not in html  # model output is text
    assert "<svg" not in html and "<script" not in html
    assert "agio evaluation 'in-kernel'" in data["text/plain"]
    before = re.findall(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", html)
    # after a restart the stored evaluation comes back with the same table
    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=60)
    kernel.execute(SETUP, timeout=60)
    again = _result(kernel.execute("from agio_notebook.explore.evaluate import load\nload('in-kernel')", timeout=60))
    assert re.findall(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", again["text/html"]) == before
    # and two stored evaluations compare, as the comparison view
    kernel.execute("agio.evaluate(Agent(model=FunctionModel(careful), name='careful'), data, [correct], "
                   "prompt='{question}', name='later')", timeout=120)
    cmp = _result(kernel.execute("agio.compare('in-kernel', 'later', variant_a='hasty')", timeout=60))
    assert cmp[MIME]["kind"] == "comparison" and cmp[MIME]["better"] == 3 and cmp[MIME]["worse"] == 0
    assert "in-kernel/hasty" in cmp["text/html"] and "later/careful" in cmp["text/html"]
    assert "McNemar p = 0.25" in cmp["text/html"]
