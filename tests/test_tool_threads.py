"""Synchronous tools run on the process's tool threads: a script's runs reuse them, a call sees its tool
call's context there, and a call that timed out does not hold up the ``run_sync`` that made it."""

from __future__ import annotations

import threading

from agio_notebook import Agent, Reply, ScriptedModel, tool
from agio_notebook.tools.context import get_call


def test_sync_tools_reuse_the_tool_threads_and_see_their_call():
    seen: list[tuple[str, str | None]] = []

    @tool
    def where() -> str:
        """Which thread and which call."""
        call = get_call()
        seen.append((threading.current_thread().name, call.tool_name if call is not None else None))
        return "here"

    agent = Agent(model=ScriptedModel([Reply.call("where"), "done"], loop=True), tools=[where], name="threads")
    for _ in range(5):
        assert agent.run_sync("where?").final_text == "done"
    assert [name for _, name in seen] == ["where"] * 5
    threads = {thread for thread, _ in seen}
    alive = {t.name for t in threading.enumerate()}
    assert all(t.startswith("agio-tool") and t in alive for t in threads), seen  # kept after the runs' loops


def test_a_timed_out_sync_tool_does_not_hold_up_its_run_sync(tmp_path, monkeypatch):
    monkeypatch.setenv("AGIO_STORE", str(tmp_path / "store"))
    release = threading.Event()

    @tool(timeout=0.2)
    def stuck() -> str:
        """Never answers in time."""
        release.wait(60)
        return "late"

    agent = Agent(model=ScriptedModel([Reply.call("stuck"), "gave up"]), tools=[stuck], name="stuck")
    results: list = []
    caller = threading.Thread(target=lambda: results.append(agent.run_sync("try")))
    caller.start()
    try:
        caller.join(20)
        assert not caller.is_alive(), "run_sync waited for the timed-out tool's thread"
        result = results[0]
        assert result.final_text == "gave up"
        failed = [s for s in result.steps if s.role.value == "tool"]
        assert failed[0].status == "error" and "took longer than 0.2s" in failed[0].error
    finally:
        release.set()
        caller.join(60)
