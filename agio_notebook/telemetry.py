"""OpenTelemetry export: a span per run, per model call and per tool call, in the GenAI conventions.

Off by default.  :func:`enable` sends spans to any OTLP endpoint (HTTP or gRPC) through the official
SDK, configured in code or with the usual ``OTEL_EXPORTER_OTLP_*`` variables; every runner created
afterwards reports to it.  Export happens on the SDK's background thread: an endpoint that is down
never blocks or fails a run, and is reported once.

Span tree of one run::

    invoke_agent {agent}            gen_ai.operation.name=invoke_agent, gen_ai.agent.name, gen_ai.conversation.id
    ├── chat {model}                gen_ai.request.model, gen_ai.usage.input_tokens / output_tokens, one per model call
    └── execute_tool {tool}         gen_ai.tool.name, gen_ai.tool.call.id
        └── invoke_agent {agent}    an agent called as this tool (a nested run), with its own chats and tools

A nested run's span is a child of the tool call that asked for it (or of the outer run, when the
tool call's span is not known here), so one trace holds the whole tree of agents. That holds across
processes too: a tool call that calls an agio agent over MCP or A2A sends its span's W3C ``traceparent``
with the call (``execution/remote.py``), and the served run's span, in the server's process, joins the
caller's trace under it (when the server exports to the same place).

Errors are recorded as ``exception`` span events with the span's status set to ERROR.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Sequence

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .core import AgentRun, RunStatus, Step, StepRole, ToolCall, scrub
from .core.redact import redact_url
from .execution import remote
from .execution.hooks import AgentHook, add_default_hook, remove_default_hook

if TYPE_CHECKING:
    from .tools import ToolResult

log = logging.getLogger("agio_notebook.telemetry")
_NS = 1_000_000_000


def _ns(seconds: float) -> int:
    return int(seconds * _NS)


class OpenTelemetryHook(AgentHook):
    """Emits the spans of every run it sees; works with any ``TracerProvider``.

    ``provider`` is reported as ``gen_ai.provider.name``: agio speaks the OpenAI-compatible protocol,
    so "openai" unless you name the server (e.g. "vllm", "ollama").
    """

    def __init__(self, tracer_provider: Any = None, *, provider: str = "openai"):
        source = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self.tracer = source.get_tracer("agio_notebook")
        self.provider = provider
        self._runs: dict[str, Any] = {}
        self._tools: dict[tuple[str, str], Any] = {}

    def _attrs(self, run: AgentRun, operation: str) -> dict[str, Any]:
        attrs = {"gen_ai.operation.name": operation, "gen_ai.provider.name": self.provider,
                 "gen_ai.conversation.id": run.session_id, "agio.run.id": run.id}
        if run.agent_name:
            attrs["gen_ai.agent.name"] = run.agent_name
        if run.model_name:
            attrs["gen_ai.request.model"] = run.model_name
        return attrs

    def _context(self, run: AgentRun) -> Any:
        span = self._runs.get(run.id)
        return trace.set_span_in_context(span) if span is not None else None

    def _parent_context(self, run: AgentRun) -> Any:
        """For a nested run: the span of the tool call that asked for it, else that of the outer run; for a
        run served to an agio run of another process (MCP, A2A), the calling tool call's span it sent."""
        if not run.parent_run_id:
            return None
        span = self._tools.get((run.parent_run_id, run.parent_tool_call_id or "")) or self._runs.get(run.parent_run_id)
        if span is not None:
            return trace.set_span_in_context(span)
        caller = remote.served_caller.get()
        if caller is not None and caller.traceparent and run.parent_run_id == (caller.run_id or "remote"):
            return TraceContextTextMapPropagator().extract({"traceparent": caller.traceparent})
        return None

    def traceparent(self, run_id: str, tool_call_id: str | None) -> str | None:
        """The W3C traceparent of a running tool call's span (what a remote call made from it sends)."""
        span = self._tools.get((run_id, tool_call_id or ""))
        if span is None:
            return None
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier, context=trace.set_span_in_context(span))
        return carrier.get("traceparent")

    async def on_run_start(self, run: AgentRun) -> None:
        attrs = {**self._attrs(run, "invoke_agent"), "agio.run.kind": run.kind}
        if run.parent_run_id:
            attrs.update({"agio.run.parent_id": run.parent_run_id, "agio.run.depth": run.depth})
        self._runs[run.id] = self.tracer.start_span(f"invoke_agent {run.agent_name or 'agent'}",
                                                    context=self._parent_context(run), kind=SpanKind.INTERNAL,
                                                    attributes=attrs, start_time=_ns(run.started_at))

    async def on_step_end(self, run: AgentRun, step: Step) -> None:
        if step.role is not StepRole.ASSISTANT:
            return
        metrics = step.metrics
        end = step.created_at
        start = end - (metrics.model_ms or 0.0) / 1000.0
        attrs = {**self._attrs(run, "chat"), "agio.step.sequence": step.sequence,
                 "gen_ai.response.finish_reasons": ["tool_calls" if step.tool_calls else "stop"]}
        if run.model_name:
            attrs["gen_ai.response.model"] = run.model_name
        if metrics.prompt_tokens is not None:
            attrs["gen_ai.usage.input_tokens"] = metrics.prompt_tokens
        if metrics.completion_tokens is not None:
            attrs["gen_ai.usage.output_tokens"] = metrics.completion_tokens
        span = self.tracer.start_span(f"chat {run.model_name or 'model'}", context=self._context(run),
                                      kind=SpanKind.CLIENT, attributes=attrs, start_time=_ns(start))
        if step.status != "ok" or step.error:
            _record_error(span, "ModelError", step.error or step.status)
        span.end(end_time=_ns(end))

    async def on_tool_start(self, run: AgentRun, call: ToolCall) -> None:
        attrs = {**self._attrs(run, "execute_tool"), "gen_ai.tool.name": call.name,
                 "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function"}
        self._tools[(run.id, call.id)] = self.tracer.start_span(f"execute_tool {call.name}",
                                                                context=self._context(run), attributes=attrs)

    async def on_tool_end(self, run: AgentRun, result: ToolResult) -> None:
        span = self._tools.pop((run.id, result.tool_call_id), None)
        if span is None:
            return
        if result.status != "ok":
            _record_error(span, result.error_type or result.status, result.error or result.content)
        span.end()

    async def on_error(self, run: AgentRun, error: BaseException) -> None:
        span = self._runs.get(run.id)
        if span is not None:
            _record_error(span, type(error).__name__, run.error or str(error))

    async def on_run_end(self, run: AgentRun) -> None:
        for key in [k for k in self._tools if k[0] == run.id]:  # cancelled mid-tool
            self._tools.pop(key).end()
        span = self._runs.pop(run.id, None)
        if span is None:
            return
        m = run.metrics
        attrs = {"agio.run.status": run.status.value, "gen_ai.usage.input_tokens": m.prompt_tokens,
                 "gen_ai.usage.output_tokens": m.completion_tokens, "agio.run.steps": m.steps}
        span.set_attributes({k: v for k, v in attrs.items() if v is not None})  # unknown usage: left out
        if run.status is RunStatus.FAILED:
            span.set_status(Status(StatusCode.ERROR, scrub(run.error) or "failed"))
        elif run.status is not RunStatus.COMPLETED:
            span.set_attribute("agio.run.end_reason", scrub(run.error) or run.status.value)
        span.end(end_time=_ns(run.ended_at) if run.ended_at else None)


def _record_error(span: Any, kind: str, message: str | None) -> None:
    text = scrub(message) or kind  # span attributes leave the process: masked like every renderer
    span.add_event("exception", {"exception.type": kind, "exception.message": text})
    span.set_status(Status(StatusCode.ERROR, text))


class _ReportOnce(SpanExporter):
    """Wraps an OTLP exporter: a failed export is logged once (per outage), never raised into a run."""

    _QUIET = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.exporter.otlp.proto.grpc.exporter",
              "opentelemetry.exporter.otlp.proto.http", "opentelemetry.exporter.otlp.proto.grpc",
              "opentelemetry.sdk.trace.export")

    def __init__(self, inner: SpanExporter, where: str):
        self.inner, self.where = inner, where
        self.failures = 0
        self._reported = False
        self._lock = threading.Lock()
        for name in self._QUIET:  # the SDK would log every failed batch into the notebook
            logging.getLogger(name).setLevel(logging.CRITICAL)

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # noqa: BLE001 - telemetry must never fail a run
            result, reason = SpanExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
        else:
            reason = "the endpoint did not accept the spans"
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self._reported = False
                return result
            self.failures += 1
            if not self._reported:
                self._reported = True
                log.warning("agio: OpenTelemetry export to %s failed (%s); runs go on, spans are dropped "
                            "until it answers", self.where, reason)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return getattr(self.inner, "force_flush", lambda *_: True)(timeout_millis)


def _exporter(endpoint: str | None, protocol: str | None, headers: dict[str, str] | None,
              timeout: float) -> tuple[SpanExporter, str]:
    import os

    protocol = (protocol or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        insecure = endpoint is not None and endpoint.startswith("http://")
        exporter: SpanExporter = GrpcExporter(endpoint=endpoint, headers=headers, timeout=timeout,
                                              insecure=insecure or None)
    elif protocol in ("http", "http/protobuf"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
            endpoint = endpoint.rstrip("/") + "/v1/traces"
        exporter = HttpExporter(endpoint=endpoint, headers=headers, timeout=timeout)
    else:
        raise ValueError(f"OTLP protocol must be 'grpc' or 'http/protobuf', got {protocol!r}")
    where = endpoint or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT") or "the default OTLP endpoint"
    return exporter, f"{redact_url(where)} ({protocol})"


class Telemetry:
    """What :func:`enable` set up: the hook, its provider and its exporter (``.failures`` counts drops)."""

    def __init__(self, hook: OpenTelemetryHook, provider: TracerProvider, exporter: _ReportOnce):
        self.hook, self.provider, self.exporter = hook, provider, exporter

    def flush(self, timeout: float = 10.0) -> bool:
        return self.provider.force_flush(int(timeout * 1000))

    def disable(self) -> None:
        remove_default_hook(self.hook)
        if self.hook.traceparent in remote.trace_parent_of:
            remote.trace_parent_of.remove(self.hook.traceparent)
        self.provider.shutdown()


_ACTIVE: Telemetry | None = None


def enable(endpoint: str | None = None, *, protocol: str | None = None, headers: dict[str, str] | None = None,
           service_name: str = "agio-notebook", provider: str = "openai", timeout: float = 5.0,
           resource: dict[str, Any] | None = None) -> Telemetry:
    """Export every run from now on to an OTLP endpoint; ``None`` values fall back to ``OTEL_*`` variables.

    ``protocol`` is "http/protobuf" (default, port 4318) or "grpc" (port 4317).  Calling it again
    replaces the previous exporter.
    """
    global _ACTIVE
    disable()
    exporter, where = _exporter(endpoint, protocol, headers, timeout)
    wrapped = _ReportOnce(exporter, where)
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": service_name, **(resource or {})}))
    tracer_provider.add_span_processor(BatchSpanProcessor(wrapped, schedule_delay_millis=500))
    hook = OpenTelemetryHook(tracer_provider, provider=provider)
    add_default_hook(hook)
    remote.trace_parent_of.append(hook.traceparent)  # remote calls from a tool call carry its span
    _ACTIVE = Telemetry(hook, tracer_provider, wrapped)
    return _ACTIVE


def disable() -> None:
    """Stop exporting (flushes what is pending)."""
    global _ACTIVE
    if _ACTIVE is not None:
        _ACTIVE.disable()
        _ACTIVE = None


def active() -> Telemetry | None:
    return _ACTIVE
