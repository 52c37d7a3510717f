"""OpenAIModel through the real `openai` client against a real SSE server on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest

from agio_notebook import Agent, StepRunner, tool
from agio_notebook.core import ModelError, StepEventType as E
from agio_notebook.models import Finish, OpenAIModel, TextDelta, ToolCallDelta, Usage
from agio_notebook.storage import InMemoryRepository

from openai_sse_server import FakeOpenAIServer, chunk, text_chunks

KEY = "sk-test-SECRET-1234567890"


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


def model_for(server, **kw):
    return OpenAIModel("fake-model", base_url=server.base_url, api_key=KEY, **kw)


def collect(model, messages=None, tools=(), stream=True):
    async def go():
        return [c async for c in model.stream(messages or [{"role": "user", "content": "hi"}], list(tools),
                                              stream=stream)]
    return asyncio.run(go())


def test_text_streaming_with_usage_and_request_shape(server):
    server.script = [text_chunks("Hel", "lo", usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9})]
    chunks = collect(model_for(server))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["Hel", "lo"]
    assert Usage(7, 2, 9) in chunks and Finish("stop") in chunks
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["body"]["stream"] is True and req["body"]["stream_options"] == {"include_usage": True}
    assert req["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert req["headers"]["authorization"] == f"Bearer {KEY}"


def test_split_and_parallel_tool_call_deltas(server):
    server.script = [[
        chunk({"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_a", "type": "function", "function": {"name": "add", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1,'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                               "function": {"name": "mul", "arguments": '{"a": 2'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "b": 2}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": ', "b": 3}'}}]}),
        chunk({}, finish="tool_calls"),
    ]]
    deltas = [c for c in collect(model_for(server)) if isinstance(c, ToolCallDelta)]
    assert [(d.index, d.id, d.name) for d in deltas][:1] == [(0, "call_a", "add")]
    joined: dict[int, str] = {}
    for d in deltas:
        joined[d.index] = joined.get(d.index, "") + d.arguments
    assert joined == {0: '{"a": 1, "b": 2}', 1: '{"a": 2, "b": 3}'}


def test_full_agent_loop_over_the_wire(server):
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    server.script = [
        [chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                "function": {"name": "add", "arguments": '{"a": 2, '}}]}),
         chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"b": 3}'}}]}),
         chunk({}, finish="tool_calls"),
         chunk(usage={"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}, choices=False)],
        text_chunks("It is ", "5.", usage={"prompt_tokens": 30, "completion_tokens": 3, "total_tokens": 33}),
    ]
    runner = StepRunner(Agent(model=model_for(server), tools=[add]), repository=InMemoryRepository())
    result = asyncio.run(runner.run(None, "2+3?"))
    assert result.final_text == "It is 5." and result.metrics.total_tokens == 58
    second = server.requests[1]["body"]
    assert second["tools"][0]["function"]["name"] == "add"
    assert second["messages"][-1] == {"role": "tool", "content": "5", "tool_call_id": "c1", "name": "add"}


def test_429_is_retried_then_succeeds(server):
    server.script = [(429, {"error": {"message": "slow down"}}), text_chunks("ok")]
    chunks = collect(model_for(server, max_retries=2))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["ok"]
    assert len(server.requests) == 2


def test_500_until_failure_is_one_clear_line_without_the_key(server):
    server.script = [(500, {"error": {"message": "upstream exploded"}})] * 3
    runner = StepRunner(Agent(model=model_for(server, max_retries=2)), repository=InMemoryRepository())

    async def go():
        return [e async for e in runner.run_stream(None, "hi")]
    events = asyncio.run(go())
    assert len(server.requests) == 3  # 1 + max_retries
    final = events[-1]
    assert final.type is E.RUN_FAILED
    error = final.payload["run"]["error"]
    # the status is stated once, the server's own message follows, no client boilerplate
    assert error == f"OpenAI-compatible endpoint {server.base_url} returned HTTP 500 (after 2 retries): upstream exploded"
    assert error.split(server.base_url)[1].count("500") == 1 and "Error code" not in error and KEY not in error
    with pytest.raises(ModelError) as info:
        server.script = [(500, {"error": {"message": "x"}})] * 3
        collect(model_for(server, max_retries=2))
    assert KEY not in str(info.value) and "after 2 retries" in str(info.value)


def test_non_streaming_mode(server):
    server.script = [{"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model",
                      "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": "whole"}}],
                      "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}]
    chunks = collect(model_for(server), stream=False)
    assert chunks == [TextDelta("whole"), Usage(3, 1, 4), Finish("stop")]
    assert not server.requests[0]["body"].get("stream")


def test_key_never_in_repr_and_env_configuration(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    model = OpenAIModel("fake-model")
    assert KEY not in repr(model) and server.base_url in repr(model)
    server.script = [text_chunks("env ok")]
    assert [c.text for c in collect(model) if isinstance(c, TextDelta)] == ["env ok"]
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"


def test_connection_refused_is_a_clear_error():
    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key=KEY, max_retries=0)
    with pytest.raises(ModelError, match="cannot reach OpenAI-compatible endpoint http://127.0.0.1:9/v1"):
        collect(model)


def test_default_model_is_offline_without_configuration(monkeypatch):
    from agio_notebook.models import default_model
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL"):
        monkeypatch.delenv(var, raising=False)
    assert default_model().name == "offline"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert isinstance(default_model(), OpenAIModel)


def test_a_timeout_says_how_long_and_how_many_times():
    import httpx
    import openai

    timed_out = openai.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
    for timeout, retries, says in ((2.5, 2, "(timeout=2.5 s, tried 3 times)"), (30, 0, "(timeout=30 s)")):
        model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", api_key="sk-test-000000000", timeout=timeout,
                            max_retries=retries)
        assert str(model._error(timed_out)) == f"OpenAI-compatible endpoint http://127.0.0.1:9/v1 timed out {says}"


def test_a_structured_output_refusal_is_what_the_model_said(server):
    """OpenAI's structured output refuses in ``refusal``, not ``content``: it is the reply's text (kept, shown,
    read back by a typed agent as not its JSON), never an "empty reply" asked for a second time."""
    said = "I'm sorry, I can't help with that."
    server.script = [[chunk({"role": "assistant", "content": None, "refusal": ""}), chunk({"refusal": said}),
                      chunk({}, finish="stop")],
                     {"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model",
                      "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": None, "refusal": said}}]}]
    assert [c.text for c in collect(model_for(server)) if isinstance(c, TextDelta)] == [said]
    assert [c.text for c in collect(model_for(server), stream=False) if isinstance(c, TextDelta)] == [said]
    assert len(server.requests) == 2  # one each: neither was asked again
