"""The trace graph: parent ids on every step, agio_notebook.trace() as DataFrames and an SVG drawing."""

from __future__ import annotations

import asyncio
import base64

import pytest

import agio_notebook
from agio_notebook import Agent, StepRunner, memory, fork_session
from agio_notebook.core import NotFoundError
from agio_notebook.memory.trace import MIME_TYPE as TRACE_MIME, trace_from_events
from agio_notebook.storage import TinyDBRepository

from engine_support import ChunkModel, add, calls, text


@pytest.fixture
def repo(tmp_path):
    return TinyDBRepository(tmp_path / "store")


def edges_by_sequence(tr):
    seq = dict(zip(tr.nodes["id"], zip(tr.nodes["sequence"], tr.nodes["attempt"])))
    return sorted((seq[s], seq[t]) for s, t in zip(tr.edges["source"], tr.edges["target"]))


def test_parallel_tool_calls_fan_out_and_join(repo):
    memory.add_skill("adding", "Add numbers with the add tool.", scope="agent", repository=repo)
    model = ChunkModel([calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4}), ("add", {"a": 5, "b": 6})),
                        text("done")])
    runner = StepRunner(Agent(model=model, tools=[add]), repository=repo)
    result = asyncio.run(runner.run(None, "add these numbers"))
    tr = agio_notebook.trace(result.run_id, repository=repo)
    # 1 user -> 2 memory_read -> 3 model -> 4,5,6 tools -> 7 model (all three tools are its parents)
    assert list(tr.nodes["kind"]) == ["user", "memory_read", "model", "tool", "tool", "tool", "model"]
    assert edges_by_sequence(tr) == [((1, 1), (2, 1)), ((2, 1), (3, 1)), ((3, 1), (4, 1)), ((3, 1), (5, 1)),
                                     ((3, 1), (6, 1)), ((4, 1), (7, 1)), ((5, 1), (7, 1)), ((6, 1), (7, 1))]
    steps = repo.get_steps(result.session_id)
    assert steps[6].parent_ids == [s.id for s in steps[3:6]]
    svg = tr.svg()
    assert svg.startswith("<svg") and svg.count('class="node') == 7 and svg.count('class="edge') == 8
    assert "add these numbers" in svg
    bundle = tr._repr_mimebundle_()
    data = bundle[TRACE_MIME]  # the extension draws it; untrusted notebooks show no SVG output
    assert "image/svg+xml" not in bundle and base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert [n["kind"] for n in data["nodes"]] == list(tr.nodes["kind"]) and len(data["edges"]) == 8
    laid = data["layout"]
    assert set(laid["nodes"]) == set(tr.nodes["id"]) and len(laid["edges"]) == 8
    for edge in laid["edges"]:  # each edge runs downwards from its tail to its head, inside the drawing
        tail, head = laid["nodes"][edge["tail"]], laid["nodes"][edge["head"]]
        assert tail["y"] < head["y"] and len(edge["points"]) % 3 == 1
        assert all(0 <= x <= laid["width"] and 0 <= y <= laid["height"] for x, y in edge["points"])
    assert "trace of run" in bundle["text/plain"] and "<agio" not in bundle["text/plain"]
    # the same graph from the run's events (what a saved notebook keeps)
    from_events = trace_from_events(result.run_id, [e.to_dict() for e in result.events])
    assert edges_by_sequence(from_events) == edges_by_sequence(tr)


def test_a_retry_branches_from_the_recorded_memory(repo):
    memory.add_skill("adding", "Add numbers with the add tool.", scope="agent", repository=repo)
    model = ChunkModel([calls(("add", {"a": 1, "b": 2})), text("3"), text("three")])
    runner = StepRunner(Agent(model=model, tools=[add]), repository=repo)
    first = asyncio.run(runner.run(None, "add 1 and 2"))
    retry = asyncio.run(runner.retry(first.run_id))
    tr = agio_notebook.trace(retry.run_id, repository=repo)
    # the retry's model step follows the first run's memory_read (a context node), not a new one
    assert list(tr.nodes["kind"]) == ["context", "model"]
    assert tr.nodes.iloc[0]["label"].startswith("#2 memory")
    assert edges_by_sequence(tr) == [((2, 1), (3, 2))]
    old = agio_notebook.trace(first.run_id, repository=repo)
    assert old.nodes["superseded"].tolist() == [False, False, True, True, True]  # kept, drawn dashed
    assert 'stroke-dasharray' in old.svg()


def test_fork_keeps_the_graph_inside_the_fork(repo):
    model = ChunkModel([calls(("add", {"a": 1, "b": 2})), text("3")])
    runner = StepRunner(Agent(model=model, tools=[add]), repository=repo)
    first = asyncio.run(runner.run(None, "add"))
    new = fork_session(first.session_id, 4, repo)
    copies = repo.get_steps(new)
    ids = {s.id for s in copies}
    assert all(p in ids for s in copies for p in s.parent_ids)
    assert copies[3].parent_ids == [copies[2].id]


def test_top_level_trace_and_unknown_run(repo):
    runner = StepRunner(Agent(model=ChunkModel([text("hi")])), repository=repo)
    result = asyncio.run(runner.run(None, "hello"))
    tr = agio_notebook.trace(result.run_id, repository=repo)
    assert len(tr.nodes) == 2 and len(tr.edges) == 1
    with pytest.raises(NotFoundError, match="no run 'nope'"):
        agio_notebook.trace("nope", repository=repo)


def test_actions_hang_off_the_tool_step_that_performed_them(repo):
    from agio_notebook import tool
    from agio_notebook.toolkits.actions import recorded

    @tool
    def read_note(name: str) -> str:
        """Read a note (recorded as an action)."""
        with recorded("file", "read_note", {"name": name}) as action:
            action.output = {"bytes": 5}
            return "hello"

    model = ChunkModel([calls(("read_note", {"name": "a.txt"})), text("it says hello")])
    result = asyncio.run(StepRunner(Agent(model=model, tools=[read_note]), repository=repo).run(None, "read a.txt"))
    tr = agio_notebook.trace(result.run_id, repository=repo)
    action = tr.nodes[tr.nodes["kind"] == "action"]
    assert len(action) == 1 and action.iloc[0]["label"] == "action file: read_note [ok]"
    tool_id = tr.nodes[tr.nodes["kind"] == "tool"].iloc[0]["id"]
    assert (tool_id, action.iloc[0]["id"]) in set(zip(tr.edges["source"], tr.edges["target"]))
    assert tr.svg().count('class="node') == 5
