"""A typed agent in a real kernel: ``%%agio AGENT --deps NAME`` hands a notebook variable to the tools, the
cell's transcript shows the typed answer, and wrong deps are one line that runs nothing."""

from __future__ import annotations

import pytest

from kernel_support import of_type, offline_kernel, stream_text

SETUP = r'''
%load_ext agio_notebook
import dataclasses
import pydantic
from agio_notebook import Agent, Reply, RunContext, ScriptedModel, tool

@dataclasses.dataclass
class Shop:
    owner: str

class Answer(pydantic.BaseModel):
    owner: str
    open: bool

@tool
def who(ctx: RunContext[Shop]) -> str:
    """Who owns the shop."""
    return ctx.deps.owner

shopper = Agent(model=ScriptedModel([Reply.call("who"), Reply.call("final_result", owner="Ada", open=True)],
                                    loop=True), tools=[who], deps_type=Shop, output_type=Answer, name="shopper")
shop = Shop("Ada")
native = Agent(model=ScriptedModel(['Ada, open.', '{"owner": "Ada", "open": true}'], loop=True),
              output_type=Answer, output_mode="native", name="native")
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "typed_kernel", SETUP)
    yield k
    k.close()


def test_a_cell_hands_its_deps_to_the_tools_and_shows_the_typed_answer(kernel):
    res = kernel.execute("%%agio shopper --deps shop\nWho owns the shop, and is it open?", timeout=120)
    assert res["reply"]["content"]["status"] == "ok", res["reply"]["content"]
    bundles = [m["content"]["data"] for m in of_type(res["messages"], "display_data", "update_display_data")
               if "application/vnd.agio.run+json" in m["content"]["data"]]
    assert bundles, "no transcript"
    final = bundles[-1]
    assert final["application/vnd.agio.run+json"]["run"]["output"] == {"owner": "Ada", "open": True}
    assert "Output · Answer" in final["text/html"]
    kernel.execute("handle = _")
    assert kernel.value("handle.steps.query(\"name == 'who' and role == 'tool'\")['content'].tolist()") == ["Ada"]
    assert kernel.value("[type(handle.output).__name__, handle.output.owner]") == ["Answer", "Ada"]


@pytest.mark.parametrize("cell,line", [
    ("%%agio shopper --deps nowhere\nhi", "--deps nowhere: no variable 'nowhere' in the notebook"),
    ("%%agio shopper --deps SETUP_WRONG\nhi", "takes deps of type Shop, got str"),
    ("%%agio shopper\nhi", "needs deps of type Shop"),
])
def test_wrong_deps_are_one_line_and_run_nothing(kernel, cell, line):
    kernel.execute("SETUP_WRONG = 'not a shop'")
    before = kernel.value("len(__import__('agio_notebook').runs())")
    res = kernel.execute(cell)
    errors = stream_text(res["messages"], "stderr") + "".join(
        m["content"].get("evalue", "") for m in of_type(res["messages"], "error"))
    assert line in errors and "Traceback" not in errors, errors
    assert kernel.value("len(__import__('agio_notebook').runs())") == before


def test_a_retry_takes_the_deps_of_the_call_that_asks(kernel):
    """Deps are never stored. A retry in the kernel that ran the cell (Retry from step) uses its deps again;
    ``--deps NAME`` or ``handle.retry(deps=...)`` gives others; a run this kernel did not start, retried
    without deps, is one line saying how, and nothing runs."""
    tool_says = "{}.steps.query(\"name == 'who' and role == 'tool'\")['content'].tolist()"
    res = kernel.execute("%%agio shopper --deps shop\nWho owns it?", timeout=120)
    assert res["reply"]["content"]["status"] == "ok"
    kernel.execute("first = _\nother = Shop('Bo')")
    run_id = kernel.value("first.run_id")
    res = kernel.execute(f"again = %agio retry {run_id}", timeout=120)  # as the Retry button inserts it
    assert res["reply"]["content"]["status"] == "ok", res["reply"]["content"]
    assert kernel.value("again.wait(60).status") == "completed" and kernel.value(tool_says.format("again")) == ["Ada"]
    res = kernel.execute(f"second = %agio retry {run_id} --deps other", timeout=120)
    assert res["reply"]["content"]["status"] == "ok", res["reply"]["content"]
    assert kernel.value("second.wait(60).status") == "completed" and kernel.value(tool_says.format("second")) == ["Bo"]
    kernel.execute("third = second.retry(deps=Shop('Cy')).wait(60)")
    assert kernel.value(tool_says.format("third")) == ["Cy"]
    kernel.execute("elsewhere = await shopper.run('Who owns it?', deps=shop)")  # not a run of a cell
    before = kernel.value("len(__import__('agio_notebook').runs())")
    refused = kernel.execute("%agio retry {elsewhere.run_id}")  # a line, not an error: a Run All goes on
    assert refused["reply"]["content"]["status"] == "ok", refused["reply"]["content"]
    said = stream_text(refused["messages"], "stderr")
    assert said.startswith("agio: the retry did not start: agent 'shopper' needs deps of type Shop") and \
        "%agio retry RUN --deps NAME" in said and said.count("\n") == 1, said
    assert kernel.value("len(__import__('agio_notebook').runs())") == before
    redefined = kernel.execute("@dataclasses.dataclass\nclass Shop:\n    owner: str\n\nnew = Shop('Di')\n"
                               "h = first.retry(deps=new)")
    errors = "".join(m["content"].get("evalue", "") for m in of_type(redefined["messages"], "error"))
    assert "was defined again since the agent was made; run the agent's cell again" in errors, errors


def test_a_native_typed_answer_shows_like_any_other_and_the_refusal_is_in_the_transcript(kernel):
    res = kernel.execute("%%agio native --new-session\nWho owns the shop, and is it open?", timeout=120)
    assert res["reply"]["content"]["status"] == "ok", res["reply"]["content"]
    final = [m["content"]["data"] for m in of_type(res["messages"], "display_data", "update_display_data")
             if "application/vnd.agio.run+json" in m["content"]["data"]][-1]
    assert final["application/vnd.agio.run+json"]["run"]["output"] == {"owner": "Ada", "open": True}
    assert "Output · Answer" in final["text/html"] and "Answer with the JSON of Answer only." in final["text/html"]
    kernel.execute("handle = _")
    assert kernel.value("[type(handle.output).__name__, handle.output.open, handle.run.final_text]") == [
        "Answer", True, '{"owner": "Ada", "open": true}']
