"""Side-effect tools during replay, retry and fork; reuse of recorded answers keyed by the exact request."""

from __future__ import annotations

import pytest

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, frames, tool
from agio_notebook.core import RunStatus, StepEventType as E
from agio_notebook.execution import ApprovalDecision
from agio_notebook.models import ReplayModel
from agio_notebook.storage import InMemoryRepository
from explore_support import go, repo


def mailer(policy):
    sent = []

    @tool(side_effects=True, on_replay=policy)
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to} (#{len(sent)})"

    return send_email, sent


def script():
    return [Reply.call("send_email", to="ann@example.org"), "Sent."]


@pytest.mark.parametrize("policy", ["record", "block", "confirm"])
def test_retry_applies_side_effect_policy(repo, policy):
    send_email, sent = mailer(policy)
    runner = StepRunner(Agent(model=ScriptedModel(script()), tools=[send_email]), repository=repo)
    first = go(runner.run(None, "mail ann"))
    assert sent == ["ann@example.org"]
    decisions = []

    async def approver(request):
        decisions.append(request.name)
        return ApprovalDecision(False, reason="not twice")

    # the retry's model asks for the very same call again
    retry_runner = StepRunner(Agent(model=ScriptedModel(script()), tools=[send_email]), repository=repo,
                              approver=approver)
    second = go(retry_runner.retry(first.run_id))
    assert second.status is RunStatus.COMPLETED
    tool_step = next(s for s in second.steps if s.role.value == "tool")
    assert sent == ["ann@example.org"]  # never executed a second time, whatever the policy
    if policy == "record":
        assert tool_step.content == "sent to ann@example.org (#1)" and tool_step.status == "ok"
        assert tool_step.extra["replayed"]
        done = next(e for e in second.events if e.type is E.TOOL_CALL_COMPLETED)
        assert done.payload["replayed"] is True
    elif policy == "block":
        assert tool_step.status == "error" and "has side effects" in tool_step.error
    else:
        assert decisions == ["send_email"] and tool_step.status == "rejected"


def test_confirm_approved_runs_again(repo):
    send_email, sent = mailer("confirm")
    go(StepRunner(Agent(model=ScriptedModel(script()), tools=[send_email]), repository=repo).run("s", "mail"))
    run_id = repo.list_runs("s")[0].id

    async def approver(request):
        return ApprovalDecision(True)

    go(StepRunner(Agent(model=ScriptedModel(script()), tools=[send_email]), repository=repo,
                  approver=approver).retry(run_id))
    assert sent == ["ann@example.org", "ann@example.org"]


def test_new_arguments_run_normally(repo):
    send_email, sent = mailer("record")
    first = go(StepRunner(Agent(model=ScriptedModel(script()), tools=[send_email]), repository=repo).run(None, "m"))
    other = ScriptedModel([Reply.call("send_email", to="bob@example.org"), "Sent."])
    go(StepRunner(Agent(model=other, tools=[send_email]), repository=repo).retry(first.run_id))
    assert sent == ["ann@example.org", "bob@example.org"]


def test_replay_model_replays_side_effects_from_record(repo):
    send_email, sent = mailer("record")
    first = go(StepRunner(Agent(model=ScriptedModel(script()), tools=[send_email]), repository=repo).run(None, "m"))
    replay = ReplayModel.from_run(first.run_id, repo)
    again = go(StepRunner(Agent(model=replay, tools=[send_email]), repository=InMemoryRepository()).run(None, "m"))
    assert again.final_text == "Sent." and sent == ["ann@example.org"]


def test_fork_applies_policy_and_reuses(repo):
    send_email, sent = mailer("record")
    model = ScriptedModel(script())
    first = go(StepRunner(Agent(model=model, tools=[send_email]), repository=repo).run(None, "mail ann"))
    # fork right after the user's message: the same requests come again and are answered from the record
    fresh = ScriptedModel(["should not be asked"])
    forked = go(StepRunner(Agent(model=fresh, tools=[send_email], name="agent"), repository=repo,
                           ).fork(first.session_id, 1, reuse=True))
    assert forked.status is RunStatus.COMPLETED and forked.final_text == "Sent."
    assert fresh.calls == [] and sent == ["ann@example.org"]
    assert forked.metrics.reused_calls == 2
    assert forked.metrics.reused_tokens == first.metrics.total_tokens
    assert forked.metrics.total_tokens == 0 and forked.metrics.cost == 0.0


def test_retry_reuse_is_keyed_by_request_not_position(repo):
    model = ScriptedModel(["one", "two"])
    runner = StepRunner(Agent(model=model, name="a"), repository=repo)
    go(runner.run("s", "first question"))
    second = go(runner.run("s", "second question"))
    # retrying the second run: its request equals the recorded one -> answered from the record
    counting = ScriptedModel(["fresh answer"], name="scripted")
    retried = go(StepRunner(Agent(model=counting, name="a"), repository=repo).retry(second.run_id, reuse=True))
    assert retried.final_text == "two" and counting.calls == []
    assert retried.metrics.reused_calls == 1 and retried.metrics.reused_tokens == second.metrics.total_tokens
    # same position, different request (a system prompt now): the model is asked
    prompted = Agent(model=counting, name="a", system_prompt="Be brief.")
    retried_again = go(StepRunner(prompted, repository=repo).retry(retried.run_id, reuse=True))
    assert retried_again.final_text == "fresh answer" and len(counting.calls) == 1
    rm = frames.run_metrics("s", repository=repo)
    assert rm.loc[retried.run_id, "reused_calls"] == 1 and rm.loc[retried_again.run_id, "reused_calls"] == 0


def test_reuse_off_or_other_settings_call_the_model(repo):
    first = go(StepRunner(Agent(model=ScriptedModel(["one"])), repository=repo).run("s", "q"))
    live = ScriptedModel(["live"])
    again = go(StepRunner(Agent(model=live), repository=repo).retry(first.run_id))
    assert again.final_text == "live"
    other = ScriptedModel(["other model"], name="another")  # different settings (model name): no reuse
    assert go(StepRunner(Agent(model=other), repository=repo).retry(again.run_id, reuse=True)).final_text == "other model"


def test_bad_on_replay_is_one_line():
    with pytest.raises(ValueError, match="on_replay must be one of record, confirm, block, got 'maybe'"):
        tool(side_effects=True, on_replay="maybe")


def test_live_view_marks_replayed_calls_and_shows_cost(repo):
    from agio_notebook.notebook.render import card_html, footer_html
    from agio_notebook.notebook.view_model import fold

    send_email, sent = mailer("record")
    first = go(StepRunner(Agent(model=ScriptedModel(script()), tools=[send_email]), repository=repo).run(None, "m"))
    second = go(StepRunner(Agent(model=ScriptedModel(script()), tools=[send_email]), repository=repo
                           ).retry(first.run_id))
    view = fold(second.events)
    card = view.steps[0].tool_cards[0]
    assert card.replayed and 'class="agio-replayed"' in card_html(card)
    first_card = fold(first.events).steps[1].tool_cards[0]
    assert not first_card.replayed and "agio-replayed" not in card_html(first_card)
    assert "cost unknown" in footer_html(view)  # a scripted model has no price: unknown, never $0
