"""Agents as tools (nested runs at depth 3, in parallel) and handoffs: the store, frames, Stop, budgets,
retry, fork, replay, and the bad input of each."""

from __future__ import annotations

import asyncio
import json
import re

import pydantic
import pytest

import agio_notebook as agio
from agio_notebook import Agent, ExecutionConfig, FunctionModel, StepRunner, frames
from agio_notebook.core import InvalidOperationError, RunStatus, StepEvent, StepEventType as E, StepRole
from agio_notebook.execution import MAX_DEPTH
from agio_notebook.models import ReplayModel, export_cassette
from agio_notebook.models.base import Usage
from agio_notebook.models.scripted import Reply, call
from agio_notebook.notebook.transcript import build_bundle, bundle_for_run
from agio_notebook.storage import new_repository

from compose_support import Brain, tree_of_agents
from engine_support import cancel_when


@pytest.fixture
def repo(tmp_path):
    r = new_repository(str(tmp_path / "store"))
    yield r
    r.close()


@pytest.fixture
def any_repo(store_url):
    """The same on each backend: TinyDB files, SQLite, PostgreSQL."""
    r = new_repository(store_url)
    yield r
    r.close()


def go(coro):
    return asyncio.run(coro)


def tree_runs(repo, root_id):
    return frames.runs(repository=repo).query("root_run_id == @root_id").set_index("run_id")


def test_depth_three_with_parallel_inner_runs_is_linked_in_the_store_frames_and_events(any_repo):
    repo = any_repo
    planner, brains = tree_of_agents()
    result = go(StepRunner(planner, repository=repo).run(None, "plan it"))
    assert result.status is RunStatus.COMPLETED
    assert result.final_text == ("planner: researcher: checker: source: fact about cats | "
                                 "researcher: checker: source: fact about dogs")
    runs = tree_runs(repo, result.run_id)
    assert sorted(runs["depth"].tolist()) == [0, 1, 1, 2, 2, 3, 3]
    assert (runs["status"] == "completed").all()
    by_id = {r.id: r for r in repo.list_runs()}
    for run_id, row in runs.iterrows():
        run = by_id[run_id]
        if run.depth == 0:
            assert run.parent_run_id is None and row["agent_name"] == "planner"
            continue
        parent = by_id[run.parent_run_id]
        assert run.depth == parent.depth + 1 and run.root_run_id == result.run_id
        asking = next(s for s in repo.get_steps(parent.session_id) if s.id == run.parent_step_id)
        assert asking.role is StepRole.ASSISTANT and run.parent_tool_call_id in {c.id for c in asking.tool_calls}
        answered = next(s for s in repo.get_steps(parent.session_id) if s.tool_call_id == run.parent_tool_call_id)
        assert answered.extra["nested_run"]["run_id"] == run_id  # the outer tool step points back
        assert answered.content == run.final_text
        assert run.session_id != parent.session_id
    # the two researchers ran at the same time
    researchers = sorted((r for r in by_id.values() if r.agent_name == "researcher"), key=lambda r: r.started_at)
    assert researchers[1].started_at < researchers[0].ended_at
    # steps and tool calls of the whole tree
    steps = frames.steps(tree=result.run_id, repository=repo)
    assert set(steps["run_id"]) == set(runs.index)
    assert len(steps) == 5 + 6 * 4
    calls = frames.tool_calls(tree=result.run_id, repository=repo)
    assert sorted(calls["name"]) == ["checker", "checker", "lookup", "lookup", "researcher", "researcher",
                                     "source", "source"]
    nested = calls.dropna(subset=["nested_run_id"])
    assert len(nested) == 6 and set(nested["nested_run_id"]) == set(runs.index) - {result.run_id}
    assert frames.tool_calls(run_id=result.run_id, repository=repo).shape[0] == 2  # without tree: its own
    # every nested event reached the outer stream, tagged with its path
    nested_events = [e for e in result.events if e.type is E.NESTED]
    depths = {len(e.payload["path"]) for e in nested_events}
    assert depths == {1, 2, 3}
    for e in nested_events:
        leaf = e.payload["event"]
        assert e.payload["path"][-1]["run_id"] == leaf["run_id"]
        assert by_id[leaf["run_id"]].depth == len(e.payload["path"])
    assert sum(1 for e in nested_events if e.payload["event"]["type"] == "run_completed") == 6
    # nested copies are not stored twice: the outer run's stored events are its own
    assert all(e.run_id == result.run_id and e.type is not E.NESTED for e in repo.get_events(result.run_id, limit=999))


def test_transcript_shows_the_nesting_live_and_rebuilt_from_the_store(repo):
    planner, _ = tree_of_agents()
    result = go(StepRunner(planner, repository=repo).run(None, "plan it"))
    live = build_bundle(result.events, result.run)
    stored = bundle_for_run(repo, result.run_id)
    assert live["text/plain"] == stored["text/plain"]
    text = live["text/plain"]
    assert "     |      |      |   -> lookup({\"topic\": \"dogs\"}) [ok] fact about dogs" in text
    html = live["text/html"]
    assert html.count('class="agio-nested-run"') == 6
    # model output inside a nested run is escaped like any other
    evil = Agent(model=Brain("<img src=x onerror=alert(1)>").model, name="evil")
    outer = Agent(model=Brain("outer", lambda q: [call("evil", query="hi")]).model, tools=[evil], name="outer")
    shown = build_bundle(go(StepRunner(outer, repository=repo).run(None, "go")).events)["text/html"]
    assert 'class="agio-nested-run"' in shown and "<img src=x" not in shown and "&lt;img src=x" in shown
    assert html.count('class="agio-nested-agent">source<') == 2


def test_stop_reaches_the_innermost_run_and_keeps_every_step(repo):
    gate = asyncio.Event()  # never set: the innermost tools wait until cancelled
    planner, _ = tree_of_agents(gate)

    def innermost_waiting(events):
        return sum(1 for e in events if e.type is E.NESTED and len(e.payload["path"]) == 3
                   and e.payload["event"]["type"] == "tool_call_started") == 2

    events = go(cancel_when(StepRunner(planner, repository=repo).run_stream(None, "plan it"), innermost_waiting))
    root_id = events[0].run_id
    runs = tree_runs(repo, root_id)
    assert len(runs) == 7
    assert (runs["status"] == "cancelled").all(), runs["status"].tolist()
    for run in repo.list_runs():
        if run.depth == 3:  # the query and the model's tool call were stored before the Stop
            kept = [s.role for s in repo.get_steps(run.session_id)]
            assert kept == [StepRole.USER, StepRole.ASSISTANT]
    # the cell's transcript (the stream's events, then the run's end): no nested box goes on saying it runs
    end = StepEvent(E.RUN_CANCELLED, root_id, events[0].session_id, 10_000, {"run": repo.get_run(root_id).to_dict()})
    text = build_bundle([*events, end])["text/plain"]
    assert len(re.findall(r"agio run \w+ \[cancelled\]", text)) == 7 and "[running]" not in text


def test_nested_runs_count_against_the_outermost_budget(repo):
    # the researcher spends far more than the planner; the planner asks it twice, one after the other
    researcher_brain = Brain("researcher")
    researcher = Agent(model=researcher_brain.model, name="researcher")
    planner_brain = Brain("planner", lambda q: [call("researcher", query="first")])
    planner = Agent(model=planner_brain.model, tools=[researcher], name="planner")

    def big(messages, tools):
        researcher_brain.calls += 1
        return Reply(text="long answer", usage=Usage(400, 100, 500))

    researcher_brain.model.fn = big
    own = go(StepRunner(planner, repository=repo).run(None, "go"))
    assert own.status is RunStatus.COMPLETED
    assert own.metrics.total_tokens < 200  # the planner alone stays far below the budget below
    limited = go(StepRunner(planner, config=ExecutionConfig(max_tokens=300), repository=repo).run(None, "go"))
    assert limited.status is RunStatus.BUDGET_EXCEEDED
    assert "nested runs" in limited.error and "max_tokens=300" in limited.error
    # an inner run stops too once the tree spent the outermost budget: mid's second model call never happens
    mid_brain = Brain("mid", lambda q: [call("researcher", query="a")])
    mid = Agent(model=mid_brain.model, tools=[researcher], name="mid")
    top = Agent(model=Brain("top", lambda q: [call("mid", query="x")]).model, tools=[mid], name="top")
    result = go(StepRunner(top, config=ExecutionConfig(max_tokens=300), repository=repo).run(None, "go"))
    assert result.status is RunStatus.BUDGET_EXCEEDED
    mid_run = next(r for r in repo.list_runs() if r.agent_name == "mid" and r.root_run_id == result.run_id)
    assert mid_run.status is RunStatus.BUDGET_EXCEEDED and mid_brain.calls == 1
    tool_step = next(s for s in repo.get_steps(result.session_id) if s.name == "mid")
    assert tool_step.status == "error" and "ended budget_exceeded" in tool_step.content
    # without a budget the same tree completes: the stop above came from the budget
    assert go(StepRunner(top, repository=repo).run(None, "go")).status is RunStatus.COMPLETED


def test_nested_runs_count_against_the_outermost_cost_budget(repo):
    def priced(name, answer):
        def fn(messages, tools):
            if answer is None and messages[-1]["role"] == "user":
                return Reply(tool_calls=[call("researcher", query="q")], usage=Usage(20, 5, 25))
            return Reply(text=answer or "done", usage=Usage(400, 100, 500) if answer else Usage(20, 5, 25))
        from agio_notebook import FunctionModel
        return FunctionModel(fn, name=name)

    researcher = Agent(model=priced("gpt-4o-mini", "a costly answer"), name="researcher")
    planner = Agent(model=priced("gpt-4o-mini", None), tools=[researcher], name="planner")
    free = go(StepRunner(planner, repository=repo).run(None, "go"))
    assert free.status is RunStatus.COMPLETED and free.metrics.cost < 0.00005  # the planner alone: cheap
    budget = ExecutionConfig(max_cost=0.00010)  # above the planner's own spend, below the tree's
    limited = go(StepRunner(planner, config=budget, repository=repo).run(None, "go"))
    tree = [r for r in repo.list_runs() if r.root_run_id == limited.run_id or r.id == limited.run_id]
    assert sum(r.metrics.cost or 0 for r in tree) <= 0.00010  # the researcher's call is refused before it costs
    inner = next(r for r in tree if r.agent_name == "researcher")
    assert inner.status is RunStatus.BUDGET_EXCEEDED and inner.metrics.model_calls == 0
    assert "max_cost ($0.0001) of the outermost run would be exceeded" in inner.error
    tool_step = next(s for s in repo.get_steps(limited.session_id) if s.name == "researcher")
    assert tool_step.status == "error" and "ended budget_exceeded" in tool_step.content


def test_an_inner_run_cancelled_on_its_own_is_a_tool_result(repo):
    def gives_up(messages, tools):
        raise asyncio.CancelledError()  # the nested run alone is cancelled, not the task of the outer run

    quitter = Agent(model=Brain("q").model, name="quitter")
    quitter.model.fn = gives_up
    planner = Agent(model=Brain("planner", lambda q: [call("quitter", query="q")]).model, tools=[quitter],
                    name="planner")
    result = go(StepRunner(planner, repository=repo).run(None, "go"))
    assert result.status is RunStatus.COMPLETED
    step = next(s for s in result.steps if s.name == "quitter")
    assert step.status == "error" and "agent 'quitter'" in step.content and "ended cancelled" in step.content
    assert next(r for r in repo.list_runs() if r.agent_name == "quitter").status is RunStatus.CANCELLED


def test_inner_failure_becomes_a_tool_result_the_outer_model_sees(repo):
    def broken(messages, tools):
        raise RuntimeError("the researcher's model fell over")

    researcher = Agent(model=Brain("r").model, name="researcher")
    researcher.model.fn = broken
    seen: list = []
    outer = Brain("planner", lambda q: [call("researcher", query="q")])

    def watch(messages, tools):
        seen.append(messages[-1])
        return outer(messages, tools)

    planner = Agent(model=Brain("p").model, tools=[researcher], name="planner")
    planner.model.fn = watch
    result = go(StepRunner(planner, repository=repo).run(None, "go"))
    assert result.status is RunStatus.COMPLETED
    tool_msg = seen[-1]
    assert tool_msg["role"] == "tool"
    assert tool_msg["content"].count("\n") == 0  # one clear line
    assert "agent 'researcher'" in tool_msg["content"] and "ended failed" in tool_msg["content"]
    assert "fell over" in tool_msg["content"]
    inner = next(r for r in repo.list_runs() if r.agent_name == "researcher")
    assert inner.status is RunStatus.FAILED and inner.parent_run_id == result.run_id


def test_recursion_stops_at_the_depth_limit_with_one_clear_tool_error(repo):
    brain = Brain("echo", lambda q: [call("echo", query=q)])
    echo = Agent(model=brain.model, name="echo")
    echo.registry.add(echo.as_tool())  # it calls itself
    result = go(StepRunner(echo, repository=repo).run(None, "deeper"))
    assert result.status is RunStatus.COMPLETED
    runs = tree_runs(repo, result.run_id)
    assert runs["depth"].max() == MAX_DEPTH and len(runs) == MAX_DEPTH + 1
    deepest = next(r for r in repo.list_runs() if r.depth == MAX_DEPTH)
    refused = next(s for s in repo.get_steps(deepest.session_id) if s.role is StepRole.TOOL)
    assert refused.status == "error"
    assert f"agents may nest {MAX_DEPTH} levels deep (echo → echo" in refused.content
    assert refused.content.count("\n") == 0


def _new_nested(repo, before):
    return [r for r in repo.list_runs() if r.parent_run_id and r.id not in before]


@pytest.mark.parametrize("reuse", [True, False])
def test_retry_of_the_outer_run_reuses_or_reruns_the_inner_runs(repo, reuse):
    planner, brains = tree_of_agents()
    runner = StepRunner(planner, repository=repo)
    first = go(runner.run(None, "plan it"))
    before = {r.id for r in repo.list_runs()}
    calls_before = {k: b.calls for k, b in brains.items()}
    retry = go(runner.retry(first.run_id, reuse=reuse))
    assert retry.status is RunStatus.COMPLETED and retry.final_text == first.final_text
    new = _new_nested(repo, before)
    tool_steps = [s for s in retry.steps if s.role is StepRole.TOOL]
    if reuse:  # answered from the recorded runs: no inner agent ran, no model was called
        assert new == [] and {k: b.calls for k, b in brains.items()} == calls_before
        assert all(s.extra["nested_run"]["reused"] for s in tool_steps)
        assert {s.extra["nested_run"]["run_id"] for s in tool_steps} <= before
    else:  # the inner agents ran again, linked to the retry
        assert len(new) == 6 and {r.root_run_id for r in new} == {retry.run_id}
        assert brains["source"].calls == calls_before["source"] + 4


@pytest.mark.parametrize("reuse", [True, False])
def test_fork_of_the_outer_session_reuses_or_reruns_the_inner_runs(repo, reuse):
    planner, brains = tree_of_agents()
    runner = StepRunner(planner, repository=repo)
    first = go(runner.run(None, "plan it"))
    before = {r.id for r in repo.list_runs()}
    forked = go(runner.fork(first.session_id, at=1, reuse=reuse))  # at the query: the model answers again
    assert forked.status is RunStatus.COMPLETED and forked.final_text == first.final_text
    new = _new_nested(repo, before)
    assert (new == []) if reuse else (len(new) == 6 and {r.root_run_id for r in new} == {forked.run_id})


def test_a_cassette_replays_the_whole_tree(any_repo, tmp_path):
    repo = any_repo
    planner, brains = tree_of_agents()
    first = go(StepRunner(planner, repository=repo).run(None, "plan it"))
    cassette = export_cassette(tmp_path / "tree.json", repo, run_id=first.run_id)
    assert len(json.loads(cassette.read_text())["runs"]) == 7
    calls_before = {k: b.calls for k, b in brains.items()}
    replay = ReplayModel.from_cassette(cassette)
    fresh = new_repository(str(tmp_path / "fresh"))
    again = go(StepRunner(planner.with_model(replay), repository=fresh).run(None, "plan it"))
    assert again.status is RunStatus.COMPLETED and again.final_text == first.final_text
    assert {k: b.calls for k, b in brains.items()} == calls_before  # no recorded agent's model was called
    assert replay.replayed == 14
    assert sorted(tree_runs(fresh, again.run_id)["depth"].tolist()) == [0, 1, 1, 2, 2, 3, 3]
    # from the store, the same
    store_replay = ReplayModel.from_run(first.run_id, repo)
    assert len(store_replay.calls) == 14
    fresh.close()


def test_as_tool_shapes_the_tool_and_takes_structured_input(repo):
    class Brief(pydantic.BaseModel):
        topic: str
        words: int = 50

    seen = []
    inner = Brain("writer")

    def watch(messages, tools):
        seen.append(messages[-1]["content"])
        return inner(messages, tools)

    writer = Agent(model=Brain("w").model, name="writer")
    writer.model.fn = watch
    shaped = writer.as_tool(name="write_text", description="Writes a short text.", input=Brief)
    schema = shaped.schema()["function"]
    assert schema["name"] == "write_text" and schema["description"] == "Writes a short text."
    assert schema["parameters"]["required"] == ["query", "input"]
    assert schema["parameters"]["properties"]["input"]["properties"]["topic"]["type"] == "string"
    outer = Agent(model=Brain("o", lambda q: [call("write_text", query="write", input={"topic": "owls"})]).model,
                  tools=[shaped], name="editor")
    result = go(StepRunner(outer, repository=repo).run(None, "go"))
    assert result.status is RunStatus.COMPLETED
    assert seen[0] == 'write\n\nInput:\n{\n "topic": "owls",\n "words": 50\n}'
    with pytest.raises(ValueError, match="a tool name"):
        writer.as_tool(name="no spaces allowed")
    with pytest.raises(TypeError, match="pydantic model class"):
        writer.as_tool(input=dict)


# -- handoffs ------------------------------------------------------------------------------------------
def _handoff_agents():
    seen: dict[str, list] = {"specialist": [], "triage": []}
    spec_brain = Brain("specialist")

    def specialist_fn(messages, tools):
        seen["specialist"].append((messages, [t["function"]["name"] for t in tools]))
        return spec_brain(messages, tools)

    def triage_fn(messages, tools):
        seen["triage"].append(messages)
        if messages[-1]["role"] == "user":
            return Reply.calls(call("transfer_to_specialist", reason="billing"))
        return "should not answer: the specialist holds the conversation"

    from agio_notebook import FunctionModel, tool

    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    specialist = Agent(model=FunctionModel(specialist_fn), tools=[refund], name="specialist",
                       system_prompt="You handle billing.")
    triage = Agent(model=FunctionModel(triage_fn), name="triage", system_prompt="You route.",
                   handoffs=[specialist])
    return triage, specialist, seen


def test_a_handoff_is_a_recorded_step_and_the_session_stays_with_the_new_agent(repo):
    triage, specialist, seen = _handoff_agents()
    runner = StepRunner(triage, repository=repo)
    first = go(runner.run("s1", "I want a refund"))
    assert first.status is RunStatus.COMPLETED
    assert first.final_text == "specialist: The conversation is now with agent 'specialist'."
    messages, tool_names = seen["specialist"][0]
    assert messages[0] == {"role": "system", "content": "You handle billing."}  # its instructions
    assert tool_names == ["refund"]  # its tools
    step = next(s for s in first.steps if s.name == "transfer_to_specialist")
    assert step.extra["handoff"] == {"from": "triage", "to": "specialist", "reason": "billing"}
    handoffs = [e for e in first.events if e.type is E.HANDOFF]
    assert [(e.payload["from"], e.payload["to"]) for e in handoffs] == [("triage", "specialist")]
    assert repo.get_run(first.run_id).agent_name == "specialist"
    # the next turn in that session goes to the specialist, though the runner was made for triage
    triage_calls = len(seen["triage"])
    second = go(runner.run("s1", "and another"))
    assert second.final_text == "specialist answers and another" and len(seen["triage"]) == triage_calls
    turns = frames.runs("s1", repository=repo)
    assert turns["agent_name"].tolist() == ["specialist", "specialist"]
    assert "handed off: triage → specialist" in build_bundle(first.events, first.run)["text/plain"]


def test_a_handoff_moves_its_own_session_only_not_the_runners_next_ones(repo):
    """The runner made for triage still answers a new session with triage after one of its runs handed off,
    and two runs at once keep their own agents."""
    triage, specialist, seen = _handoff_agents()
    runner = StepRunner(triage, repository=repo)
    assert go(runner.run("s1", "I want a refund")).final_text.startswith("specialist:")
    triage_calls = len(seen["triage"])
    fresh = go(runner.run("s2", "I want a refund"))
    assert len(seen["triage"]) == triage_calls + 1  # triage answered the new session first
    assert fresh.final_text.startswith("specialist:")
    assert frames.runs("s2", repository=repo)["agent_name"].tolist() == ["specialist"]

    async def both():
        return await asyncio.gather(runner.run("s3", "I want a refund"), runner.run("s4", "hello"))

    before = len(seen["triage"])
    handed, plain = asyncio.run(both())
    assert handed.final_text.startswith("specialist:")
    assert len(seen["triage"]) >= before + 2  # each new session's first call went to triage


def test_only_the_first_handoff_of_a_turn_is_honoured(repo):
    other = Agent(model=Brain("other").model, name="other")
    specialist = Agent(model=Brain("specialist").model, name="specialist")
    triage = Agent(model=Brain("triage", lambda q: [call("transfer_to_specialist"), call("transfer_to_other")]).model,
                   name="triage", handoffs=[specialist, other])
    result = go(StepRunner(triage, repository=repo).run(None, "help"))
    assert repo.get_run(result.run_id).agent_name == "specialist"
    ignored = next(s for s in result.steps if s.name == "transfer_to_other")
    assert ignored.status == "error"
    assert "only the first handoff of a turn is honoured (transfer_to_specialist was first)" in ignored.content
    assert [e.payload["to"] for e in result.events if e.type is E.HANDOFF] == ["specialist"]


def test_a_cycle_of_handoffs_in_one_turn_is_refused_with_one_line(repo):
    triage_brain = Brain("triage", lambda q: [call("transfer_to_specialist")])
    spec_brain = Brain("specialist", lambda q: [])

    def back(messages, tools):  # the specialist hands straight back
        if messages[-1]["role"] == "tool" and messages[-1]["name"] == "transfer_to_specialist":
            return Reply.calls(call("transfer_to_triage"))
        return spec_brain(messages, tools)

    from agio_notebook import FunctionModel

    specialist = Agent(model=FunctionModel(back), name="specialist")
    triage = Agent(model=triage_brain.model, name="triage", handoffs=[specialist])
    specialist.registry.add(specialist._handoff_tool(triage))
    result = go(StepRunner(triage, repository=repo).run(None, "help"))
    refused = next(s for s in result.steps if s.name == "transfer_to_triage")
    assert refused.status == "error" and refused.content.count("\n") == 0
    assert "a cycle of handoffs in one turn (triage → specialist → triage)" in refused.content
    assert repo.get_run(result.run_id).agent_name == "specialist"


def test_handoff_bad_input_is_one_clear_line_and_loses_nothing(repo):
    triage, specialist, _ = _handoff_agents()
    go(StepRunner(triage, repository=repo).run("s1", "refund please"))
    kept = len(repo.get_steps("s1"))
    stranger = Agent(model=Brain("stranger").model, name="stranger")
    with pytest.raises(InvalidOperationError, match="handed off to agent 'specialist', which agent 'stranger' "
                                                    "cannot reach"):
        go(StepRunner(stranger, repository=repo).run("s1", "hello?"))
    assert len(repo.get_steps("s1")) == kept
    a = Agent(model=Brain("a").model, name="a")
    a.handoffs = [a]  # only reachable by changing an agent after it was made
    with pytest.raises(ValueError, match="cannot hand off to itself"):
        a.__post_init__()
    with pytest.raises(TypeError, match="handoffs must be Agents"):
        Agent(model=Brain("b").model, name="b", handoffs=["specialist"])
    # a model handing off to an agent nobody configured: one tool error naming the tools there are
    lost = Agent(model=Brain("lost", lambda q: [call("transfer_to_nobody")]).model, name="lost",
                 handoffs=[specialist])
    result = go(StepRunner(lost, repository=repo).run(None, "help"))
    step = next(s for s in result.steps if s.name == "transfer_to_nobody")
    assert step.status == "error" and "no tool named 'transfer_to_nobody' (available: transfer_to_specialist)" \
        in step.content and repo.get_run(result.run_id).agent_name == "lost"


def test_trace_tree_and_diff_show_the_nesting(repo):
    facts = {"suffix": ""}
    planner, brains = tree_of_agents()
    brains["source"].make_calls = lambda q: [call("lookup", topic=q.split()[-1] + facts["suffix"])]
    runner = StepRunner(planner, repository=repo)
    first = go(runner.run(None, "plan it"))
    graph = agio.trace(first.run_id, repository=repo)
    assert len(graph.nodes) == 5 + 6 * 4 and sorted(graph.agents.values()) == ["checker", "checker", "researcher",
                                                                                "researcher", "source", "source"]
    edges = set(zip(graph.edges["source"], graph.edges["target"]))
    for run in repo.list_runs():
        if run.parent_run_id == first.run_id:  # the asking model step leads into the nested run's first step
            first_step = repo.get_steps(run.session_id)[0]
            assert (run.parent_step_id, first_step.id) in edges
    assert graph.dot_source().count('subgraph "cluster_') == 6 * 4
    assert len(agio.trace(first.run_id, nested=False, repository=repo).nodes) == 5
    text = repr(agio.tree(first.session_id, repository=repo))
    assert text.count("↳ agent researcher") == 2 and text.count("      ↳ agent source") == 2
    facts["suffix"] = "!"  # the innermost tool now answers differently
    retry = go(runner.retry(first.run_id))
    d = agio.diff(first.run_id, retry.run_id, repository=repo)
    nested_rows = [r for r in d.rows if r.get("nested")]
    assert len(nested_rows) == 2 and all(r["status"] == "changed" for r in nested_rows)
    text = repr(d)
    assert "    |     |     | ~ #3 tool: 'fact about cats' -> 'fact about cats!'" in text


def test_the_trace_names_each_steps_agent_and_boxes_each_nested_run(repo):
    """After a handoff the desk's and the planner's steps differ in the trace; a nested run's steps sit in a
    box named after its agent, in the layout the extension draws (untrusted notebooks show no SVG) and in the
    graph rebuilt from a transcript's events."""
    from agio_notebook.memory.trace import trace_from_events
    from agio_notebook.notebook.transcript import bundle_for_run

    researcher = Agent(model=FunctionModel(lambda m, t: f"found {m[-1]['content']}"), name="researcher",
                       description="looks things up")

    def planner_model(messages, tools):
        done = messages[-1]["role"] == "tool" and messages[-1].get("name") == "researcher"
        return messages[-1]["content"] if done else Reply.call("researcher", query="owls")

    def desk_model(messages, tools):
        return "routed" if messages[-1]["role"] == "tool" else Reply.call("transfer_to_planner", reason="notes")
    planner = Agent(model=FunctionModel(planner_model), tools=[researcher], name="planner", description="plans")
    desk = Agent(model=FunctionModel(desk_model), name="desk", handoffs=[planner])
    run = go(StepRunner(desk, repository=repo).run(None, "a note on owls"))
    events = bundle_for_run(repo, run.run_id)["application/vnd.agio.run+json"]["events"]
    for graph in (agio.trace(run.run_id, repository=repo), trace_from_events(run.run_id, events)):
        labels = list(graph.nodes["label"])
        assert "#2 desk: calls transfer_to_planner" in labels and "#4 planner: calls researcher" in labels
        assert "#2 researcher: found owls" in labels and not any(" model: " in label for label in labels)
        boxes = graph.data()["layout"]["clusters"]
        assert [b["label"] for b in boxes] == ["agent researcher"]
        inside = [n for n, d in graph.data()["layout"]["nodes"].items()
                  if graph.nodes.set_index("id").loc[n, "run_id"] != run.run_id]
        box = boxes[0]
        for name in inside:  # every step of the nested run is drawn inside its box
            n = graph.data()["layout"]["nodes"][name]
            assert box["x"] <= n["x"] <= box["x"] + box["w"] and box["y"] <= n["y"] <= box["y"] + box["h"]
        assert len(inside) == 2


def test_tools_needing_approval_in_a_nested_run_ask_the_outer_runs_approver(repo):
    from agio_notebook import tool
    from agio_notebook.execution import ApprovalDecision

    @tool(requires_approval=True)
    def delete(name: str) -> str:
        """Delete a file."""
        return f"deleted {name}"

    janitor = Agent(model=Brain("janitor", lambda q: [call("delete", name=q)]).model, tools=[delete], name="janitor")
    boss = Agent(model=Brain("boss", lambda q: [call("janitor", query="old.txt")]).model, tools=[janitor], name="boss")
    asked = []

    async def approver(request):
        asked.append((request.name, request.arguments))
        return ApprovalDecision(True)

    result = go(StepRunner(boss, repository=repo, approver=approver).run(None, "clean up"))
    assert asked == [("delete", {"name": "old.txt"})]
    assert result.final_text == "boss: janitor: deleted old.txt"


def test_a_retry_after_a_handoff_goes_on_with_the_agent_that_held_the_conversation(repo):
    triage, specialist, seen = _handoff_agents()
    runner = StepRunner(triage, repository=repo)
    first = go(runner.run("s1", "refund please"))
    answer = next(s for s in first.steps if s.role is StepRole.ASSISTANT and s.content)
    before = (len(seen["triage"]), len(seen["specialist"]))
    retry = go(runner.retry(first.run_id, from_seq=answer.sequence))  # the specialist's answer, again
    assert (len(seen["triage"]), len(seen["specialist"])) == (before[0], before[1] + 1)
    assert retry.final_text == first.final_text and repo.get_run(retry.run_id).agent_name == "specialist"
