"""OpenTelemetry export to a real OTLP receiver (Arize Phoenix) over HTTP and gRPC: the spans' tree and
their GenAI attributes; errors as span events; an endpoint that is down never blocks a run."""

from __future__ import annotations

import logging
import time

import pytest

from agio_notebook import Agent, FunctionModel, Reply, ScriptedModel, StepRunner, telemetry, tool
from agio_notebook.core import ModelError
from agio_notebook.execution.hooks import default_hooks
from agio_notebook.storage.memory import InMemoryRepository
from lab_support import free_port
from otlp_receiver import running_receiver


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    with running_receiver(tmp_path_factory.mktemp("otlp")) as r:
        yield r


@pytest.fixture(autouse=True)
def _off():
    yield
    telemetry.disable()


def _run(agent: Agent, query: str = "hi"):
    return StepRunner(agent, repository=InMemoryRepository()).run_sync(None, query)


def _tree(spans):
    by_id = {s["context"]["span_id"]: s for s in spans}
    roots = [s for s in spans if s["parent_id"] is None]
    return by_id, roots


def _under_its_tool_call(spans, outer: str, inner: str, outer_run_id: str):
    """The inner agent's run span, checked to be a child of the outer run's ``execute_tool`` span for it, at
    depth 1, in one trace whose only root is the outer run."""
    by_id, roots = _tree(spans)
    assert [r["name"] for r in roots] == [f"invoke_agent {outer}"]
    span = next(s for s in spans if s["name"] == f"invoke_agent {inner}")
    asked = by_id[span["parent_id"]]
    assert asked["name"] == f"execute_tool {inner}" and by_id[asked["parent_id"]] is roots[0]
    assert span["attributes"]["agio.run.parent_id"] == outer_run_id and span["attributes"]["agio.run.depth"] == 1
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    return span


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_spans_of_a_run_reach_a_real_receiver_as_a_tree(receiver, protocol):
    project = f"agio-{protocol.split('/')[0]}"
    endpoint = receiver.http if protocol != "grpc" else receiver.grpc
    t = telemetry.enable(endpoint, protocol=protocol, resource={"openinference.project.name": project})
    agent = Agent(model=ScriptedModel([Reply.call("add", a=1, b=2),
                                       Reply.call("explode"), "three"]), tools=[add, explode], name="calc")
    result = _run(agent)
    assert result.status.value == "completed"
    assert t.flush()
    spans = receiver.spans(project, expect=6)
    by_id, roots = _tree(spans)
    assert [r["name"] for r in roots] == ["invoke_agent calc"]
    root = roots[0]
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.agent.name"] == "calc"
    assert root["attributes"]["gen_ai.conversation.id"] == result.session_id
    assert root["attributes"]["agio.run.id"] == result.run_id
    children = [s for s in spans if s["parent_id"] == root["context"]["span_id"]]
    assert sorted(s["name"] for s in children) == ["chat scripted"] * 3 + ["execute_tool add", "execute_tool explode"]
    chat = [s for s in children if s["name"] == "chat scripted"]
    for span in chat:
        attrs = span["attributes"]
        assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "scripted"
        assert attrs["gen_ai.provider.name"] == "openai"
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    tokens = sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in chat)
    assert tokens == result.metrics.prompt_tokens == root["attributes"]["gen_ai.usage.input_tokens"]
    ok, failed = (next(s for s in children if s["name"] == f"execute_tool {n}") for n in ("add", "explode"))
    tool_steps = [s for s in result.steps if s.role.value == "tool"]
    assert ok["attributes"]["gen_ai.tool.name"] == "add"
    assert ok["attributes"]["gen_ai.tool.call.id"] == tool_steps[0].tool_call_id
    assert ok["status_code"] != "ERROR"
    assert failed["status_code"] == "ERROR"
    event = failed["events"][0]
    assert event["name"] == "exception" and "kaboom" in event["attributes"]["exception.message"]
    assert all(s["context"]["trace_id"] == root["context"]["trace_id"] for s in spans)


def test_a_failed_run_records_its_error_on_the_run_span(receiver):
    t = telemetry.enable(receiver.http, resource={"openinference.project.name": "agio-failed"})

    def broken(messages, tools):
        raise ModelError("the provider said no")

    result = _run(Agent(model=FunctionModel(broken), name="broken"))
    assert result.status.value == "failed"
    assert t.flush()
    (span,) = receiver.spans("agio-failed", expect=1)
    assert span["status_code"] == "ERROR" and "the provider said no" in span["status_message"]
    assert any("the provider said no" in e["attributes"]["exception.message"] for e in span["events"])


def test_an_agent_called_as_a_tool_is_a_child_span_of_that_tool_call_in_one_trace(receiver):
    t = telemetry.enable(receiver.http, resource={"openinference.project.name": "agio-nested"})
    helper = Agent(model=ScriptedModel([Reply.call("add", a=2, b=3), "five"]), tools=[add], name="helper")
    boss = Agent(model=ScriptedModel([Reply.call("helper", query="2 + 3?"), "helper says five"]),
                 tools=[helper], name="boss")
    result = _run(boss)
    assert result.status.value == "completed" and result.final_text == "helper says five"
    assert t.flush()
    # boss: run, 2 chats, 1 tool; helper: run, 2 chats, 1 tool
    spans = receiver.spans("agio-nested", expect=8)
    inner = _under_its_tool_call(spans, "boss", "helper", result.run_id)
    inner_children = sorted(s["name"] for s in spans if s["parent_id"] == inner["context"]["span_id"])
    assert inner_children == ["chat scripted", "chat scripted", "execute_tool add"]


def test_usual_otel_variables_configure_the_export(receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.http + "/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    t = telemetry.enable(resource={"openinference.project.name": "agio-env"})
    _run(Agent(model=ScriptedModel(["hello"]), name="env"))
    assert t.flush()
    assert [s["name"] for s in receiver.spans("agio-env", expect=2)].count("invoke_agent env") == 1


def test_off_by_default_and_an_endpoint_that_is_down_never_blocks_a_run(caplog):
    assert not any(isinstance(h, telemetry.OpenTelemetryHook) for h in default_hooks())
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    t = telemetry.enable(down, timeout=1.0)
    caplog.set_level(logging.WARNING, logger="agio_notebook.telemetry")
    agent = Agent(model=ScriptedModel(["a", "b", "c"], loop=True), name="quiet")
    started = time.perf_counter()
    for _ in range(3):
        assert _run(agent).status.value == "completed"
        t.flush(timeout=5)
    assert time.perf_counter() - started < 30
    assert t.exporter.failures >= 2
    warnings = [r for r in caplog.records if r.name == "agio_notebook.telemetry"]
    assert len(warnings) == 1 and "export to" in warnings[0].getMessage()
    telemetry.disable()
    assert not default_hooks()


def test_a_bad_protocol_is_one_clear_error():
    with pytest.raises(ValueError, match="OTLP protocol must be"):
        telemetry.enable("http://127.0.0.1:1", protocol="carrier-pigeon")


def test_a_run_served_over_mcp_in_another_process_joins_the_callers_trace_under_its_tool_call(receiver, tmp_path):
    import os
    import sys
    from pathlib import Path

    from agio_notebook.tools.mcp import close_mcp_servers, mcp_tools

    project = "agio-remote"
    t = telemetry.enable(receiver.http, resource={"openinference.project.name": project})
    servers = Path(__file__).parent / "servers"
    (tmp_path / "store").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(servers), os.environ.get("PYTHONPATH")])),
           "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}"}
    env.pop("AGIO_STORE", None)
    try:
        tools = mcp_tools([sys.executable, "-m", "agio_notebook", "--store", str(tmp_path / "store"), "mcp", "serve",
                           "--agents", "agio_agents:team", "--otel", receiver.http], env=env, allow=["writer"])
        boss = Agent(model=ScriptedModel([Reply.call("writer", query="a haiku"), "written"]), tools=tools,
                     name="boss")
        result = _run(boss)
        assert result.final_text == "written"
    finally:
        close_mcp_servers()  # the server process exits and flushes its spans
    assert t.flush()
    # boss: run, 2 chats, 1 tool; the served writer (another process): run, 1 chat
    spans = receiver.spans(project, expect=6)
    served = _under_its_tool_call(spans, "boss", "writer", result.run_id)
    assert [s["name"] for s in spans if s["parent_id"] == served["context"]["span_id"]] == ["chat write-script"]
