"""tree(): structure after retries and forks, the current attempt marked, timelines, bars and transcripts."""

from __future__ import annotations

import pytest

import agio_notebook
from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import NotFoundError
from agio_notebook.explore.tree import MIME_TYPE
from explore_support import go, repo, weather


def build(repo):
    model = ScriptedModel([Reply.call("weather", city="Paris"), "Sunny <script>x</script>.", "Bye."], name="m")
    runner = StepRunner(Agent(model=model, tools=[weather]), repository=repo)
    first = go(runner.run(None, "weather?"))
    second = go(runner.run(first.session_id, "thanks"))
    retry1 = go(StepRunner(Agent(model=ScriptedModel(["You're welcome."])), repository=repo).retry(second.run_id))
    retry2 = go(StepRunner(Agent(model=ScriptedModel(["Anytime."])), repository=repo).retry(retry1.run_id))
    fork = go(StepRunner(Agent(model=ScriptedModel(["Forked answer."])), repository=repo).fork(first.session_id, 1))
    fork_of_fork = go(StepRunner(Agent(model=ScriptedModel(["Deeper."])), repository=repo).fork(fork.session_id, 1))
    return first, second, retry1, retry2, fork, fork_of_fork


def test_tree_structure_after_retries_and_forks(repo):
    first, second, retry1, retry2, fork, fork_of_fork = build(repo)
    t = agio_notebook.tree(first.session_id, repository=repo)
    root = t.data["root"]
    assert [c["id"] for c in root["children"]] == [first.run_id, second.run_id]
    first_node, second_node = root["children"]
    # the fork taken at step 1 hangs under the run that wrote step 1; the fork of the fork under its run
    fork_node = first_node["children"][0]
    assert fork_node["kind"] == "session" and fork_node["id"] == fork.session_id and fork_node["forked_at"] == 1
    assert fork_node["children"][0]["id"] == fork.run_id
    # the fork of the fork was taken at a copied step (no run of the fork wrote it): it hangs under the fork
    assert fork_node["children"][1]["id"] == fork_of_fork.session_id
    assert fork_node["children"][1]["children"][0]["id"] == fork_of_fork.run_id
    # retries nest under the attempt they retried; only the last attempt is current
    assert second_node["children"][0]["id"] == retry1.run_id
    assert second_node["children"][0]["children"][0]["id"] == retry2.run_id
    current = {n["id"]: n["current"] for n in t.runs}
    assert current[second.run_id] is False and current[retry1.run_id] is False and current[retry2.run_id] is True
    assert current[first.run_id] is True
    assert len(t.runs) == 6
    # timeline phases in order: model call, tool, model answer
    assert [p["kind"] for p in first_node["timeline"]] == ["model", "tool", "model"]
    assert [e["role"] for e in first_node["transcript"]] == ["user", "assistant", "tool", "assistant"]
    assert t.data["scale"]["tokens"] == max(n["tokens"] for n in t.runs)


def test_tree_renderings(repo):
    first, *_ = build(repo)
    bundle = agio_notebook.tree(first.session_id, repository=repo)._repr_mimebundle_()
    assert set(bundle) == {MIME_TYPE, "text/html", "text/plain"}
    html = bundle["text/html"]
    assert html.count('class="agio-tree-run') == 6 and html.count("★ current") == 4
    assert "<details>" in html and "&lt;script&gt;" in html and "<script>" not in html
    assert html.count('class="agio-phase agio-phase-tool"') == 1
    # without the extension, the commands a node's buttons would run are shown to copy
    assert html.count("run in a cell: <code>%agio replay ") == 6 and html.count("%agio use-attempt ") == 2
    text = bundle["text/plain"]
    assert text.splitlines()[0].startswith("agio tree of session") and "fork" in text


def test_unknown_session_is_one_line(repo):
    with pytest.raises(NotFoundError, match="no session 'nope' in the store"):
        agio_notebook.tree("nope", repository=repo)


def test_timeline_shows_approval_phases(repo):
    from agio_notebook.execution import ApprovalDecision

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return "deleted"

    async def approve(request):
        return ApprovalDecision(True)

    model = ScriptedModel([Reply.call("delete", path="a.txt"), "Done."])
    run = go(StepRunner(Agent(model=model, tools=[delete]), repository=repo, approver=approve).run(None, "clean up"))
    node = agio_notebook.tree(run.session_id, repository=repo).runs[0]
    assert [p["kind"] for p in node["timeline"]] == ["model", "approval", "tool", "model"]
    assert node["timeline"][1]["label"] == "approval delete: yes"


def test_current_mark_follows_use_attempt(repo):
    from agio_notebook.execution.attempts import use_attempt

    first, second, retry1, retry2, *_ = build(repo)
    use_attempt(repo, retry2.run_id, 1)  # the first answer to "thanks" is current again
    current = {n["id"]: n["current"] for n in agio_notebook.tree(first.session_id, repository=repo).runs}
    assert current[second.run_id] is True and current[retry1.run_id] is False and current[retry2.run_id] is False
