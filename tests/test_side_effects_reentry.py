"""Every path that re-enters a recorded session honours ``@tool(side_effects=True, on_replay=...)``:
runner.fork, retry, replay, sweeps, ``fork_session`` followed by ``resume`` or by a new query (what the
notebook's Fork control and ``%agio fork`` do), and ``%agio fork`` in a real kernel."""

from __future__ import annotations

import pytest

from agio_notebook import Agent, ExecutionConfig, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import RunStatus
from agio_notebook.execution import fork_session
from agio_notebook.explore import sweep
from agio_notebook.models import ReplayModel
from agio_notebook.storage import InMemoryRepository
from explore_support import go, repo  # noqa: F401 - the fixture
from kernel_support import offline_kernel


def mailer():
    sent: list[str] = []

    @tool(side_effects=True, on_replay="record")
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to} (#{len(sent)})"

    return send_email, sent


def agent(send_email, name="mailer"):
    return Agent(model=ScriptedModel([Reply.call("send_email", to="ann@example.org"), "Sent."], loop=True),
                 tools=[send_email], name=name)


def reenter(path, repository, send_email, first):
    runner = StepRunner(agent(send_email), repository=repository)
    if path == "runner.fork":
        return go(runner.fork(first.session_id, 1))
    if path == "retry":
        return go(runner.retry(first.run_id))
    if path == "replay":
        replayed = Agent(model=ReplayModel.from_run(first.run_id, repository), tools=[send_email])
        return go(StepRunner(replayed, repository=InMemoryRepository()).run(None, "mail ann"))
    if path.startswith("sweep"):  # of the user's message (a new session) or of the model's step (a fork)
        at = int(path[-1])
        return sweep(first.session_id, at, agent=agent(send_email), repository=repository, monitor=False)
    if path == "fork_session+resume":
        return go(runner.resume(fork_session(first.session_id, 1, repository)))
    if path == "fork_session+query":
        return go(runner.run(fork_session(first.session_id, 1, repository), "mail ann again"))
    raise AssertionError(path)


@pytest.mark.parametrize("path", ["runner.fork", "retry", "replay", "sweep at 1", "sweep at 2",
                                  "fork_session+resume",
                                  "fork_session+query"])
def test_recorded_side_effect_call_is_not_run_again(repo, path):  # noqa: F811
    send_email, sent = mailer()
    first = go(StepRunner(agent(send_email), repository=repo).run(None, "mail ann"))
    assert sent == ["ann@example.org"]
    outcome = reenter(path, repo, send_email, first)
    assert sent == ["ann@example.org"], f"{path} ran the side-effect tool again"
    if not path.startswith("sweep"):
        assert outcome.status is RunStatus.COMPLETED
        tool_step = next(s for s in outcome.steps if s.role.value == "tool")
        assert tool_step.content == "sent to ann@example.org (#1)" and tool_step.extra["replayed"]


def test_resuming_a_retry_re_enters_the_earlier_attempt(repo):  # noqa: F811
    """A retry stopped before it asked for the recorded call (max_steps), then resumed: the resume
    continues the retry, and the earlier attempt's call is answered from the record, as in the retry."""
    send_email, sent = mailer()

    @tool
    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    first = go(StepRunner(agent(send_email), repository=repo).run(None, "mail ann"))
    stopping = Agent(model=ScriptedModel([Reply.call("note", text="first, a note")]), tools=[send_email, note],
                     config=ExecutionConfig(max_steps=1))
    retried = go(StepRunner(stopping, repository=repo).retry(first.run_id))
    assert retried.status is RunStatus.MAX_STEPS and sent == ["ann@example.org"]
    resumed = go(StepRunner(agent(send_email), repository=repo).resume(first.session_id))
    assert resumed.status is RunStatus.COMPLETED and sent == ["ann@example.org"]
    tool_step = next(s for s in resumed.steps if s.role.value == "tool")
    assert tool_step.extra["replayed"]


def test_later_runs_in_a_fork_are_its_own(repo):  # noqa: F811
    """Only the fork's first run re-enters the record: a new request later in the fork runs the tool."""
    send_email, sent = mailer()
    first = go(StepRunner(agent(send_email), repository=repo).run(None, "mail ann"))
    fork = fork_session(first.session_id, 1, repo)
    runner = StepRunner(agent(send_email), repository=repo)
    go(runner.resume(fork))
    go(runner.run(fork, "mail ann once more, please"))
    assert sent == ["ann@example.org", "ann@example.org"]


SETUP = r'''
%load_ext agio_notebook
from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, tool
sent = []

@tool(side_effects=True, on_replay="record")
def send_email(to: str) -> str:
    """Send an email."""
    sent.append(to)
    return f"sent to {to} (#{len(sent)})"

mailer = Agent(model=ScriptedModel([Reply.call("send_email", to="ann@example.org"), "Sent."], loop=True),
               tools=[send_email], name="mailer")
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "side_effects_kernel", SETUP)
    yield k
    k.close()


def test_agio_fork_in_a_real_kernel_does_not_rerun_side_effects(kernel):
    kernel.execute("%%agio mailer\nmail ann")
    assert kernel.value("sent") == ["ann@example.org"]
    kernel.execute("_c = lambda: get_ipython().magics_manager.registry['AgioMagics'].controller\n"
                   "_first = _c().session_id\n"
                   "_forked = %agio fork {_first} --at 1")
    assert kernel.value("_c().session_id != _first")
    kernel.execute("%%agio mailer\nmail ann again")
    assert kernel.value("sent") == ["ann@example.org"]
    assert kernel.value("[s.extra.get('replayed') is not None for s in _c().repository.get_steps(_c().session_id) "
                        "if s.role.value == 'tool']") == [True]
