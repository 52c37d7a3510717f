"""The model <-> tool loop: events, tools, errors, limits, cancellation, hooks, metrics."""

from __future__ import annotations

import asyncio
import time

import pytest

from agio_notebook import Agent, AgentHook, ExecutionConfig, StepRunner, tool
from agio_notebook.core import ModelError, RunStatus, StepEventType as E
from agio_notebook.storage import InMemoryRepository

from engine_support import ChunkModel, add, calls, cancel_when, nap, text, tool_started




@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


def make_runner(replies, tools=(add,), config=None, hooks=(), repo=None, **agent_kw):
    model = ChunkModel(replies)
    agent = Agent(model=model, tools=list(tools), **agent_kw)
    return StepRunner(agent, hooks=hooks, config=config or ExecutionConfig(),
                      repository=repo if repo is not None else InMemoryRepository()), model


def run(runner, query="go", session=None):
    return asyncio.run(runner.run(session, query))


def events_of(runner, query="go", session=None):
    async def collect():
        return [e async for e in runner.run_stream(session, query)]
    return asyncio.run(collect())


def test_text_only_run_streams_and_completes():
    runner, _ = make_runner([text("Hello", ", ", "world")])
    events = events_of(runner)
    types = [e.type for e in events]
    assert types == [E.RUN_STARTED, E.STEP_COMPLETED, E.STEP_DELTA, E.STEP_DELTA, E.STEP_DELTA,
                     E.STEP_COMPLETED, E.METRICS, E.RUN_COMPLETED]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert "".join(e.payload["content"] for e in events if e.type is E.STEP_DELTA) == "Hello, world"
    final = events[-1].payload["run"]
    assert final["status"] == "completed" and final["final_text"] == "Hello, world"
    for e in events:
        d = e.to_dict()
        assert set(d) == {"type", "run_id", "session_id", "seq", "ts", "payload"}


def test_one_tool_call_then_answer_in_documented_order():
    runner, model = make_runner([calls(("add", {"a": 2, "b": 3}), split=True), text("5")])
    events = events_of(runner)
    types = [e.type for e in events if e.type is not E.STEP_DELTA]
    assert types == [E.RUN_STARTED, E.STEP_COMPLETED, E.STEP_COMPLETED, E.TOOL_CALL_STARTED,
                     E.TOOL_CALL_COMPLETED, E.STEP_COMPLETED, E.METRICS, E.STEP_COMPLETED, E.METRICS,
                     E.RUN_COMPLETED]
    done = next(e for e in events if e.type is E.TOOL_CALL_COMPLETED)
    assert done.payload["content"] == "5" and done.payload["sequence"] == 3
    # the split deltas were joined into one valid call
    assistant = events[2 + sum(e.type is E.STEP_DELTA for e in events[:4])].payload
    # the second model call saw the tool result as a tool message answering the call
    second = model.seen[1]
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]
    assert second[1]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    assert second[2]["tool_call_id"] == second[1]["tool_calls"][0]["id"] and second[2]["content"] == "5"
    assert assistant is not None


def test_parallel_tools_run_concurrently_and_sequentially_when_off():
    three = calls(("nap", {"seconds": 0.5}), ("nap", {"seconds": 0.5}), ("nap", {"seconds": 0.5}))
    runner, _ = make_runner([three, text("rested")], tools=[nap])
    t0 = time.perf_counter()
    result = run(runner)
    parallel = time.perf_counter() - t0
    assert result.status is RunStatus.COMPLETED and parallel < 1.0
    assert [s.sequence for s in result.steps if s.role.value == "tool"] == [3, 4, 5]

    runner, _ = make_runner([three, text("rested")], tools=[nap], config=ExecutionConfig(parallel_tool_calls=False))
    t0 = time.perf_counter()
    run(runner)
    assert time.perf_counter() - t0 >= 1.5


def test_max_parallel_tools_caps_concurrency():
    four = calls(*[("nap", {"seconds": 0.3})] * 4)
    runner, _ = make_runner([four, text("ok")], tools=[nap], config=ExecutionConfig(max_parallel_tools=2))
    t0 = time.perf_counter()
    run(runner)
    elapsed = time.perf_counter() - t0
    assert 0.6 <= elapsed < 1.1  # two waves of two


@pytest.mark.parametrize("reply, error_type", [
    (calls(("explode", {"reason": "boom"})), "exception"),
    (calls(("nope", {})), "unknown_tool"),
    (calls(("add", '{"a": 1, "b": ')), "invalid_json"),
    (calls(("add", {"a": "one", "b": 2})), "invalid_arguments"),
])
def test_tool_problems_become_error_results_the_model_sees(reply, error_type):
    runner, model = make_runner([reply, text("sorry")], tools=[add, explode])
    events = events_of(runner)
    failed = [e for e in events if e.type is E.TOOL_CALL_FAILED]
    assert len(failed) == 1 and failed[0].payload["error_type"] == error_type
    assert events[-1].type is E.RUN_COMPLETED
    tool_msg = model.seen[1][-1]
    assert tool_msg["role"] == "tool" and tool_msg["content"]
    assert events[-1].payload["run"]["metrics"]["tool_errors"] == 1


def test_tool_timeout_from_config():
    runner, model = make_runner([calls(("nap", {"seconds": 5})), text("too slow")], tools=[nap],
                                config=ExecutionConfig(tool_timeout=0.2))
    t0 = time.perf_counter()
    events = events_of(runner)
    assert time.perf_counter() - t0 < 2
    failed = next(e for e in events if e.type is E.TOOL_CALL_FAILED)
    assert failed.payload["error_type"] == "timeout"
    assert events[-1].type is E.RUN_COMPLETED


def test_max_steps_ends_with_its_own_status_and_event():
    loop = [calls(("add", {"a": i, "b": 1})) for i in range(5)]
    runner, model = make_runner(loop, config=ExecutionConfig(max_steps=3))
    events = events_of(runner)
    assert events[-1].type is E.RUN_MAX_STEPS
    run_ = events[-1].payload["run"]
    assert run_["status"] == "max_steps" and "max_steps (3)" in run_["error"]
    assert len(model.seen) == 3
    # the last turn's tool calls were answered: nothing dangling
    assert [e.payload["step"]["role"] for e in events if e.type is E.STEP_COMPLETED][-1] == "tool"


def test_cancellation_mid_run_marks_cancelled_and_keeps_steps():
    repo = InMemoryRepository()
    runner, _ = make_runner([calls(("nap", {"seconds": 10})), text("never")], tools=[nap], repo=repo)
    seen = asyncio.run(cancel_when(runner.run_stream("s1", "go"), tool_started))
    assert seen[-1].type is E.RUN_CANCELLED
    run_ = repo.get_run(seen[0].run_id)
    assert run_.status is RunStatus.CANCELLED
    assert [s.role.value for s in repo.get_steps("s1")] == ["user", "assistant"]


def test_cancel_while_the_answer_streams_keeps_it_as_a_partial_step_the_next_turn_sees():
    repo = InMemoryRepository()
    runner, _ = make_runner([text(*(f"w{i} " for i in range(200)))], repo=repo)
    runner.agent.model.delay = 0.01
    deltas = lambda events: sum(e.type is E.STEP_DELTA for e in events) >= 5  # noqa: E731
    seen = asyncio.run(cancel_when(runner.run_stream("s1", "go"), deltas))
    assert [e.type for e in seen[-2:]] == [E.STEP_COMPLETED, E.RUN_CANCELLED]  # durable, then announced
    steps = repo.get_steps("s1")
    assert [(s.role.value, s.status) for s in steps] == [("user", "ok"), ("assistant", "cancelled")]
    shown = "".join(e.payload["content"] for e in seen if e.type is E.STEP_DELTA)
    assert steps[1].content == shown and shown.startswith("w0 w1 w2 w3 w4 ") and steps[1].extra["partial"] is True
    assert repo.get_run(seen[0].run_id).final_text == shown
    runner2, model2 = make_runner([text("go on then")], repo=repo)
    run(runner2, "continue", session="s1")
    assert [(m["role"], m.get("content")) for m in model2.seen[0]] == [
        ("user", "go"), ("assistant", shown), ("user", "continue")]


def test_next_query_after_cancel_answers_dangling_calls_first():
    repo = InMemoryRepository()
    runner, _ = make_runner([calls(("nap", {"seconds": 10}))], tools=[nap], repo=repo)

    async def cancel_soon():
        task = asyncio.create_task(runner.run("s1", "go"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    asyncio.run(cancel_soon())
    runner2, model2 = make_runner([text("fresh")], tools=[nap], repo=repo)
    result = run(runner2, "again", session="s1")
    assert result.status is RunStatus.COMPLETED
    roles = [m["role"] for m in model2.seen[0]]
    assert roles == ["user", "assistant", "tool", "user"]


def test_model_error_fails_run_with_one_line_and_keeps_steps():
    repo = InMemoryRepository()
    runner, _ = make_runner([calls(("add", {"a": 1, "b": 1})), ModelError("endpoint returned 500: boom")],
                            repo=repo)
    events = events_of(runner, session="s")
    assert events[-1].type is E.RUN_FAILED
    assert events[-1].payload["run"]["error"] == "endpoint returned 500: boom"
    assert len(repo.get_steps("s")) == 3


def test_retryable_model_error_is_retried_when_enabled():
    flaky = ModelError("429 rate limited", retryable=True)
    runner, model = make_runner([flaky, text("ok")])
    assert run(runner).status is RunStatus.COMPLETED and len(model.seen) == 2
    runner, model = make_runner([flaky, text("ok")], config=ExecutionConfig(enable_retry=False))
    assert run(runner).status is RunStatus.FAILED and len(model.seen) == 1
    runner, model = make_runner([flaky, flaky, text("ok")], config=ExecutionConfig(max_retries=1))
    assert run(runner).status is RunStatus.FAILED and len(model.seen) == 2


def test_timeout_per_step_limits_a_model_call():
    model = ChunkModel([text("a", "b", "c")], delay=1.0)
    runner = StepRunner(Agent(model=model), config=ExecutionConfig(timeout_per_step=0.3, enable_retry=False),
                        repository=InMemoryRepository())
    t0 = time.perf_counter()
    result = run(runner)
    assert time.perf_counter() - t0 < 1.5
    assert result.status is RunStatus.FAILED and "timeout_per_step=0.3s" in result.error


def test_stream_false_emits_no_deltas():
    runner, _ = make_runner([text("a", "b")], config=ExecutionConfig(stream=False))
    events = events_of(runner)
    assert not any(e.type is E.STEP_DELTA for e in events)
    assert events[-1].payload["run"]["final_text"] == "ab"


def test_hooks_called_in_order():
    log = []

    class Recorder(AgentHook):
        async def on_run_start(self, run):
            log.append(("run_start", run.status.value))

        async def on_step_end(self, run, step):
            log.append(("step_end", step.role.value, step.sequence))

        async def on_tool_start(self, run, call):
            log.append(("tool_start", call.name))

        async def on_tool_end(self, run, result):
            log.append(("tool_end", result.name, result.status))

        async def on_run_end(self, run):
            log.append(("run_end", run.status.value))

    runner, _ = make_runner([calls(("add", {"a": 1, "b": 2})), text("3")], hooks=[Recorder()])
    run(runner)
    assert log == [("run_start", "running"), ("step_end", "user", 1), ("step_end", "assistant", 2),
                   ("tool_start", "add"), ("tool_end", "add", "ok"), ("step_end", "tool", 3),
                   ("step_end", "assistant", 4), ("run_end", "completed")]


def test_failing_hook_does_not_break_the_run_and_on_error_sees_failures():
    errors = []

    class Bad(AgentHook):
        async def on_step_end(self, run, step):
            raise RuntimeError("hook bug")

        async def on_error(self, run, error):
            errors.append(str(error))

    runner, _ = make_runner([text("fine")], hooks=[Bad()])
    assert run(runner).status is RunStatus.COMPLETED
    runner, _ = make_runner([ModelError("down")], hooks=[Bad()])
    assert run(runner).status is RunStatus.FAILED and errors == ["down"]


def test_second_query_sees_earlier_turns_and_system_prompt():
    repo = InMemoryRepository()
    runner, model = make_runner([text("Hi Ada"), text("You are Ada")], repo=repo, system_prompt="Be brief.")
    run(runner, "I am Ada", session="chat")
    run(runner, "Who am I?", session="chat")
    assert [(m["role"], m["content"]) for m in model.seen[1]] == [
        ("system", "Be brief."), ("user", "I am Ada"), ("assistant", "Hi Ada"), ("user", "Who am I?")]
    assert [s.sequence for s in repo.get_steps("chat")] == [1, 2, 3, 4]


def test_metrics_present_and_plausible():
    runner, _ = make_runner([calls(("nap", {"seconds": 0.05})), text("done", prompt=40, completion=7)],
                            tools=[nap])
    result = run(runner)
    m = result.metrics
    assert (m.steps, m.model_calls, m.tool_calls, m.tool_errors) == (4, 2, 1, 0)
    assert m.prompt_tokens == 52 and m.completion_tokens == 12 and m.total_tokens == 64
    assert m.tool_ms >= 50 and m.duration_ms >= m.tool_ms and m.ttft_ms is not None and m.ttft_ms >= 0
    first = result.steps[1]
    assert first.metrics.tool_ms >= 50 and first.metrics.duration_ms >= first.metrics.tool_ms
    metric_events = [e for e in result.events if e.type is E.METRICS]
    assert len(metric_events) == 2 and metric_events[-1].payload["run"]["model_calls"] == 2


def test_sync_entry_point_and_refusal_inside_a_loop():
    runner, _ = make_runner([text("sync ok")])
    assert runner.run_sync(None, "hi").final_text == "sync ok"

    async def inside():
        runner.run_sync(None, "hi")
    with pytest.raises(Exception, match="await runner.run"):
        asyncio.run(inside())


def test_context_builders_read_the_store():
    from agio_notebook.execution import build_context_from_sequence_range, build_context_from_steps
    repo = InMemoryRepository()
    runner, _ = make_runner([calls(("add", {"a": 1, "b": 1})), text("2")], repo=repo)
    run(runner, "1+1?", session="ctx")
    full = build_context_from_steps("ctx", repo, system_prompt="sys")
    assert [m["role"] for m in full] == ["system", "user", "assistant", "tool", "assistant"]
    window = build_context_from_sequence_range("ctx", repo, 3, 4)
    assert [m["role"] for m in window] == ["tool", "assistant"] and window[1]["content"] == "2"
