"""The provider against LiteLLM's proxy: a real third-party OpenAI-compatible server on 127.0.0.1, offline."""

from __future__ import annotations

import asyncio
import json
import time

import pydantic
import pytest

from agio_notebook import Agent, StepRunner, tool
from agio_notebook.core import ExecutionConfig, RunStatus, StepEventType as E, StepRole
from agio_notebook.execution.requests import request_of
from agio_notebook.models import OpenAIModel
from agio_notebook.models.request import request_fingerprint
from agio_notebook.models.settings import merge_settings
from agio_notebook.storage import InMemoryRepository

from litellm_proxy import MASTER_KEY, MODEL, LiteLLMProxy, ROOT


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    p = LiteLLMProxy(tmp_path_factory.mktemp("litellm")).start()
    yield p
    p.stop()


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class PerTurn(OpenAIModel):
    """The real provider; each call adds that turn's LiteLLM mock parameters to ``extra_body``."""

    def __init__(self, proxy: LiteLLMProxy, turns: list[dict], **kw):
        super().__init__(MODEL, base_url=proxy.base_url, api_key=MASTER_KEY, **kw)
        self.turns = turns
        self.sent: list[dict] = []

    async def stream(self, messages, tools, *, stream=True, settings=None):
        settings = merge_settings(settings, {"extra_body": self.turns[len(self.sent)]})
        self.sent.append(self.body(messages, tools, settings, stream))
        async for c in super().stream(messages, tools, stream=stream, settings=settings):
            yield c


def run(agent: Agent, config: ExecutionConfig | None = None, query: str = "hi"):
    repo = InMemoryRepository()
    runner = StepRunner(agent, config=config, repository=repo)

    async def go():
        return [e async for e in runner.run_stream(None, query)]
    events = asyncio.run(go())
    run_dict = events[-1].payload["run"]
    return run_dict, events, repo


def test_text_streams_with_usage_and_the_agents_settings(proxy):
    model = OpenAIModel(MODEL, base_url=proxy.base_url, api_key=MASTER_KEY)
    agent = Agent(model=model, model_settings={"temperature": 0, "max_tokens": 40,
                                               "extra_body": {"mock_response": "Hello from the LiteLLM proxy."}})
    run_dict, events, repo = run(agent)
    assert run_dict["status"] == "completed", run_dict["error"]
    assert run_dict["final_text"] == "Hello from the LiteLLM proxy."
    assert len([e for e in events if e.type is E.STEP_DELTA]) > 1  # it really streamed
    assert run_dict["metrics"]["total_tokens"] and run_dict["metrics"]["total_tokens"] > 0
    step = repo.get_steps(run_dict["session_id"])[-1]
    request = request_of(repo, step)
    assert request["settings"]["extra_body"] == {"mock_response": "Hello from the LiteLLM proxy."}
    assert request_fingerprint(request) == step.extra["request"]["fingerprint"]
    assert MASTER_KEY not in json.dumps(step.to_dict())


def test_tool_round_trip_through_the_proxy(proxy):
    call = {"id": "call_ll_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    model = PerTurn(proxy, [{"mock_response": "", "mock_tool_calls": [call]}, {"mock_response": "2 + 3 = 5."}])
    run_dict, _, repo = run(Agent(model=model, tools=[add]), ExecutionConfig(stream=False))
    assert run_dict["status"] == "completed", run_dict["error"]
    steps = repo.get_steps(run_dict["session_id"])
    assert [s.role for s in steps] == [StepRole.USER, StepRole.ASSISTANT, StepRole.TOOL, StepRole.ASSISTANT]
    assert steps[1].tool_calls[0].id == "call_ll_1" and steps[2].content == "5"
    assert run_dict["final_text"] == "2 + 3 = 5."
    replayed = model.sent[1]["messages"][1]
    assert replayed["role"] == "assistant" and replayed["tool_calls"][0]["id"] == "call_ll_1"
    assert isinstance(replayed["content"], str)  # never null beside tool calls


class Quote(pydantic.BaseModel):
    item: str
    price: float


@pytest.mark.parametrize("stream", [True, False])
def test_a_native_typed_answer_through_the_proxy(proxy, stream):
    """``output_mode="native"``: the request carries the type's schema as its ``response_format`` (no tool),
    a reply that is not that JSON goes back with the reason, and the one that is becomes the typed answer."""
    model = PerTurn(proxy, [{"mock_response": "Tea is 3.5."}, {"mock_response": '{"item": "tea", "price": 3.5}'}])
    agent = Agent(model=model, output_type=Quote, output_mode="native")
    runner = StepRunner(agent, config=ExecutionConfig(stream=stream), repository=InMemoryRepository())
    result = runner.run_sync(None, "How much is tea?")
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == Quote(item="tea", price=3.5)
    for body in model.sent:
        assert "tools" not in body and body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["schema"]["required"] == ["item", "price"]
    assert model.sent[1]["messages"][-1]["content"].startswith("the answer must be the JSON of Quote")


def test_rate_limit_error_states_its_status_once(proxy):
    model = OpenAIModel(MODEL, base_url=proxy.base_url, api_key=MASTER_KEY, max_retries=0,
                        settings={"extra_body": {"mock_response": "litellm.RateLimitError"}})
    run_dict, _, _ = run(Agent(model=model))
    assert run_dict["status"] == "failed"
    error = run_dict["error"]
    assert error.startswith(f"OpenAI-compatible endpoint {proxy.base_url} returned HTTP 429: ")
    assert "mock rate limit" in error and error.split(proxy.base_url)[1].count("429") == 1
    assert "Error code" not in error and "\n" not in error


def test_a_delayed_first_token_fails_once_at_first_token_timeout(proxy):
    model = OpenAIModel(MODEL, base_url=proxy.base_url, api_key=MASTER_KEY,
                        settings={"extra_body": {"mock_response": "too late", "mock_delay": 30}})
    config = ExecutionConfig(first_token_timeout=1.5, enable_retry=True, max_retries=2)
    t0 = time.monotonic()
    run_dict, _, repo = run(Agent(model=model), config)
    assert run_dict["status"] == "failed"
    assert run_dict["error"] == f"model '{MODEL}' sent nothing within first_token_timeout=1.5s"
    assert time.monotonic() - t0 < 15  # once, not three times
    assert [s.role for s in repo.get_steps(run_dict["session_id"])] == [StepRole.USER]


def test_a_wrong_key_fails_clearly_without_the_key(proxy):
    wrong = "sk-wrong-key-for-the-proxy-0123456789"
    model = OpenAIModel(MODEL, base_url=proxy.base_url, api_key=wrong, max_retries=0,
                        settings={"extra_body": {"mock_response": "never"}})
    run_dict, events, _ = run(Agent(model=model))
    assert run_dict["status"] == "failed"
    assert "returned HTTP 4" in run_dict["error"]
    text = json.dumps([e.to_dict() for e in events])
    assert wrong not in text and wrong[9:-4] not in text


def test_per_run_settings_override_the_agents(proxy):
    model = OpenAIModel(MODEL, base_url=proxy.base_url, api_key=MASTER_KEY)
    agent = Agent(model=model, model_settings={"extra_body": {"mock_response": "from the agent"}})
    config = ExecutionConfig(model_settings={"extra_body": {"mock_response": "from the cell"}, "seed": 1})
    run_dict, _, _ = run(agent, config)
    assert run_dict["status"] == RunStatus.COMPLETED.value and run_dict["final_text"] == "from the cell"


def test_a_streamed_reply_that_comes_empty_is_asked_for_whole(proxy):
    """LiteLLM's mock streams no tool calls: the streaming run asks again without streaming, and gets them."""
    call = {"id": "call_ll_2", "type": "function", "function": {"name": "add", "arguments": '{"a": 4, "b": 5}'}}
    turns = [{"mock_response": "", "mock_tool_calls": [call]}, {"mock_response": "", "mock_tool_calls": [call]},
             {"mock_response": "4 + 5 = 9."}]
    model = PerTurn(proxy, turns)
    run_dict, _, repo = run(Agent(model=model, tools=[add]))  # streaming, the default
    assert run_dict["status"] == "completed", run_dict["error"]
    steps = repo.get_steps(run_dict["session_id"])
    assert steps[1].tool_calls[0].id == "call_ll_2" and steps[2].content == "9"
    assert run_dict["final_text"] == "4 + 5 = 9."


def test_an_empty_reply_streamed_and_whole_is_one_line():
    """A server that has nothing to say either way (LiteLLM's mock cannot send that: a stand-in does)."""
    from openai_sse_server import FakeOpenAIServer, chunk

    whole = {"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]}
    with FakeOpenAIServer() as server:
        server.script = [[chunk({"role": "assistant", "content": ""}), chunk({}, finish="stop")], whole]
        model = OpenAIModel("fake-model", base_url=server.base_url, api_key="sk-not-used-000000")
        run_dict, _, _ = run(Agent(model=model))
        assert [r["body"].get("stream") for r in server.requests] == [True, False]
    assert run_dict["status"] == "failed"
    assert run_dict["error"].endswith("with an empty reply (no text and no tool calls), streamed and whole")


def test_an_empty_whole_reply_a_cut_off_one_and_whitespace_are_one_line_each():
    """Nothing said is never a completed answer: not without streaming, not as whitespace; a reply stopped by
    its token limit or a content filter says so and is not asked for again (that would be paid twice)."""
    from openai_sse_server import FakeOpenAIServer, chunk

    def whole(content, finish="stop"):
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": finish}]}

    cases = [  # (config, script, requests made, the error's end)
        (ExecutionConfig(stream=False), [whole(None)], 1, "empty reply (no text and no tool calls), whole"),
        (None, [[chunk({"role": "assistant", "content": ""}), chunk({}, finish="length")]], 1,
         "streamed; finish reason 'length' (the token limit was reached before any text: raise max_tokens or "
         "max_completion_tokens)"),
        (None, [[chunk({"content": ""}), chunk({}, finish="content_filter")]], 1,
         "streamed; finish reason 'content_filter' (the provider's content filter stopped it)"),
        (None, [[chunk({"content": "  \n"}), chunk({}, finish="stop")], whole(" ")], 2,
         "empty reply (no text and no tool calls), streamed and whole"),
    ]
    for config, script, requests, ending in cases:
        with FakeOpenAIServer() as server:
            server.script = script
            model = OpenAIModel("fake-model", base_url=server.base_url, api_key="sk-not-used-000000")
            run_dict, _, _ = run(Agent(model=model), config)
            assert len(server.requests) == requests
        assert run_dict["status"] == "failed" and run_dict["error"].endswith(ending), run_dict["error"]
    with FakeOpenAIServer() as server:  # whitespace before the text is part of it
        server.script = [[chunk({"content": "\n"}), chunk({"content": "Hi."}), chunk({}, finish="stop")]]
        model = OpenAIModel("fake-model", base_url=server.base_url, api_key="sk-not-used-000000")
        run_dict, _, _ = run(Agent(model=model))
    assert run_dict["status"] == "completed" and run_dict["final_text"] == "\nHi."


def test_the_local_llm_script_is_a_real_endpoint_in_one_step(tmp_path):
    """scripts/local_llm.sh: LiteLLM's proxy with the mock models of scripts/local_llm.yaml, answering agio."""
    import os
    import subprocess
    import time
    import urllib.request

    from lab_support import free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LITELLM_"))}
    env["HOME"] = str(tmp_path)
    log = (tmp_path / "log").open("wb")
    proc = subprocess.Popen([str(ROOT / "scripts" / "local_llm.sh"), "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp_path / "log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "log").read_text()[-2000:]
                time.sleep(0.5)
        model = OpenAIModel("mock-gpt", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-agio-local-0000000000")
        run_dict, _, _ = run(Agent(model=model))
        assert run_dict["status"] == "completed", run_dict["error"]
        assert run_dict["final_text"].startswith("Hello from the local mock model.")
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)
