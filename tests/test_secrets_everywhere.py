"""A tool that echoes a secret of the process: read back through every renderer, the secret is nowhere.

The secrets here are not shaped like credentials (no ``sk-``, no ``api_key=``), so only masking by
value can catch them: a configured key in a secret-named environment variable, and a value registered
as a secret (as a server's token is).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner, tool
from agio_notebook.core import StepEvent, mask, scrub
from agio_notebook.core.redact import known_secrets, register_secret
from agio_notebook.notebook.transcript import build_bundle, bundle_for_run
from agio_notebook.serve.markdown import run_markdown
from agio_notebook.storage import open_repository
from agio_notebook.storage.export import export_jsonl, load_export
from agio_notebook.telemetry import OpenTelemetryHook

ENV_SECRET = "correct horse battery staple 42"  # an API key of no recognisable shape
TOKEN = "plain-words-as-a-server-token"


@pytest.fixture
def secrets(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", ENV_SECRET)
    register_secret(TOKEN)
    return (ENV_SECRET, TOKEN)


def _leaked(text: str) -> list[str]:
    return [s for s in (ENV_SECRET, TOKEN) if s in text]


def test_known_secrets_come_from_secret_named_variables_and_registrations(secrets, monkeypatch):
    monkeypatch.setenv("HARMLESS_SETTING", "a value that is not secret")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to mask by value: words stay whole
    known = known_secrets()
    assert ENV_SECRET in known and TOKEN in known
    assert "a value that is not secret" not in known and "abc" not in known
    monkeypatch.setenv("AGIO_STORE", "postgresql://agio:pw-of-the-store-9@localhost/agio")
    assert "pw-of-the-store-9" in known_secrets()
    assert scrub(f"x {ENV_SECRET} y {TOKEN} z") == "x *** y *** z"
    data = {"a": [f"key={ENV_SECRET}", 3, None], "b": {"c": "nothing here"}}
    masked = mask(data)
    assert masked == {"a": ["key=***", 3, None], "b": {"c": "nothing here"}}
    assert masked["b"] is data["b"]  # untouched parts are not copied


def test_a_tool_echoing_secrets_leaks_through_no_renderer(secrets, tmp_path):
    @tool
    def whoami() -> str:
        """Report the credentials this tool uses."""
        return f"key {ENV_SECRET}, token {TOKEN}"

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    hook = OpenTelemetryHook(provider)

    @tool
    def fails() -> str:
        """Always fails, quoting the token."""
        raise RuntimeError(f"denied for token {TOKEN}")

    model = ScriptedModel([Reply.call("whoami"), Reply.call("fails"), f"The key is {ENV_SECRET}."])
    repo = open_repository(str(tmp_path / "store"))
    runner = StepRunner(Agent(model=model, tools=[whoami, fails]), repository=repo, hooks=[hook])

    async def go() -> list[StepEvent]:
        return [e async for e in runner.run_stream(None, "who are you?")]

    events = asyncio.run(go())
    run_id = events[-1].run_id
    seen = {
        "events": json.dumps([e.to_dict() for e in events]),
        "store files": "\n".join(p.read_text(errors="replace") for p in (tmp_path / "store").rglob("*") if p.is_file()),
        "bundle": json.dumps(build_bundle(events)),
        "transcript from the store": json.dumps(bundle_for_run(repo, run_id)),
        "MCP transcript": run_markdown(repo, run_id),
        "spans": json.dumps([json.loads(s.to_json()) for s in exporter.get_finished_spans()]),
    }
    export_jsonl(repo, tmp_path / "export.jsonl")
    seen["export"] = (tmp_path / "export.jsonl").read_text()
    assert "***" in seen["store files"]  # the tool's result is there, masked
    for where, text in seen.items():
        assert not _leaked(text), f"a secret reached the {where}"
    # the export loads back and still reads
    assert len(load_export(tmp_path / "export.jsonl").get_steps(events[-1].session_id)) >= 5
