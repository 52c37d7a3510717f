"""The stand-in endpoint the openai_endpoint tutorial starts: real HTTP through the openai client."""

from __future__ import annotations

import json

from agio_notebook import Agent, ExecutionConfig, OpenAIModel, StepRunner, tool
from agio_notebook.local_endpoint import LocalEndpoint
from agio_notebook.storage import InMemoryRepository

KEY = "sk-local-endpoint-test-0123456789"


@tool
def word_length(word: str) -> int:
    """Number of letters in a word."""
    return len(word)


def test_a_tool_call_then_an_answer_settings_time_limits_and_the_requests_kept():
    with LocalEndpoint(slow_seconds=1.5) as endpoint:
        agent = Agent(model=OpenAIModel("stand-in", base_url=endpoint.url, api_key=KEY), tools=[word_length],
                      name="real", model_settings={"temperature": 0})
        repo = InMemoryRepository()
        run = StepRunner(agent, repository=repo).run_sync(None, "How many letters are in 'notebook'?")
        assert run.status.value == "completed" and run.final_text == "The tool says: 8."
        assert [s.content for s in run.steps if s.role.value == "tool"] == ["8"]
        assert run.metrics.total_tokens and run.metrics.model_calls == 2
        first = endpoint.requests[0]
        assert first["temperature"] == 0 and first["stream"] is True and first["tools"][0]["function"]["name"] == \
            "word_length"
        assert KEY not in json.dumps(endpoint.requests)  # bodies only: the key travels in a header
        # a per-run setting reaches the server and has an effect
        short = StepRunner(agent, repository=repo,
                           config=ExecutionConfig(model_settings={"max_tokens": 3})).run_sync(None, "Tell me about owls")
        assert endpoint.requests[-1]["max_tokens"] == 3 and short.final_text == "You said: Tell"
        # a time limit fires on a slow answer, with one line naming it
        slow = StepRunner(agent, repository=repo,
                          config=ExecutionConfig(first_token_timeout=0.3)).run_sync(None, "answer slowly")
        assert slow.status.value == "failed" and "first_token_timeout=0.3" in slow.error
        # not streamed: the same answer in one response
        whole = StepRunner(agent, repository=repo, config=ExecutionConfig(stream=False)).run_sync(None, "hi there")
        assert whole.final_text == "You said: hi there" and endpoint.requests[-1].get("stream") in (None, False)
