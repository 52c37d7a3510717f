"""Pytest fixtures: a recorded session becomes an offline regression test.

In a ``conftest.py``: ``from agio_notebook.testing import agio_cassette, agio_store``. Then::

    @pytest.mark.agio_cassette("tests/cassettes/weather.json")
    async def test_weather(agio_cassette, agio_store):
        runner = StepRunner(Agent(model=agio_cassette, tools=[weather]), repository=agio_store)
        result = await runner.run(None, "Weather in Paris?")
        assert "sunny" in result.final_text

The replay fails with one line naming the first differing message if the agent's prompts, tools or
the conversation drift from the recording.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from .models.replay import ReplayModel
from .storage import InMemoryRepository


@pytest.fixture
def agio_cassette(request: Any) -> ReplayModel:
    """The ReplayModel of the cassette named by ``@pytest.mark.agio_cassette(path, strict=True)``;
    a relative path is relative to the test file."""
    marker = request.node.get_closest_marker("agio_cassette")
    if marker is None or not marker.args:
        raise pytest.UsageError("agio_cassette needs @pytest.mark.agio_cassette('path/to/cassette.json')")
    path = Path(marker.args[0])
    if not path.is_absolute():
        path = Path(request.node.fspath).parent / path
    return ReplayModel.from_cassette(path, strict=marker.kwargs.get("strict", True))


@pytest.fixture
def agio_store() -> Iterator[InMemoryRepository]:
    """A throwaway in-memory store, so a replayed test writes nothing to disk."""
    repo = InMemoryRepository()
    yield repo
    repo.close()


def pytest_configure(config: Any) -> None:
    """Loaded as a plugin (``pytest_plugins = ["agio_notebook.testing"]``): declare the marker."""
    config.addinivalue_line("markers", "agio_cassette(path, strict=True): the cassette agio_cassette replays")
