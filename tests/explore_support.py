"""What the explore tests share: a store per test, a weather tool, and running a coroutine."""

from __future__ import annotations

import asyncio

import pytest

from agio_notebook import tool
from agio_notebook.storage import TinyDBRepository


@tool
def weather(city: str) -> str:
    """Weather of a city."""
    return "sunny"


@pytest.fixture
def repo(tmp_path):
    r = TinyDBRepository(tmp_path / "store")
    yield r
    r.close()


def go(coro):
    return asyncio.run(coro)
