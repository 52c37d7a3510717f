"""Each tutorial keeps its runs in a store of its own (``%agio config --own-store NAME``): a learner's stray
write in one (a skill added without ``repository=``) never reaches another's runs, frames or prompts, and
``%agio runs --every-store`` shows every store's runs in one table. Two real kernels on one default store,
as two tutorials open side by side."""

from __future__ import annotations

import pytest

from kernel_support import Kernel, install_kernelspec, of_type, stream_text

FEEDBACK = r'''%load_ext agio_notebook
%agio config --own-store learn_from_feedback
from agio_notebook import Agent, ScriptedModel, memory
memory.add_skill("weather-units", "When you give a forecast, use degrees Celsius.")  # no repository=: a stray write
tutor = Agent(model=ScriptedModel(["noted"], loop=True), name="tutor")
'''
CODER = r'''%load_ext agio_notebook
%agio config --own-store code_interpreter
from agio_notebook import Agent, ScriptedModel
coder = Agent(model=ScriptedModel(["done"], loop=True), name="coder")
'''


@pytest.fixture
def kernels(tmp_path):
    install_kernelspec(tmp_path / "jupyter")
    env = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "AGIO_MODEL": ""}
    started = [Kernel(tmp_path, env=env), Kernel(tmp_path, env=env)]
    yield tmp_path, started
    for k in started:
        k.close()


def ok(res) -> dict:
    assert res["reply"]["content"]["status"] == "ok", res["reply"]["content"]
    return res


def test_a_stray_write_in_one_tutorial_does_not_reach_another(kernels):
    root, (feedback, coder) = kernels
    out = stream_text(ok(feedback.execute(FEEDBACK))["messages"], "stdout")
    assert "store.learn_from_feedback" in out and str(root) not in out  # one line, no machine path
    ok(feedback.execute("%%agio tutor --new-session\nForecast for Oslo?"))
    ok(coder.execute(CODER))
    ok(coder.execute("%%agio coder --new-session\nPlot the sales."))
    # the other tutorial's prompt read no memory, and its frames hold its own run only
    read = coder.value("[e['payload'] for e in _agio.events.to_dict('records') if e['type'] == 'memory_read']")
    assert all(not r.get("items") for r in read), read
    assert coder.value("list(__import__('agio_notebook').runs()['agent_name'])") == ["coder"]
    assert coder.value("len(__import__('agio_notebook').memory.skills())") == 0
    assert feedback.value("list(__import__('agio_notebook').memory.skills()['name'])") == ["weather-units"]
    assert feedback.value("list(__import__('agio_notebook').runs()['agent_name'])") == ["tutor"]
    # the default store itself was never written
    assert not (root / "store").exists() or not any((root / "store").rglob("*.jsonl"))
    # one place shows them all
    res = ok(coder.execute("%agio runs --every-store"))
    table = of_type(res["messages"], "execute_result")[0]["content"]["data"]["text/plain"]
    lines = table.splitlines()
    assert any("learn_from_feedback" in line and "Forecast for Oslo?" in line for line in lines), table
    assert any("code_interpreter" in line and "Plot the sales." in line for line in lines), table
    # back to the default store, for the magics and Python alike
    ok(coder.execute("%agio config --own-store ''"))
    assert coder.value("len(__import__('agio_notebook').runs())") == 0


def test_a_bad_own_store_name_is_one_line(kernels):
    _, (k, _) = kernels
    ok(k.execute("%load_ext agio_notebook"))
    for bad in ("../escape", "a b", "x/y"):
        reply = k.execute(f"%agio config --own-store '{bad}'")["reply"]["content"]
        assert reply["ename"] == "UsageError" and "own store's name" in reply["evalue"] and "\n" not in reply["evalue"]
    reply = k.execute("%agio config --own-store a --store /tmp/x")["reply"]["content"]
    assert reply["ename"] == "UsageError" and "not both" in reply["evalue"]
