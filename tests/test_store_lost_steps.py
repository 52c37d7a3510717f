"""Steps lost from a session (a file cut in the middle, rows deleted, an old copy restored) are reported on
every read of that session, on every backend, not only on the read that first met the damage."""

from __future__ import annotations

import warnings

import pytest

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, frames, tool
from agio_notebook.storage import StoreDamageWarning, open_repository
from agio_notebook.storage.damage import lost_steps


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _two_runs(repo) -> str:
    model = ScriptedModel([Reply.call("add", a=1, b=2), "three", Reply.call("add", a=3, b=4), "seven"])
    runner = StepRunner(Agent(model=model, tools=[add]), repository=repo)
    runner.run_sync("hurt", "first")
    runner.run_sync("hurt", "second")
    return "hurt"


def _lose_half(store_url: str, repo, session_id: str) -> None:
    """Take away the second run's steps behind the store's back, as a cut file or a restored backup would."""
    steps = repo.get_steps(session_id)
    second_run = steps[-1].run_id
    if store_url.startswith(("sqlite", "postgresql")):
        repo._write([("DELETE FROM agio_steps WHERE run_id = ?", (second_run,))])
        return
    path = repo.session_file(session_id)
    lines = path.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if second_run.encode() not in line or b'"t":"runs"' in line]
    # cut in the middle of the file: the second run's step lines go, a torn half line is left at the end
    path.write_bytes(b"".join(kept) + lines[-1][: len(lines[-1]) // 2])


def _reads(repo, session_id):
    yield lambda: repo.get_steps(session_id)
    yield lambda: list(repo.iter_step_dicts(session_id))
    yield lambda: repo.get_last_step(session_id)
    yield lambda: frames.steps(session_id, repository=repo)


def test_lost_steps_are_reported_on_every_read(store_url):
    repo = open_repository(store_url)
    try:
        session_id = _two_runs(repo)
        with warnings.catch_warnings():
            warnings.simplefilter("error", StoreDamageWarning)
            assert len(repo.get_steps(session_id)) == 8  # healthy: silent
        _lose_half(store_url, repo, session_id)
        reopened = open_repository(store_url)
        for _ in range(3):  # again and again: the loss is never forgotten
            for read in _reads(reopened, session_id):
                with pytest.warns(StoreDamageWarning, match=r"session hurt has lost 4 committed steps"):
                    read()
        # what survives is still read
        assert [s.content for s in reopened.get_steps(session_id)][:2] == ["first", None]
        assert any("has lost 4 committed steps" in str(d) for d in reopened.verify())
        # a repair records the loss: reads and verify are quiet again, until more is lost
        repaired = reopened.repair()
        assert any("has lost 4" in d.what for r in repaired for d in r.damage)
        with warnings.catch_warnings():
            warnings.simplefilter("error", StoreDamageWarning)
            for read in _reads(reopened, session_id):
                read()
            assert reopened.verify() == []
        reopened.close()
    finally:
        repo.close()


def test_a_run_counted_twice_holds_its_larger_count_and_replaced_runs_are_left_out():
    runs = [{"id": "a", "metrics": {"steps": 2}}, {"id": "a", "metrics": {"steps": 4}},
            {"id": "b", "metrics": {"steps": 3}, "superseded_by": "c"}]
    assert lost_steps("f", "s", runs, {"a": 4, "b": 0}) is None
    damage = lost_steps("f", "s", runs, {"a": 1})
    assert damage is not None and "lost 3 committed steps (run a committed 4, 1 left)" in str(damage)
