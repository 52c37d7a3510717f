"""Explore on every store backend (TinyDB, SQLite, PostgreSQL): scores kept on runs, replay, diff, tree, sweep."""

from __future__ import annotations

import asyncio

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, frames
from agio_notebook.explore import diff, sweep, tree
from agio_notebook.models import ReplayModel
from agio_notebook.scoring import regex
from agio_notebook.storage import InMemoryRepository, new_repository
from explore_support import weather


def test_explore_on_every_backend(store_url):
    repo = new_repository(store_url)
    try:
        model = ScriptedModel([Reply.call("weather", city="Paris"), "Sunny."], name="m", loop=True)
        first = asyncio.run(StepRunner(Agent(model=model, tools=[weather]), repository=repo).run(None, "weather?"))
        result = sweep(first.session_id, at=1, agent=Agent(model=model, tools=[weather]), repeats=2,
                       scorers=[regex("Sunny")], repository=repo, monitor=False, concurrency=1)
        assert result.frame["score_regex"].tolist() == [1.0, 1.0]
        runs = frames.runs(repository=repo)
        assert runs["score_regex"].notna().sum() == 2  # scores kept on the run records
        d = diff(first.run_id, result.frame["run_id"].iloc[0], repository=repo)
        assert d.changed == 0
        retry = asyncio.run(StepRunner(Agent(model=ScriptedModel(["Rainy."]), tools=[weather]),
                                       repository=repo).retry(first.run_id, from_seq=4))
        t = tree(first.session_id, repository=repo)
        assert {n["id"]: n["current"] for n in t.runs} == {first.run_id: False, retry.run_id: True}
        replay = ReplayModel.from_run(first.run_id, repo)
        again = asyncio.run(StepRunner(Agent(model=replay, tools=[weather]), repository=InMemoryRepository()
                                       ).run(None, "weather?"))
        assert again.final_text == "Sunny."
    finally:
        repo.close()
