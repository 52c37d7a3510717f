"""sweep() in a real ipykernel: the live monitor redraws in the calling cell while runs go on."""

from __future__ import annotations

import pytest

from kernel_support import of_type, offline_kernel

SETUP = r'''
import agio_notebook as agio
from agio_notebook import Agent, Reply, ScriptedModel, StepRunner
from agio_notebook.scoring import regex
slow = ScriptedModel([Reply("sunny", delay=0.15)], loop=True, name="slow")
source = await StepRunner(Agent(model=ScriptedModel(["hello"]))).run(None, "weather?")
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "explore_kernel", SETUP)
    yield k
    k.close()


def test_sweep_monitor_updates_live_and_result_displays(kernel):
    res = kernel.execute("result = agio.sweep(source.session_id, at=1, agent=Agent(model=slow), repeats=8, "
                         "concurrency=2, scorers=[regex('sunny')])\nresult", timeout=120)
    msgs = res["messages"]
    shown = [m for m in of_type(msgs, "display_data") if "agio-sweep-monitor" in m["content"]["data"].get("text/html", "")]
    updates = [m for m in of_type(msgs, "update_display_data")
               if "agio-sweep-monitor" in m["content"]["data"].get("text/html", "")]
    assert len(shown) == 1
    assert len(updates) >= 3  # redrawn while the runs went on, not only at the end
    assert "sweep: 8/8 runs" in updates[-1]["content"]["data"]["text/html"]
    assert any("sweep: 0/8 runs" in m["content"]["data"]["text/html"] or "sweep: 2/8 runs" in
               m["content"]["data"]["text/html"] for m in shown + updates[:2])
    result = of_type(msgs, "execute_result")[0]["content"]["data"]["text/html"]
    assert "agio-sweep-variant" in result
    assert kernel.value("result.frame['score_regex'].tolist()") == [1.0] * 8
