"""The seed's ExecutionEngine routes code, file, web and tool actions and records each."""

from __future__ import annotations

import asyncio

import pytest

from agio_notebook import tool
from agio_notebook.toolkits import ExecutionEngine
from agio_notebook.toolkits.engine import Action
from agio_notebook.toolkits.sandbox import pool


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@pytest.fixture
def engine(tmp_path):
    e = ExecutionEngine("engine-session", tools=[shout], workspace_root=tmp_path / "ws")
    yield e
    pool.close_all()


def test_routes_each_action_type_and_records_it(engine):
    run = lambda a: asyncio.run(engine.execute_action(a))  # noqa: E731
    wrote = run(Action("file_operation", {"operation": "write", "path": "n.txt", "content": "7"}))
    assert wrote.success, wrote.error
    code = run(Action("code_execution", {"code": "int(open('n.txt').read()) * 6"}))
    assert code.success and "[value] 42" in code.data
    read = run(Action("file_operation", {"operation": "read", "path": "n.txt"}))
    assert read.data == "7"
    assert run(Action("tool_call", {"name": "shout", "arguments": {"text": "hi"}})).data == "HI"
    blocked = run(Action("web_browsing", {"action": "fetch", "url": "http://192.168.1.1/"}))
    assert not blocked.success and "private address" in blocked.error
    unknown = run(Action("teleport", {}))
    assert not unknown.success and unknown.error == "Unknown action type: teleport"
    kinds = [(r["kind"], r["name"], r["status"]) for r in engine.context_graph.records]
    assert kinds == [("file_operation", "write_file", "ok"), ("code_execution", "run_python", "ok"),
                     ("file_operation", "read_file", "ok"), ("web_browsing", "web_fetch", "error")]
    assert all(r["session_id"] == "engine-session" for r in engine.context_graph.records)


def test_bad_limits_are_one_clear_line():
    from agio_notebook.core import AgioError
    from agio_notebook.toolkits import FileLimits, SandboxLimits, python_sandbox
    from agio_notebook.toolkits.web import WebLimits

    with pytest.raises(AgioError, match=r"^SandboxLimits.timeout must be positive, got 0$"):
        SandboxLimits(timeout=0)
    with pytest.raises(AgioError, match=r"^FileLimits.max_read_bytes must be positive, got -1$"):
        FileLimits(max_read_bytes=-1)
    with pytest.raises(AgioError, match=r"^WebLimits.max_redirects must be zero or more, got -1$"):
        WebLimits(max_redirects=-1)
    assert WebLimits(max_redirects=0).max_redirects == 0
    with pytest.raises(AgioError, match=r"^unknown isolation level 'docker' \(choose from bubblewrap, process\)$"):
        python_sandbox(isolation="docker")


def test_execute_with_reflection_revises_a_failed_action(engine):
    from agio_notebook.toolkits import execute_with_reflection

    seen = []

    async def revise(action, result):
        seen.append(result.error.splitlines()[-1] if "NameError" not in result.error else "NameError")
        return Action("code_execution", {"code": action.data["code"].replace("undefined_name", "21")})

    result = asyncio.run(execute_with_reflection(engine, Action("code_execution", {"code": "undefined_name * 2"}),
                                                 max_retries=2, revise=revise))
    assert result.success and "[value] 42" in result.data
    assert seen == ["NameError"]
    assert [r["status"] for r in engine.context_graph.records] == ["error", "ok"]
    gave_up = asyncio.run(execute_with_reflection(engine, Action("code_execution", {"code": "1/0"}),
                                                  revise=lambda a, r: asyncio.sleep(0, None)))
    assert not gave_up.success and "ZeroDivisionError" in gave_up.error
