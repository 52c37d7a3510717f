"""Composed agents in a real ipykernel: nested runs in the live view and the transcript, Stop reaching the
innermost run, and a handoff that the next %%agio cell follows."""

from __future__ import annotations

import ipykernel
import pytest

from kernel_support import of_type, offline_kernel
from test_notebook_stop import cancelled_bundle, collect_until, idle_of, stop_button

MIME = "application/vnd.agio.run+json"

SETUP = r'''
%load_ext agio_notebook
import asyncio
from agio_notebook import Agent, FunctionModel, Reply, tool

@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"

NAP = 30

def caller(tool_name, **args):
    def model(messages, tools):
        if messages[-1]["role"] == "user":
            return Reply.call(tool_name, **args)
        return "got " + messages[-1]["content"]
    return model

sleeper = Agent(model=FunctionModel(lambda m, t: caller("nap", seconds=NAP)(m, t)), tools=[nap], name="sleeper")
middle = Agent(model=FunctionModel(caller("sleeper", query="rest")), tools=[sleeper], name="middle")
boss = Agent(model=FunctionModel(caller("middle", query="delegate")), tools=[middle], name="boss")

specialist = Agent(model=FunctionModel(lambda m, t: "specialist here: " + m[-1]["content"]), name="specialist")
desk = Agent(model=FunctionModel(caller("transfer_to_specialist")), name="desk", handoffs=[specialist])

def _agio_last():
    return list(get_ipython().magics_manager.registry["AgioMagics"].controller.handles.values())[-1]
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "compose", SETUP)
    yield k
    k.close()


def innermost_napping(messages):
    """The live view shows the innermost agent's tool card running inside the two outer cards."""
    for m in of_type(messages, "comm_msg"):
        value = str(m["content"]["data"].get("state", {}).get("value", ""))
        if value.count('class="agio-nested-run"') == 2 and "nap</b>" in value:
            return True
    return False


def test_nested_runs_show_live_and_in_the_transcript(kernel):
    kernel.execute("NAP = 0.05")
    res = kernel.execute("%%agio boss --new-session\ngo")
    assert not of_type(res["messages"], "error")
    bundles = [m["content"]["data"] for m in of_type(res["messages"], "update_display_data", "display_data")
               if MIME in m["content"]["data"]]
    final = bundles[-1]
    assert final[MIME]["run"]["status"] == "completed"
    assert final["text/html"].count('class="agio-nested-run"') == 2
    assert "|      |   -> nap({\"seconds\": 0.05}) [ok] rested" in final["text/plain"]
    depths = kernel.value("sorted(__import__('agio_notebook').runs()"
                          "[lambda f: f.root_run_id == _agio_last().run_id]['depth'].tolist())")
    assert depths == [0, 1, 2]


@pytest.mark.skipif(int(ipykernel.__version__.split(".")[0]) < 7, reason="the Stop click needs ipykernel 7")
def test_stop_reaches_the_innermost_run(kernel):
    kernel.execute("NAP = 30")
    msg_id = kernel.kc.execute("%%agio boss --new-session\ngo")
    seen: list = []
    assert collect_until(kernel, seen, lambda s: stop_button(s) and innermost_napping(s), 60), "never got deep"
    click = kernel.kc.session.msg("comm_msg", {"comm_id": stop_button(seen),
                                               "data": {"method": "custom", "content": {"event": "click"}}})
    kernel.kc.shell_channel.send(click)
    assert collect_until(kernel, seen, cancelled_bundle, 30), "no cancelled transcript after Stop"
    assert collect_until(kernel, seen, lambda s: any(idle_of(msg_id)(m) for m in s), 30)
    kernel.reply_to(msg_id)
    statuses = kernel.value("__import__('agio_notebook').runs()[lambda f: f.root_run_id == _agio_last().run_id]"
                            ".sort_values('depth')[['agent_name', 'status']].values.tolist()")
    assert statuses == [["boss", "cancelled"], ["middle", "cancelled"], ["sleeper", "cancelled"]]
    kept = kernel.value("[s.role.value for r in __import__('agio_notebook').storage.open_repository().list_runs() "
                        "if r.root_run_id == _agio_last().run_id and r.depth == 2 "
                        "for s in __import__('agio_notebook').storage.open_repository().get_steps(r.session_id)]")
    assert kept == ["user", "assistant"]  # the innermost run's steps stay


def test_the_next_cell_goes_on_with_the_agent_holding_the_session(kernel):
    first = kernel.execute("%%agio desk --new-session\nmy invoice is wrong")
    live = " ".join(str(m["content"]["data"].get("state", {}).get("value", ""))
                    for m in of_type(first["messages"], "comm_msg", "comm_open"))
    assert "handed off: desk → specialist" in live  # the live view shows the change
    assert kernel.value("_agio_last().final_text").startswith("specialist here: ")
    kernel.execute("%%agio desk\nstill wrong")  # the cell names desk; the session is the specialist's
    assert kernel.value("_agio_last().final_text") == "specialist here: still wrong"
    agents = kernel.value("__import__('agio_notebook').runs(_agio_last().session_id)['agent_name'].tolist()")
    assert agents == ["specialist", "specialist"]


def test_a_kernel_interrupt_reaches_the_innermost_run_too(kernel):
    kernel.execute("NAP = 30")
    msg_id = kernel.kc.execute("%%agio boss --new-session\ngo")
    seen: list = []
    assert collect_until(kernel, seen, innermost_napping, 60), "never got deep"
    kernel.km.interrupt_kernel()
    assert collect_until(kernel, seen, lambda s: any(idle_of(msg_id)(m) for m in s), 30)
    kernel.reply_to(msg_id)
    statuses = kernel.value("__import__('agio_notebook').runs()[lambda f: f.root_run_id == _agio_last().run_id]"
                            "['status'].astype(str).tolist()")
    assert statuses == ["cancelled"] * 3
