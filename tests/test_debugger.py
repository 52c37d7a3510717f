"""Step mode from Python: every pause point, every edit, breakpoints, abort, interrupt, stored steps."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from typing import Any

import pytest

import agio_notebook
from agio_notebook import Agent, ExecutionConfig, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import RunStatus, StepRole
from agio_notebook.execution.pauses import DebugError, PauseKind
from agio_notebook.execution.requests import request_of
from agio_notebook.models.base import TextDelta, ToolCallDelta, Usage
from agio_notebook.storage import open_repository


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


class Recorder:
    """A model that answers from a script and keeps every request it received (messages and settings)."""

    def __init__(self, replies: list[Reply | str]):
        self.name = "recorder"
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    async def stream(self, messages, tools, *, stream=True, settings=None):
        self.requests.append({"messages": json.loads(json.dumps(messages)), "settings": dict(settings or {}),
                              "tools": [t["function"]["name"] for t in tools]})
        reply = self.replies.pop(0)
        reply = Reply(text=reply) if isinstance(reply, str) else reply
        if reply.text:
            yield TextDelta(reply.text)
        for i, spec in enumerate(reply.tool_calls):
            yield ToolCallDelta(i, spec.id or f"c{len(self.requests)}{i}", spec.name, json.dumps(spec.arguments))
        yield Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)


def runner_for(tmp_path, replies, tools=(add, shout), **config) -> tuple[StepRunner, Recorder]:
    model = Recorder(replies)
    agent = Agent(model=model, tools=list(tools), system_prompt="You add numbers.",
                  config=ExecutionConfig(**config) if config else None)
    return StepRunner(agent, repository=open_repository(str(tmp_path / "store"))), model


def sync(test):
    """Run an async test on a fresh event loop (as the other engine tests do with asyncio.run)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return run


TOOL_THEN_ANSWER = [Reply.call("add", _id="c1", a=2, b=3), "2 + 3 = 5"]


@sync
async def test_stepping_visits_every_pause_point_in_order(tmp_path):
    runner, model = runner_for(tmp_path, TOOL_THEN_ANSWER, model_settings={"temperature": 0})
    seen = []
    debug = runner.debug(None, "What is 2 + 3?")
    async for pause in debug:
        seen.append((pause.kind.value, pause.sequence))
        if pause.kind is PauseKind.MODEL and pause.index == 1:
            request = pause.request
            assert [m["role"] for m in request["messages"]] == ["system", "user"]
            assert request["messages"][1]["content"] == "What is 2 + 3?"
            assert [t["function"]["name"] for t in request["tools"]] == ["add", "shout"]
            assert request["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]
            assert request["settings"] == {"temperature": 0}
            assert len(pause.tokens) == 2 and all(t.tokens > 0 for t in pause.tokens)
            # a model without a tokenizer of its own: estimates, marked as such
            assert all(t.estimated for t in pause.tokens) and "estimated" in pause.describe()
        if pause.kind is PauseKind.REPLY and pause.sequence == 2:
            assert pause.reply["tool_calls"][0]["function"]["name"] == "add"
        if pause.kind is PauseKind.TOOL:
            assert pause.name == "add" and pause.arguments == {"a": 2, "b": 3}
        if pause.kind is PauseKind.RESULT:
            assert pause.result == "5" and pause.status == "ok"
        pause.step()
    assert seen == [("model", 2), ("reply", 2), ("tool", 3), ("result", 3), ("model", 4), ("reply", 4)]
    assert debug.result.status is RunStatus.COMPLETED and debug.result.final_text == "2 + 3 = 5"
    kinds = [e.type.value for e in debug.result.events]
    assert kinds.count("run_paused") == kinds.count("run_resumed") == 6


def test_token_counts_are_the_models_own_where_it_has_a_tokenizer():
    from agio_notebook.models.tokens import message_counts

    message = {"role": "user", "content": "What is 2 + 3?"}
    [guess] = message_counts([message], "scripted")
    assert guess.estimated and guess.tokens == 9 and str(guess) == "~9"  # (4 + 14) characters / 4, and 4 of overhead
    [real] = message_counts([message], "gpt-4o")
    # 8 tokens of text, 1 of the role and 3 of the chat format around the message
    assert not real.estimated and real.tokens == 12 and str(real) == "12"


def _comparable(steps) -> list[dict[str, Any]]:
    out = []
    for s in steps:
        d = s.to_dict()
        for volatile in ("id", "session_id", "run_id", "created_at", "parent_ids", "metrics"):
            d.pop(volatile)
        out.append(d)
    return out


@sync
async def test_no_breakpoint_firing_stores_what_a_normal_run_stores(tmp_path):
    normal, _ = runner_for(tmp_path, TOOL_THEN_ANSWER)
    plain = await normal.run("s-plain", "What is 2 + 3?")
    stepping, _ = runner_for(tmp_path, TOOL_THEN_ANSWER)
    debug = stepping.debug("s-debug", "What is 2 + 3?", breakpoints=["tool:shout", "step:99", lambda p: False])
    pauses = [p async for p in debug]
    assert pauses == []
    repo = normal.repository
    assert _comparable(repo.get_steps("s-debug")) == _comparable(repo.get_steps("s-plain"))
    assert [e.type for e in debug.result.events] == [e.type for e in plain.events]
    assert [m["step"].keys() for m in (e.payload for e in plain.events if e.type.value == "metrics")] == [
        m["step"].keys() for m in (e.payload for e in debug.result.events if e.type.value == "metrics")]
    assert debug.result.metrics.paused_ms == 0.0


@sync
async def test_edit_messages_system_and_settings_for_one_call(tmp_path):
    runner, model = runner_for(tmp_path, ["four"], model_settings={"temperature": 0})
    debug = runner.debug(None, "What is 2 + 3?", breakpoints=["model"])
    async for pause in debug:
        messages = pause.messages
        messages[1] = {"role": "user", "content": "What is 2 + 2?"}
        pause.edit(messages=json.dumps(messages), settings={"temperature": 1, "seed": 7})
        pause.edit(system="You answer in words.")
        pause.cont()
    sent = model.requests[0]
    assert sent["messages"] == [{"role": "system", "content": "You answer in words."},
                                {"role": "user", "content": "What is 2 + 2?"}]
    assert sent["settings"] == {"temperature": 1, "seed": 7}
    step = [s for s in debug.result.steps if s.role is StepRole.ASSISTANT][0]
    stored = step.extra["request"]
    assert stored["edited"]["fields"] == ["messages", "settings", "system"]
    assert stored["edited"]["proposed"]["messages"][1]["content"] == "What is 2 + 3?"
    assert stored["edited"]["proposed"]["settings"] == {"temperature": 0}
    assert stored["settings"] == {"temperature": 1, "seed": 7}
    # the stored request is what was sent; the stored user step is what the user asked
    assert request_of(runner.repository, step)["messages"] == sent["messages"]
    assert runner.repository.get_steps(step.session_id)[0].content == "What is 2 + 3?"
    frame = agio_notebook.context(debug.result.run_id, step.sequence, repository=runner.repository)
    assert list(frame["text"]) == ["You answer in words.", "What is 2 + 2?"]
    assert list(frame["edited"]) == [True, True]


@sync
async def test_edit_reply_arguments_result_and_skip_are_stored_with_what_was_proposed(tmp_path):
    replies = [Reply.calls(agio_notebook.models.scripted.call("add", _id="c1", a=2, b=3),
                           agio_notebook.models.scripted.call("shout", _id="c2", text="hi")),
               "done"]
    runner, model = runner_for(tmp_path, replies, parallel_tool_calls=False)
    debug = runner.debug(None, "go", breakpoints=["reply", "tool", "result"])
    async for pause in debug:
        if pause.kind is PauseKind.REPLY and pause.sequence == 2:
            pause.edit(reply={"content": "Let me compute.", "tool_calls": pause.reply["tool_calls"]})
        elif pause.kind is PauseKind.TOOL and pause.name == "add":
            pause.edit(arguments='{"a": 40, "b": 2}')
        elif pause.kind is PauseKind.TOOL and pause.name == "shout":
            pause.skip("typed by hand")
            continue
        elif pause.kind is PauseKind.RESULT and pause.name == "add":
            assert pause.result.startswith("42")
            pause.edit(result="forty-two")
        elif pause.kind is PauseKind.REPLY and pause.sequence == 5:
            pause.edit(reply="The answer is forty-two.")
        pause.cont()
    steps = {s.sequence: s for s in debug.result.steps}
    assert steps[2].content == "Let me compute."
    assert steps[2].extra["edited"]["reply"]["proposed"]["content"] is None
    added, shouted = steps[3], steps[4]
    assert added.extra["edited"]["arguments"] == {"proposed": '{"a": 2, "b": 3}', "sent": '{"a": 40, "b": 2}'}
    assert added.extra["edited"]["result"]["proposed"].startswith("42\n\n[Note: this call was edited")
    assert added.content == "forty-two"
    assert shouted.content == "typed by hand" and shouted.extra["edited"] == {"skipped": True}
    assert steps[5].content == "The answer is forty-two." and debug.result.final_text == "The answer is forty-two."
    assert steps[5].extra["edited"]["reply"]["proposed"]["content"] == "done"
    # the second model call received the edited reply and results
    second = model.requests[1]["messages"]
    assert second[2]["content"] == "Let me compute."
    assert second[3]["content"] == "forty-two" and second[4]["content"] == "typed by hand"
    # what was stored is also what the store reads back
    stored = {s.sequence: s for s in runner.repository.get_steps(debug.result.session_id)}
    assert stored[3].content == "forty-two" and stored[3].extra["edited"]["arguments"]["sent"] == '{"a": 40, "b": 2}'
    resumed = [e.payload for e in debug.result.events if e.type.value == "run_resumed"]
    assert [r["action"] for r in resumed] == ["continue", "continue", "skip", "continue", "continue", "continue"]
    assert resumed[1]["edits"] == {"arguments": {"a": 40, "b": 2}}


@sync
async def test_bad_edits_are_one_clear_line_and_lose_nothing(tmp_path):
    runner, model = runner_for(tmp_path, TOOL_THEN_ANSWER)
    debug = runner.debug(None, "What is 2 + 3?")
    problems = {}
    async for pause in debug:
        if pause.kind is PauseKind.MODEL and pause.index == 1:
            for name, edit in {"json": {"messages": '[{"role": "user", "content": "x"'},
                               "shape": {"messages": [{"role": "robot", "content": "x"}]},
                               "content": {"messages": [{"role": "user", "content": 3}]},
                               "tool_msg": {"messages": [{"role": "tool", "content": "x"}]},
                               "settings": {"settings": {"temprature": 1}},
                               "wrong_point": {"arguments": {"a": 1}}}.items():
                with pytest.raises(DebugError) as info:
                    pause.edit(**edit)
                problems[name] = str(info.value)
            with pytest.raises(DebugError, match="skip answers a tool call"):
                pause.skip("x")
        if pause.kind is PauseKind.TOOL:
            with pytest.raises(DebugError) as info:
                pause.edit(arguments={"a": "two", "b": 3})
            problems["schema"] = str(info.value)
            with pytest.raises(DebugError) as info:
                pause.edit(arguments={"a": 1})
            problems["missing"] = str(info.value)
        pause.cont()
        with pytest.raises(DebugError, match="already resumed"):
            pause.cont()
        with pytest.raises(DebugError, match="already resumed"):
            pause.edit()
    assert problems["json"].startswith("messages: not valid JSON")
    assert "role must be one of" in problems["shape"] and "messages[0]" in problems["shape"]
    assert "content must be text" in problems["content"]
    assert "tool_call_id" in problems["tool_msg"]
    assert "unknown setting" in problems["settings"]
    assert "cannot edit arguments before a model call" in problems["wrong_point"]
    assert problems["schema"].startswith("add rejects these arguments: a:")
    assert "b" not in problems["missing"].split("rejects")[0] and "Field required" in problems["missing"]
    assert all("\n" not in p for p in problems.values())
    # nothing was lost: the run went on unchanged
    assert debug.result.status is RunStatus.COMPLETED and debug.result.final_text == "2 + 3 = 5"
    assert model.requests[0]["messages"][1]["content"] == "What is 2 + 3?"
    assert not any("edited" in s.extra for s in debug.result.steps)


@sync
async def test_breakpoints_named_tool_step_number_and_predicate(tmp_path):
    replies = [Reply.call("shout", _id="c1", text="a"), Reply.call("add", _id="c2", a=1, b=1), "ok"]
    runner, _ = runner_for(tmp_path, list(replies))
    named = [(p.kind.value, p.name) async for p in runner.debug("s1", "go", breakpoints=["tool:add"])]
    assert named == [("tool", "add")]
    runner, _ = runner_for(tmp_path, list(replies))
    by_step = [(p.kind.value, p.sequence) async for p in runner.debug("s2", "go", breakpoints=[5])]
    assert by_step == [("tool", 5), ("result", 5)]
    runner, _ = runner_for(tmp_path, list(replies))
    long = [p.kind.value async for p in runner.debug(
        "s3", "go", breakpoints=[lambda p: p.kind is PauseKind.MODEL and len(p.messages) == 4])]
    assert long == ["model"]
    runner, _ = runner_for(tmp_path, list(replies))
    models = [p.sequence async for p in runner.debug("s4", "go", breakpoints="model")]
    assert models == [2, 4, 6]
    with pytest.raises(DebugError, match="unknown breakpoint 'tools'"):
        runner.debug("s5", "go", breakpoints=["tools"])
    with pytest.raises(DebugError, match="a breakpoint is"):
        runner.debug("s5", "go", breakpoints=[3.5])
    assert runner.repository.get_session("s5") is None


@sync
async def test_continue_goes_to_the_next_breakpoint_and_step_to_the_next_point(tmp_path):
    runner, _ = runner_for(tmp_path, TOOL_THEN_ANSWER)
    kinds = []
    async for pause in runner.debug(None, "What is 2 + 3?", breakpoints=["model"]):
        kinds.append(pause.kind.value)
        pause.step() if len(kinds) == 1 else pause.cont()
    assert kinds == ["model", "reply", "model"]


@sync
async def test_abort_ends_the_run_cancelled_with_its_steps_kept(tmp_path):
    runner, model = runner_for(tmp_path, TOOL_THEN_ANSWER)
    debug = runner.debug(None, "What is 2 + 3?", breakpoints=["tool"])
    async for pause in debug:
        pause.abort()
        with pytest.raises(DebugError, match="already resumed"):
            pause.cont()
    result = debug.result
    assert result.status is RunStatus.CANCELLED
    assert [s.role.value for s in result.steps] == ["user", "assistant"]
    stored = runner.repository.get_steps(result.session_id)
    assert [s.sequence for s in stored] == [1, 2]
    assert runner.repository.get_run(result.run_id).status is RunStatus.CANCELLED
    assert len(model.requests) == 1  # the tool never ran, the model was not asked again


@sync
async def test_interrupt_while_paused_ends_the_run_cancelled_and_later_decisions_are_one_line(tmp_path):
    runner, _ = runner_for(tmp_path, TOOL_THEN_ANSWER)
    debug = runner.debug("s-int", "What is 2 + 3?", breakpoints=["tool"])
    pause = await debug.__anext__()
    task = debug._task
    task.cancel()  # what a kernel interrupt does to the awaiting run
    result = await task  # the run ends cancelled; the result is still there
    assert result.status is RunStatus.CANCELLED and result.metrics.paused_ms > 0
    stored = runner.repository.get_steps("s-int")
    assert [s.role.value for s in stored][-2:] == ["user", "assistant"]
    runs = agio_notebook.runs("s-int", repository=runner.repository)
    assert list(runs["status"]) == ["cancelled"]
    with pytest.raises(DebugError, match="the run has ended"):
        pause.cont()


@sync
async def test_time_paused_is_its_own_figure(tmp_path):
    runner, _ = runner_for(tmp_path, TOOL_THEN_ANSWER)
    debug = runner.debug(None, "What is 2 + 3?")
    async for pause in debug:
        await asyncio.sleep(0.15)
        pause.step()
    m = debug.result.metrics
    assert m.paused_ms >= 6 * 150
    assert m.model_ms < 300 and m.tool_ms < 300
    assert m.duration_ms >= m.paused_ms
    for step in debug.result.steps:
        assert (step.metrics.model_ms or 0) < 300 and (step.metrics.tool_ms or 0) < 300
    frame = agio_notebook.run_metrics(repository=runner.repository)
    assert frame["paused_ms"].iloc[-1] >= 900
    resumed = [e.payload["paused_ms"] for e in debug.result.events if e.type.value == "run_resumed"]
    assert len(resumed) == 6 and all(ms >= 150 for ms in resumed)


@sync
async def test_undecided_pause_continues_and_run_drives_to_the_end(tmp_path):
    runner, _ = runner_for(tmp_path, TOOL_THEN_ANSWER)
    debug = runner.debug(None, "What is 2 + 3?")
    first = await debug.__anext__()
    second = await debug.__anext__()
    assert first.action == "continue" and second.kind is PauseKind.TOOL
    result = await debug.run()
    assert result.final_text == "2 + 3 = 5"
    with pytest.raises(DebugError, match="already resumed"):
        second.cont()


@sync
async def test_a_typed_answer_edited_or_answered_by_hand_at_a_pause_is_what_the_run_gives(tmp_path):
    """Beside another tool, a final_result call's arguments edited at the pause are the answer (not what the
    model proposed); one answered by hand ran nothing, so it is no answer and the model is asked again."""
    import pydantic

    from agio_notebook.models.scripted import call

    class Sum(pydantic.BaseModel):
        total: int

    def typed(replies):
        agent = Agent(model=Recorder(replies), tools=[add], output_type=Sum)
        return StepRunner(agent, repository=open_repository(str(tmp_path / "store")))

    both = Reply.calls(call("add", _id="c1", a=2, b=3), call("final_result", _id="c2", total=6))
    debug = typed([both]).debug(None, "2 + 3?", breakpoints=["tool"])
    async for pause in debug:
        if pause.name == "final_result":
            pause.edit(arguments='{"total": 5}')
        pause.cont()
    assert debug.result.status is RunStatus.COMPLETED and debug.result.output == Sum(total=5)
    debug = typed([both, Reply.call("final_result", _id="c3", total=5)]).debug(None, "2 + 3?", breakpoints=["tool"])
    async for pause in debug:
        if pause.name == "final_result" and pause.sequence == 4:
            pause.skip("five, I think")
            continue
        pause.cont()
    assert debug.result.status is RunStatus.COMPLETED and debug.result.output == Sum(total=5)
    assert debug.result.run.metrics.model_calls == 2  # the hand-typed text was no answer: the model was asked
