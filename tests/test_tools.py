"""@tool schemas from signatures and docstrings; ToolExecutor behaviour for every config field it reads."""

from __future__ import annotations

import asyncio
import enum
import time
from typing import Literal, Optional

import pytest

from agio_notebook.core import ExecutionConfig, ToolCall
from agio_notebook.execution import ToolExecutor
from agio_notebook.tools import ToolRegistry, tool


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_schema_covers_types_defaults_and_google_docstrings():
    @tool
    def paint(name: str, count: int, ratio: float, loud: bool, tags: list[str], meta: dict[str, int],
              note: Optional[str] = None, mode: Literal["fast", "slow"] = "fast", color: Color = Color.RED) -> str:
        """Paint things.

        Args:
            name: what to paint.
            count: how many coats.
            mode: how quickly.
        """
        return name

    fn = paint.schema()["function"]
    assert fn["name"] == "paint" and fn["description"] == "Paint things."
    props, required = fn["parameters"]["properties"], fn["parameters"]["required"]
    assert required == ["name", "count", "ratio", "loud", "tags", "meta"]
    assert props["name"] == {"type": "string", "description": "what to paint."}
    assert props["count"]["type"] == "integer" and props["ratio"]["type"] == "number"
    assert props["loud"]["type"] == "boolean"
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["meta"]["type"] == "object" and props["meta"]["additionalProperties"] == {"type": "integer"}
    assert {"type": "null"} in props["note"]["anyOf"] and props["note"]["default"] is None
    assert props["mode"]["enum"] == ["fast", "slow"] and props["mode"]["default"] == "fast"
    assert props["mode"]["description"] == "how quickly."
    assert props["color"]["enum"] == ["red", "blue"] and "$ref" not in str(fn)


def test_numpy_and_rest_docstrings_and_options():
    @tool(name="lookup", timeout=2.0, retries=1, requires_approval=True)
    async def find(query: str, limit: int = 5) -> list[str]:
        """Search notes.

        Parameters
        ----------
        query : str
            words to look for
        limit : int
            at most this many
        """
        return []

    @tool
    def rest(city: str) -> str:
        """Weather.

        :param city: the city name
        """
        return city

    assert find.name == "lookup" and find.is_async and find.timeout == 2.0 and find.requires_approval
    props = find.schema()["function"]["parameters"]["properties"]
    assert props["query"]["description"] == "words to look for" and props["limit"]["default"] == 5
    assert rest.schema()["function"]["parameters"]["properties"]["city"]["description"] == "the city name"
    assert rest("x") == "x"  # still a plain function


def test_unsupported_signatures_fail_at_decoration_and_duplicates_in_registry():
    with pytest.raises(TypeError, match=r"\*args"):
        @tool
        def bad(*args: int) -> int:
            """Nope."""
            return 0

    @tool
    def a() -> int:
        """A."""
        return 1
    with pytest.raises(ValueError, match="unique"):
        ToolRegistry([a, a])


def run_call(tools, name, arguments, config=None):
    ex = ToolExecutor(tools, config or ExecutionConfig())
    return asyncio.run(ex.execute(ToolCall("c1", name, arguments)))


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def test_sync_tool_result_and_coercion():
    r = run_call([add], "add", '{"a": "2", "b": 3}')
    assert (r.status, r.content, r.attempts) == ("ok", "5", 1)


@pytest.mark.parametrize("name, arguments, error_type, text", [
    ("sub", "{}", "unknown_tool", "available: add"),
    ("add", '{"a": 1', "invalid_json", "not valid JSON"),
    ("add", "[1, 2]", "invalid_arguments", "JSON object"),
    ("add", '{"a": 1}', "invalid_arguments", "b: Field required"),
    ("add", '{"a": 1, "b": 2, "c": 3}', "invalid_arguments", "c: Extra inputs"),
])
def test_bad_calls_become_error_results(name, arguments, error_type, text):
    r = run_call([add], name, arguments)
    assert r.status == "error" and r.error_type == error_type and text in r.error
    assert r.content.startswith(f"Error ({error_type})")


def test_exception_and_timeouts_own_and_config():
    @tool
    def boom() -> None:
        """Fails."""
        raise KeyError("missing")

    @tool(timeout=0.1)
    async def slow_own() -> str:
        """Slow."""
        await asyncio.sleep(2)
        return "late"

    @tool
    def slow_sync() -> str:
        """Slow and sync."""
        time.sleep(0.5)
        return "late"

    r = run_call([boom], "boom", "{}")
    assert r.error_type == "exception" and r.error == "KeyError: 'missing'"
    t0 = time.perf_counter()
    assert run_call([slow_own], "slow_own", "{}").error_type == "timeout"
    assert time.perf_counter() - t0 < 1
    r = run_call([slow_sync], "slow_sync", "{}", ExecutionConfig(tool_timeout=0.1))
    assert r.error_type == "timeout" and "0.1s" in r.error


def test_retries_only_when_enabled_and_allowed():
    attempts = []

    @tool(retries=3)
    def flaky() -> str:
        """Fails once."""
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("blip")
        return "ok"

    r = run_call([flaky], "flaky", "{}")
    assert r.status == "ok" and r.attempts == 2
    attempts.clear()
    r = run_call([flaky], "flaky", "{}", ExecutionConfig(enable_retry=False))
    assert r.status == "error" and r.attempts == 1
    attempts.clear()

    @tool
    def not_retryable() -> str:
        """Never retried."""
        attempts.append(1)
        raise ConnectionError("blip")
    assert run_call([not_retryable], "not_retryable", "{}").attempts == 1

    always = []

    @tool(retries=5)
    def always_fails() -> str:
        """Fails always."""
        always.append(1)
        raise ConnectionError("down")
    r = run_call([always_fails], "always_fails", "{}", ExecutionConfig(max_retries=2))
    assert r.attempts == 3 and len(always) == 3


def test_cancelling_a_batch_cancels_running_tools():
    cancelled = []

    @tool
    async def wait() -> str:
        """Waits."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(1)
            raise
        return "never"

    async def main():
        ex = ToolExecutor([wait], ExecutionConfig())

        async def consume():
            return [r async for r in ex.execute_batch([ToolCall("a", "wait", "{}"), ToolCall("b", "wait", "{}")])]
        task = asyncio.create_task(consume())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    asyncio.run(main())
    assert len(cancelled) == 2
