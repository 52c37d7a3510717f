"""sweep() in a real ipykernel: the live monitor redraws in the calling cell while runs go on."""

from __future__ import annotations

import pytest

from kernel_support import of_type, offline_kernel

SETUP = r'''
%load_ext agio_notebook
import agio_notebook as agio
from agio_notebook.models import set_prices
from agio_notebook import Agent, Reply, ScriptedModel, StepRunner
from agio_notebook.scoring import regex
slow = ScriptedModel([Reply("sunny", delay=0.15)], loop=True, name="slow")
source = await StepRunner(Agent(model=ScriptedModel(["hello"]))).run(None, "weather?")
set_prices({"priced": {"prompt": 1000.0, "completion": 1000.0}})
priced = Agent(model=ScriptedModel(["Sunny today."], name="priced", loop=True), name="priced")
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


def test_live_footer_shows_cost_and_retry_reuses(kernel):
    res = kernel.execute("%%agio priced --new-session\nWeather?", timeout=60)
    bundles = [m["content"]["data"] for m in of_type(res["messages"], "display_data", "update_display_data")
               if "application/vnd.agio.run+json" in m["content"]["data"]]
    assert bundles, "the run left no transcript"
    run = bundles[-1]["application/vnd.agio.run+json"]["run"]
    assert run["metrics"]["cost"] > 0
    assert f"cost &#36;{run['metrics']['cost']:.4f}" in bundles[-1]["text/html"]  # a dollar, never math
    # the live widget's footer (comm messages while the run streamed) showed the cost too
    live = [str(v) for m in of_type(res["messages"], "comm_open", "comm_msg")
            for v in ((m["content"].get("data") or {}).get("state") or {}).values()]
    assert any("agio-metrics" in v and "cost $" in v for v in live)
    run_id = run["id"]
    res = kernel.execute(f"%agio retry {run_id} --reuse", timeout=60)
    retried = [m["content"]["data"]["application/vnd.agio.run+json"]["run"] for m in
               of_type(res["messages"], "display_data", "update_display_data")
               if "application/vnd.agio.run+json" in m["content"]["data"]][-1]
    assert retried["retry_of"] == run_id and retried["final_text"] == "Sunny today."
    assert retried["metrics"]["reused_calls"] == 1 and retried["metrics"]["cost"] == 0.0
    html = [m["content"]["data"]["text/html"] for m in of_type(res["messages"], "display_data", "update_display_data")
            if "application/vnd.agio.run+json" in m["content"]["data"]][-1]
    assert "1 calls" in html and "reused from the record" in html and "cost &#36;0" in html
