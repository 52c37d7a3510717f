"""The OpenAI-compatible provider against behaviours of real servers, reproduced on a loopback SSE server.

Each test here stands for one thing seen from llama-cpp-python, Ollama, vLLM or a hung local model:
content null beside tool calls, a stream closed without a finish reason, parallel calls at one index,
hangs and slow streams, a dropped connection, errors with a status, no usage, and request settings.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from agio_notebook import Agent, StepRunner, tool
from agio_notebook.core import ExecutionConfig, RunStatus, StepRole
from agio_notebook.execution.requests import request_of
from agio_notebook import frames
from agio_notebook.models import OpenAIModel
from agio_notebook.models.request import content_fingerprint, request_fingerprint
from agio_notebook.notebook.render import metrics_line
from agio_notebook.storage import InMemoryRepository, open_repository

from openai_sse_server import FakeOpenAIServer, Stream, chunk, text_chunks

KEY = "sk-test-WIRE-0123456789abcdef"
USAGE = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}


@pytest.fixture
def server():
    with FakeOpenAIServer(strict_tool_content=True) as s:
        yield s


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def call_chunk(index: int, call_id: str | None, name: str | None, arguments: str) -> dict:
    entry: dict = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        entry.update(id=call_id, type="function")
    if name is not None:
        entry["function"]["name"] = name
    return chunk({"tool_calls": [entry]})


def run(server, config: ExecutionConfig | None = None, query: str = "hi", repo=None, **agent_kw):
    repo = repo if repo is not None else InMemoryRepository()
    model = OpenAIModel("fake-model", base_url=server.base_url, api_key=KEY, max_retries=2)
    runner = StepRunner(Agent(model=model, tools=[add], **agent_kw), config=config, repository=repo)
    return asyncio.run(runner.run(None, query)), repo


# -- 7: "content": "" beside tool calls -------------------------------------------------------------
def test_tool_round_trip_sends_empty_string_content_not_null(server):
    server.script = [[call_chunk(0, "c1", "add", '{"a": 2, "b": 3}'), chunk({}, finish="tool_calls")],
                     text_chunks("5.", usage=USAGE)]
    result, _ = run(server)
    assert result.status is RunStatus.COMPLETED, result.error  # the strict server answers 500 to null
    sent = server.requests[1]["body"]["messages"][1]
    assert sent["role"] == "assistant" and sent["tool_calls"][0]["id"] == "c1"
    assert sent["content"] == ""
    stored = [s for s in result.steps if s.role is StepRole.ASSISTANT][0]
    assert stored.content is None  # the stored step stays the plain message; the wire rule is the provider's


# -- 8: a stream that ends without a finish reason ----------------------------------------------------
def test_stream_closed_without_finish_reason_fails_clearly(server):
    server.script = [Stream([], done=False)]  # 200, then the stream closes: no chunk, no finish, no [DONE]
    result, repo = run(server)
    assert result.status is RunStatus.FAILED
    assert "stream ended before the model finished" in result.error
    assert [s.role for s in repo.get_steps(result.session_id)] == [StepRole.USER]  # no empty "answer"


def test_stream_cut_after_some_text_keeps_it_on_the_failed_step(server):
    server.script = [Stream([chunk({"content": "Partial "}), chunk({"content": "answer"})], done=False)]
    result, repo = run(server)
    assert result.status is RunStatus.FAILED and "stream ended before the model finished" in result.error
    failed = repo.get_steps(result.session_id)[-1]
    assert failed.role is StepRole.ASSISTANT and failed.status == "error"
    assert failed.content == "Partial answer" and "stream ended" in failed.error


# -- 9: parallel calls streamed at one index with distinct ids (Ollama) ---------------------------------
def test_same_index_with_new_ids_are_separate_calls(server):
    server.script = [[call_chunk(0, "call_x", "add", '{"a":1,"b":1}'),
                      call_chunk(0, "call_y", "add", '{"a":2,"b":2}'),
                      chunk({}, finish="tool_calls")],
                     text_chunks("2 and 4", usage=USAGE)]
    result, _ = run(server)
    assert result.status is RunStatus.COMPLETED, result.error
    calls = [s for s in result.steps if s.role is StepRole.ASSISTANT][0].tool_calls
    assert [(c.id, json.loads(c.arguments)) for c in calls] == [("call_x", {"a": 1, "b": 1}),
                                                              ("call_y", {"a": 2, "b": 2})]
    tools = [s for s in result.steps if s.role is StepRole.TOOL]
    assert [(t.tool_call_id, t.content) for t in tools] == [("call_x", "2"), ("call_y", "4")]


def test_streamed_tool_call_deltas_number_calls_by_position(server):
    server.script = [[call_chunk(0, "call_x", "add", '{"a":1,'), call_chunk(0, None, None, '"b":1}'),
                      call_chunk(0, "call_y", "add", '{"a":2,"b":2}'), chunk({}, finish="tool_calls")],
                     text_chunks("ok", usage=USAGE)]
    model = OpenAIModel("fake-model", base_url=server.base_url, api_key=KEY)
    runner = StepRunner(Agent(model=model, tools=[add]), repository=InMemoryRepository())

    async def go():
        return [e async for e in runner.run_stream(None, "hi")]
    deltas = [e.payload["tool_call"] for e in asyncio.run(go()) if "tool_call" in e.payload]
    assert [(d["index"], d["id"]) for d in deltas] == [(0, "call_x"), (0, None), (1, "call_y")]


# -- 10: time limits, partial text, lost connections, status once, unknown usage -------------------
def test_a_hang_before_the_first_token_is_reported_once_not_retried(server):
    server.script = [Stream(text_chunks("late"), first_delay=60)] * 3
    config = ExecutionConfig(first_token_timeout=1.0, enable_retry=True, max_retries=2)
    t0 = time.monotonic()
    result, repo = run(server, config)
    elapsed = time.monotonic() - t0
    assert result.status is RunStatus.FAILED
    assert result.error == "model 'fake-model' sent nothing within first_token_timeout=1s"
    assert len(server.requests) == 1  # not three times the limit
    assert elapsed < 20
    assert [s.role for s in repo.get_steps(result.session_id)] == [StepRole.USER]


def test_a_slow_stream_that_keeps_going_is_not_cut_off(server):
    pieces = [chunk({"content": f"w{i} "}) for i in range(8)] + [chunk({}, finish="stop")]
    server.script = [Stream(pieces, gap=0.5)]  # ~4 s in all, longer than either limit, never 0.5 s silent
    config = ExecutionConfig(first_token_timeout=2.5, idle_timeout=2.5)
    result, _ = run(server, config)
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.final_text == "w0 w1 w2 w3 w4 w5 w6 w7 "
    assert result.steps[-1].metrics.model_ms > 3000


def test_silence_mid_stream_hits_idle_timeout_and_keeps_the_partial_text(server):
    pieces = [chunk({"content": "Hello, "}), chunk({"content": "wor"}), chunk({"content": "ld"}),
              chunk({}, finish="stop")]
    server.script = [Stream(pieces, stall_after=2, stall=60)] * 3
    config = ExecutionConfig(first_token_timeout=5.0, idle_timeout=1.0, enable_retry=True)
    result, repo = run(server, config)
    assert result.status is RunStatus.FAILED
    assert result.error == "model 'fake-model' stopped streaming: no chunk for idle_timeout=1s"
    assert len(server.requests) == 1
    failed = repo.get_steps(result.session_id)[-1]
    assert (failed.role, failed.status, failed.content) == (StepRole.ASSISTANT, "error", "Hello, wor")
    assert failed.error == result.error


def test_overall_cap_stops_a_long_stream_and_keeps_its_text(server):
    pieces = [chunk({"content": f"w{i} "}) for i in range(40)] + [chunk({}, finish="stop")]
    server.script = [Stream(pieces, gap=0.1)]  # ~4 s, steady
    config = ExecutionConfig(first_token_timeout=5.0, idle_timeout=5.0, timeout_per_step=1.5)
    result, repo = run(server, config)
    assert result.status is RunStatus.FAILED and result.error == "model call exceeded timeout_per_step=1.5s"
    failed = repo.get_steps(result.session_id)[-1]
    assert failed.status == "error" and failed.content.startswith("w0 w1 ") and len(failed.content) < 160


def test_connection_lost_mid_stream_is_reported_as_such(server):
    pieces = [chunk({"content": "Half "}), chunk({"content": "an "}), chunk({"content": "answer"}),
              chunk({}, finish="stop")]
    server.script = [Stream(pieces, cut_after=2)]
    result, repo = run(server)
    assert result.status is RunStatus.FAILED
    assert result.error.startswith(f"connection to OpenAI-compatible endpoint {server.base_url} lost mid-stream")
    assert "cannot reach" not in result.error
    assert repo.get_steps(result.session_id)[-1].content == "Half an "


def test_an_error_states_its_http_status_once(server):
    server.script = [(429, {"error": {"message": "slow down"}})] * 3
    result, _ = run(server)
    assert result.error == (f"OpenAI-compatible endpoint {server.base_url} returned HTTP 429 "
                            "(after 2 retries): slow down")
    assert len(server.requests) == 3  # the client's own retries, not multiplied by the engine


def test_no_usage_from_the_server_is_unknown_not_zero(server):
    server.script = [text_chunks("no usage here")]  # the server ignores include_usage
    result, repo = run(server)
    assert result.status is RunStatus.COMPLETED
    step = result.steps[-1]
    assert (step.metrics.prompt_tokens, step.metrics.total_tokens) == (None, None)
    assert result.metrics.total_tokens is None and result.metrics.prompt_tokens is None
    frame = frames.steps(repository=repo)
    assert frame["total_tokens"].isna().all()
    assert frames.runs(repository=repo)["total_tokens"].isna().all()
    assert "tokens unknown" in metrics_line(step.metrics.to_dict())
    assert "tokens unknown" in metrics_line(result.metrics.to_dict(), run=True)
    assert "0 tokens" not in metrics_line(result.metrics.to_dict(), run=True)


# -- 11: settings per agent and per run, and the exact request stored ---------------------------------
def test_settings_per_agent_and_per_run_reach_the_server(server):
    server.script = [text_chunks("ok", usage=USAGE)]
    agent_settings = {"temperature": 0.7, "max_tokens": 64, "tool_choice": "auto",
                      "extra_body": {"top_k": 5, "cache_prompt": True}}
    config = ExecutionConfig(model_settings={"temperature": 0, "extra_body": {"top_k": 1}})
    model = OpenAIModel("fake-model", base_url=server.base_url, api_key=KEY, settings={"seed": 3, "top_p": 0.9},
                        extra_body={"min_p": 0.1})  # the model's own defaults, under both
    runner = StepRunner(Agent(model=model, model_settings=agent_settings), config=config,
                        repository=InMemoryRepository())
    result = asyncio.run(runner.run(None, "hi"))
    assert result.status is RunStatus.COMPLETED, result.error
    body = server.requests[0]["body"]
    assert body["temperature"] == 0 and body["max_tokens"] == 64 and body["tool_choice"] == "auto"
    assert body["top_k"] == 1 and body["cache_prompt"] is True  # extra_body merged one level deep
    assert body["seed"] == 3 and body["top_p"] == 0.9 and body["min_p"] == 0.1
    request = result.steps[-1].extra["request"]  # the effective settings, exactly what was sent
    assert request["settings"] == {"seed": 3, "top_p": 0.9, "temperature": 0, "max_tokens": 64,
                                   "tool_choice": "auto", "extra_body": {"min_p": 0.1, "top_k": 1,
                                                                          "cache_prompt": True}}


def test_unknown_setting_is_one_clear_error():
    from agio_notebook.models.settings import SettingsError
    with pytest.raises(SettingsError, match="unknown setting.*'temprature'.*extra_body"):
        Agent(model_settings={"temprature": 0})


@pytest.mark.parametrize("store", ["memory", "tinydb", "sqlite"])
def test_every_model_call_stores_its_exact_request_without_the_key(server, store, tmp_path):
    server.script = [[call_chunk(0, "c1", "add", '{"a": 2, "b": 3}'), chunk({}, finish="tool_calls")],
                     text_chunks("5.", usage=USAGE)]
    repo = {"memory": InMemoryRepository, "tinydb": lambda: open_repository(tmp_path / "store"),
            "sqlite": lambda: open_repository(f"sqlite:///{tmp_path / 'agio.db'}")}[store]()
    result, repo = run(server, ExecutionConfig(model_settings={"seed": 7}), repo=repo, system_prompt="Be brief.")
    assert result.status is RunStatus.COMPLETED, result.error
    assistants = [s for s in repo.get_steps(result.session_id) if s.role is StepRole.ASSISTANT]
    assert len(assistants) == len(server.requests) == 2
    for step, sent in zip(assistants, server.requests):
        request = request_of(repo, step)
        wire = OpenAIModel("fake-model", base_url=server.base_url, api_key="x").body(
            request["messages"], request["tools"], request["settings"], request["stream"])
        body = dict(sent["body"])
        assert {k: body[k] for k in wire} == wire  # the stored request replays to the same wire body
        assert request["model"] == "fake-model" and request["tools"][0]["function"]["name"] == "add"
        assert request_fingerprint(request) == step.extra["request"]["fingerprint"]
        assert content_fingerprint(request) == step.extra["request"]["content"]
        assert content_fingerprint({**request, "settings": {"seed": 99}}) == step.extra["request"]["content"]
        assert KEY not in json.dumps(step.to_dict())
    first, second = (request_of(repo, s) for s in assistants)
    assert first["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert len(second["messages"]) == 4 and request_fingerprint(first) != request_fingerprint(second)
    # stable: key order does not change the fingerprint; any change of content does
    shuffled = json.loads(json.dumps(first, sort_keys=True))
    assert request_fingerprint(shuffled) == request_fingerprint(first)
    first["settings"]["seed"] = 8
    assert request_fingerprint(first) != step.extra["request"]["fingerprint"]


def test_request_of_a_superseded_attempt_is_still_exact(server):
    server.script = [text_chunks("first try", usage=USAGE), text_chunks("second try", usage=USAGE)]
    repo = InMemoryRepository()
    model = OpenAIModel("fake-model", base_url=server.base_url, api_key=KEY)
    runner = StepRunner(Agent(model=model), repository=repo)
    first = asyncio.run(runner.run(None, "hi"))
    second = asyncio.run(runner.retry(first.run_id))
    steps = repo.get_steps(first.session_id, include_superseded=True)
    old, new = [s for s in steps if s.role is StepRole.ASSISTANT]
    assert old.superseded and not new.superseded
    assert request_of(repo, old)["messages"] == request_of(repo, new)["messages"] == [
        {"role": "user", "content": "hi"}]
    assert old.extra["request"]["fingerprint"] == new.extra["request"]["fingerprint"]
    assert second.final_text == "second try"


@pytest.mark.parametrize("field", ["first_token_timeout", "idle_timeout", "timeout_per_step"])
def test_time_limits_are_positive_or_none(field):
    with pytest.raises(ValueError, match=field):
        ExecutionConfig(**{field: 0})
    assert getattr(ExecutionConfig(**{field: None}), field) is None
    defaults = ExecutionConfig()
    assert (defaults.first_token_timeout, defaults.idle_timeout, defaults.timeout_per_step) == (120.0, 60.0, None)


def test_an_error_event_inside_the_stream_is_the_servers_message_not_a_lost_connection(server):
    server.script = [[chunk({"content": "Start "}), {"error": {"message": "model crashed: out of memory"}}]]
    result, repo = run(server)
    assert result.status is RunStatus.FAILED
    assert result.error == f"OpenAI-compatible endpoint {server.base_url} sent an error: model crashed: out of memory"
    assert repo.get_steps(result.session_id)[-1].content == "Start "
