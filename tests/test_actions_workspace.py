"""Workspace files through a scripted agent, the action records (events, store, frame), and workspaces
that follow retries and forks."""

from __future__ import annotations

import asyncio
import os
import json

import pytest

import agio_notebook
from agio_notebook import Agent, ExecutionConfig, ScriptedModel, StepRunner, fork_session
from agio_notebook.core import StepEventType as E
from agio_notebook.models.scripted import Reply
from agio_notebook.storage import TinyDBRepository, new_repository
from agio_notebook.toolkits import python_sandbox, workspace_files, workspace_for
from agio_notebook.toolkits.sandbox import pool

from actions_support import one_tool_step, run_calls, tool_steps


@pytest.fixture
def env(tmp_path, monkeypatch, store_url):
    """Each test on every backend (TinyDB, SQLite, PostgreSQL): workspaces follow the stored history."""
    monkeypatch.setenv("AGIO_WORKSPACES", str(tmp_path / "ws"))
    repo = new_repository(store_url)
    yield repo, [*python_sandbox(), *workspace_files()]
    pool.close_all()
    repo.close()


def files_of(repo, session):
    ws = workspace_for(session, repository=repo)
    return {p.relative_to(ws.dir).as_posix(): p.read_text() for p in sorted(ws.dir.rglob("*")) if p.is_file()}


def test_file_tools_normal_path_with_diffs_events_and_frame(env):
    repo, tools = env
    result = run_calls(repo, "s", tools,
                       ("write_file", {"path": "notes/todo.md", "content": "- buy milk\n"}),
                       ("append_file", {"path": "notes/todo.md", "content": "- call Bob\n"}),
                       ("replace_in_file", {"path": "notes/todo.md", "old": "milk", "new": "bread"}),
                       ("read_file", {"path": "notes/todo.md"}),
                       ("list_files", {"path": "notes"}),
                       ("glob_files", {"pattern": "**/*.md"}),
                       ("search_files", {"pattern": "bob", "ignore_case": True}))
    steps = tool_steps(result)
    assert [s.status for s in steps] == ["ok"] * 7, [s.content for s in steps]
    assert steps[3].content == "- buy bread\n- call Bob\n"
    assert json.loads(steps[4].content) == [{"name": "todo.md", "type": "file", "size": 23}]
    assert json.loads(steps[5].content) == ["notes/todo.md"]
    assert json.loads(steps[6].content) == [{"path": "notes/todo.md", "line": 2, "text": "- call Bob"}]
    replace = steps[2].extra["actions"][0]
    assert "-- buy milk\n+- buy bread\n" in replace["output"]["diff"]
    assert replace["step_sequence"] == steps[2].sequence - 1 and replace["tool_call_id"] == steps[2].tool_call_id
    # events: started + completed per action, stored with the run
    stored = [e.type for e in repo.get_events(result.run_id, 0, 1000)]
    assert stored.count(E.ACTION_STARTED) == 7 and stored.count(E.ACTION_COMPLETED) == 7
    frame = agio_notebook.actions("s", repository=repo)
    assert list(frame["name"]) == ["write_file", "append_file", "replace_in_file", "read_file", "list_files",
                                   "glob_files", "search_files"]
    assert str(frame["started_at"].dtype) == "datetime64[ns, UTC]" and (frame["duration_ms"] >= 0).all()
    assert frame["diff"].iloc[0].startswith("--- /dev/null")
    assert files_of(repo, "s") == {"notes/todo.md": "- buy bread\n- call Bob\n"}


def test_binary_and_size_limits(env):
    repo, tools = env
    step = one_tool_step(repo, "b", tools, "run_python", code="open('blob.bin','wb').write(bytes(range(256)) * 10)")
    assert step.status == "ok"
    bad = one_tool_step(repo, "b", tools, "read_file", path="blob.bin")
    assert bad.status == "error" and "binary file" in bad.content
    from agio_notebook.toolkits import FileLimits

    small = workspace_files(limits=FileLimits(max_write_bytes=10))
    big = one_tool_step(repo, "b", small, "write_file", path="x.txt", content="x" * 11)
    assert big.status == "error" and "refusing to write 11 bytes (limit 10)" in big.content


def test_python_sees_written_files_and_its_writes_are_snapshotted(env):
    repo, tools = env
    result = run_calls(repo, "p", tools,
                       ("write_file", {"path": "data.csv", "content": "a,b\n1,2\n3,4\n"}),
                       ("run_python", {"code": "import pandas as pd\ndf = pd.read_csv('data.csv')\n"
                                               "df.assign(c=df.a + df.b).to_csv('out.csv', index=False)\nint(df.b.sum())"}),
                       ("run_python", {"code": "int(df.a.sum())"}))
    steps = tool_steps(result)
    assert "[value] 6" in steps[1].content and "[value] 4" in steps[2].content
    assert steps[1].extra["workspace"]["changes"].keys() == {"out.csv"}
    frame = agio_notebook.actions("p", repository=repo)
    assert frame.loc[1, "stdout"] == "" and json.loads(frame.loc[1, "output"])["workspace_changes"].keys() == {"out.csv"}


def test_fork_gets_the_workspace_as_at_the_fork_step_and_branches_stay_apart(env):
    repo, tools = env
    first = run_calls(repo, "main", tools, ("write_file", {"path": "a.txt", "content": "v1"}))
    fork_at = first.steps[-1].sequence
    run_calls(repo, "main", tools, ("write_file", {"path": "a.txt", "content": "v2"}),
              ("write_file", {"path": "b.txt", "content": "only in main"}))
    assert files_of(repo, "main") == {"a.txt": "v2", "b.txt": "only in main"}
    forked = fork_session("main", fork_at, repo)
    step = one_tool_step(repo, forked, tools, "read_file", path="a.txt")
    assert step.content == "v1"
    one_tool_step(repo, forked, tools, "write_file", path="c.txt", content="only in fork")
    assert files_of(repo, forked) == {"a.txt": "v1", "c.txt": "only in fork"}
    assert files_of(repo, "main") == {"a.txt": "v2", "b.txt": "only in main"}
    # and the main branch keeps working on its own files
    assert one_tool_step(repo, "main", tools, "read_file", path="b.txt").content == "only in main"


def test_retry_restores_the_workspace_and_starts_a_fresh_interpreter(env):
    repo, tools = env
    run_calls(repo, "r", tools, ("write_file", {"path": "a.txt", "content": "v1"}),
              ("run_python", {"code": "x = 1"}))
    second = run_calls(repo, "r", tools, ("write_file", {"path": "a.txt", "content": "v2"}),
                       ("run_python", {"code": "x = 2\nopen('made.txt', 'w').write('by attempt 1')"}))
    assert files_of(repo, "r") == {"a.txt": "v2", "made.txt": "by attempt 1"}
    model = ScriptedModel([Reply.call("run_python", code="print(open('a.txt').read())\nx"), Reply.say("done")])
    agent = Agent(model=model, tools=tools, config=ExecutionConfig(enable_retry=False))
    retry = asyncio.run(StepRunner(agent, repository=repo).retry(second.run_id))
    (step,) = tool_steps(retry)
    assert "v1" in step.content and "[value] 1" not in step.content
    assert "workspace restored" in step.content and "fresh interpreter" in step.content
    assert "NameError" in step.content  # x is gone: the interpreter is fresh, as the result says
    assert files_of(repo, "r") == {"a.txt": "v1"}


def test_a_retry_restores_the_workspace_at_once_even_without_actions(env):
    repo, tools = env
    run_calls(repo, "q", tools, ("write_file", {"path": "a.txt", "content": "v1"}))
    second = run_calls(repo, "q", tools, ("write_file", {"path": "a.txt", "content": "v2"}),
                       ("write_file", {"path": "b.txt", "content": "new"}))
    assert files_of(repo, "q") == {"a.txt": "v2", "b.txt": "new"}
    agent = Agent(model=ScriptedModel([Reply.say("nothing to do")]), tools=tools)
    asyncio.run(StepRunner(agent, repository=repo).retry(second.run_id))
    assert files_of(repo, "q") == {"a.txt": "v1"}


def test_replay_python_brings_variables_back(env):
    repo, tools = env
    run_calls(repo, "rp", tools, ("run_python", {"code": "x = 20"}), ("run_python", {"code": "y = x + 1"}))
    forked = fork_session("rp", repo.get_last_step("rp").sequence, repo)
    from agio_notebook.toolkits import replay_python

    results = replay_python(forked, repo)
    assert [r.error for r in results] == [None, None]
    assert "[value] 42" in one_tool_step(repo, forked, tools, "run_python", code="x + y + 1").content


def test_approval_can_be_required_per_action_kind(env):
    repo, _ = env
    from agio_notebook.execution.approval import ApprovalDecision

    asked = []

    async def approver(request):
        asked.append(request.name)
        return ApprovalDecision(False, reason="no writes today")

    tools = [*python_sandbox(), *workspace_files(requires_approval=True)]
    model = ScriptedModel([Reply.call("write_file", path="a.txt", content="x"), Reply.call("read_file", path="a.txt"),
                           Reply.call("run_python", code="1 + 1"), Reply.say("done")])
    result = asyncio.run(StepRunner(Agent(model=model, tools=tools), repository=repo, approver=approver).run("ap", "go"))
    steps = tool_steps(result)
    assert asked == ["write_file"]  # reads and code ran without asking; the write waited for a decision
    assert steps[0].status == "rejected" and "no writes today" in steps[0].content
    assert steps[1].status == "error" and "no file 'a.txt'" in steps[1].content
    assert steps[2].status == "ok" and "[value] 2" in steps[2].content


def test_parallel_calls_in_one_turn_are_all_snapshotted(env):
    repo, tools = env
    from agio_notebook.models.scripted import call

    batch = [call("write_file", path=f"f{i}.txt", content=str(i)) for i in range(6)]
    batch.append(call("run_python", code="open('py.txt', 'w').write('from python')"))
    model = ScriptedModel([Reply.calls(*batch), Reply.say("done")])
    agent = Agent(model=model, tools=tools, config=ExecutionConfig(parallel_tool_calls=True, max_parallel_tools=8))
    result = asyncio.run(StepRunner(agent, repository=repo).run("par", "go"))
    assert all(s.status == "ok" for s in tool_steps(result)), [s.content for s in tool_steps(result)]
    expected = {**{f"f{i}.txt": str(i) for i in range(6)}, "py.txt": "from python"}
    assert files_of(repo, "par") == expected
    forked = fork_session("par", result.steps[-1].sequence, repo)
    one_tool_step(repo, forked, tools, "list_files")
    assert files_of(repo, forked) == expected


def test_prune_workspaces_after_the_store_deleted_a_session(env):
    repo, tools = env
    from agio_notebook.toolkits import prune_workspaces

    run_calls(repo, "keep", tools, ("write_file", {"path": "k.txt", "content": "kept"}))
    run_calls(repo, "gone", tools, ("write_file", {"path": "g.txt", "content": "gone soon"}))
    gone_dir = workspace_for("gone", repository=repo).dir
    assert gone_dir.is_dir()
    repo.delete_session("gone")
    assert prune_workspaces(repo) == {"workspaces": 1, "blobs": 1}
    assert not gone_dir.exists()
    assert files_of(repo, "keep") == {"k.txt": "kept"}
    forked = fork_session("keep", repo.get_last_step("keep").sequence, repo)  # its blob is still there
    assert one_tool_step(repo, forked, tools, "read_file", path="k.txt").content == "kept"


def test_switching_back_to_an_earlier_attempt_brings_its_workspace_back(env):
    repo, tools = env
    from agio_notebook.execution.attempts import use_attempt

    first = run_calls(repo, "att", tools, ("write_file", {"path": "a.txt", "content": "attempt 1"}))
    agent = Agent(model=ScriptedModel([Reply.call("write_file", path="a.txt", content="attempt 2"),
                                       Reply.call("write_file", path="b.txt", content="only 2"), Reply.say("ok")]),
                  tools=tools)
    asyncio.run(StepRunner(agent, repository=repo).retry(first.run_id))
    assert files_of(repo, "att") == {"a.txt": "attempt 2", "b.txt": "only 2"}
    use_attempt(repo, first.run_id, 1)
    assert files_of(repo, "att") == {"a.txt": "attempt 1"}
    use_attempt(repo, first.run_id, 2)
    assert files_of(repo, "att") == {"a.txt": "attempt 2", "b.txt": "only 2"}


@pytest.mark.parametrize("forged", ["{secret}", "../../../../../../../../etc/passwd", "0" * 63 + "g"])
def test_a_forged_workspace_history_in_the_store_never_names_a_host_file(env, tmp_path, forged):
    """A store written by someone else (a shared database, a merged migration) is not trusted to name files."""
    from agio_notebook.core import Step, StepRole, ToolCall

    repo, tools = env
    secret = tmp_path / "host_secret.txt"
    secret.write_text("TOP SECRET sk-hostkey")
    call = ToolCall("c1", "write_file", "{}")
    repo.commit(steps=[
        Step(session_id="victim", run_id="r0", sequence=1, role=StepRole.USER, content="hi"),
        Step(session_id="victim", run_id="r0", sequence=2, role=StepRole.ASSISTANT, tool_calls=[call]),
        Step(session_id="victim", run_id="r0", sequence=3, role=StepRole.TOOL, tool_call_id="c1", name="write_file",
             content="ok", extra={"workspace": {"changes": {"notes.txt": forged.format(secret=secret)}}}),
        Step(session_id="victim", run_id="r0", sequence=4, role=StepRole.ASSISTANT, content="done")])
    step = one_tool_step(repo, "victim", tools, "read_file", path="notes.txt")
    assert step.status == "error" and "damaged" in step.error
    assert "TOP SECRET" not in (step.content or "") + (step.error or "")
    assert not (workspace_for("victim", repository=repo).dir / "notes.txt").exists()


def test_pruning_never_touches_workspaces_another_store_shares(tmp_path, monkeypatch, postgres_server):
    """A store with no folder of its own for workspaces refuses to prune; PostgreSQL has a folder of its own."""
    from agio_notebook.storage import InMemoryRepository
    from agio_notebook.toolkits.errors import ActionError
    from agio_notebook.toolkits.workspace import prune_workspaces, workspaces_root

    monkeypatch.delenv("AGIO_WORKSPACES", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ActionError, match="no folder of its own"):
        prune_workspaces(InMemoryRepository())
    tiny = new_repository(str(tmp_path / ".agio"))
    pg = new_repository(postgres_server.new_database())
    assert workspaces_root(pg) != workspaces_root(tiny) and "postgres-" in str(workspaces_root(pg))
    assert "agio-secret" not in str(workspaces_root(pg))
    pg.close()
    tiny.close()


def test_a_restore_of_many_directories_keeps_few_descriptors_open(env):
    """A virtualenv or node_modules in a workspace: thousands of directories restored with the process's
    descriptor limit far below their number; a path deeper than the limit allows is one clear line."""
    import resource

    from agio_notebook.toolkits import ActionError

    repo, _ = env
    ws = workspace_for("many", repository=repo)
    ws.create()
    (ws.dir / "f.txt").write_text("the same content everywhere")
    sha = ws.store_blob("f.txt")[0]
    target = {f"pkg{i // 30}/mod{i % 30}/f.txt": sha for i in range(600)}
    target["deep/" + "/".join(f"d{i}" for i in range(8)) + "/f.txt"] = sha
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    spare = 64  # descriptors left beyond those the process holds now (a test worker holds many)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + spare, hard))
    try:
        ws.restore(target, None)  # 620 directories with 64 descriptors to spare
        assert sum(1 for p in ws.dir.rglob("f.txt")) == 601
        assert (ws.dir / "pkg19" / "mod29" / "f.txt").read_text() == "the same content everywhere"
        too_deep = {"/".join(f"d{i}" for i in range(200)) + "/f.txt": sha}
        with pytest.raises(ActionError, match=r"^workspace restore stopped at 'd0/d1/.*': Too many open files$"):
            ws.restore(too_deep, None)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
