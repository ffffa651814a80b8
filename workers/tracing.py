"""Traces of agent runs: OpenTelemetry spans after the GenAI semantic
conventions, beside those of ``temporalio.contrib.opentelemetry``.

* ``invoke_agent {agent}``: one per Temporal run of an agent, from the
  workflow's start to its end. Its ids are derived from the run (the span id
  from the Temporal run id; the trace id from the caller's trace, else from
  the root workflow's run id), so the workflow can parent every span it
  causes on it from its first task, on any worker, and it is emitted once, at
  the run's end, outside replays (see :func:`agentloop.workflows.effects.recorder.observe`).
* ``chat {model}``: one per LLM call, emitted by the ``call_model`` activity.
* ``execute_tool {tool}``: one per tool call, emitted by its activity.

Activities never replay; workflow-side spans (Temporal's own, and
``invoke_agent``) are made only when the workflow is not replaying. The
agent's name travels as OpenTelemetry baggage (in Temporal's trace
headers, to activities and child workflows); :class:`AgentNameSpanProcessor`
puts it on every span as ``gen_ai.agent.name``.

Needs ``opentelemetry-sdk`` (``pip install 'agentloop[telemetry]'``).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import opentelemetry.baggage
import opentelemetry.context
import opentelemetry.trace
import temporalio.converter
import temporalio.workflow
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio.worker import ExecuteWorkflowInput, WorkflowInboundInterceptor

from agentloop.shared.base import contracts

log = logging.getLogger("agentloop.telemetry")

#: Where ``temporalio.contrib.opentelemetry.TracingInterceptor`` carries the trace context.
HEADER_KEY = "_tracer-data"
#: The baggage entry (and span attribute) naming the agent.
AGENT_NAME = "gen_ai.agent.name"
TRACER_NAME = "agentloop"

#: Trace context and baggage, as Temporal's interceptor propagates them.
propagator = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])

#: Ids the next span takes (trace id or 0, span id), for ``invoke_agent``.
_forced_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("agentloop_span_ids",
                                                                                      default=None)
_warned: list[bool] = []


class AgentLoopIdGenerator(RandomIdGenerator):
    """Random ids, except for the run's ``invoke_agent`` span, whose ids are
    derived from the run. A tracer provider without it still traces, but
    its ``invoke_agent`` spans are not the parents of the run's spans."""

    def generate_span_id(self) -> int:
        forced = _forced_ids.get()
        return forced[1] if forced else super().generate_span_id()

    def generate_trace_id(self) -> int:
        forced = _forced_ids.get()
        return forced[0] if forced and forced[0] else super().generate_trace_id()


class AgentNameSpanProcessor(SpanProcessor):
    """Puts the agent's name (baggage ``gen_ai.agent.name``) on every span started under a run."""

    def on_start(self, span: Span, parent_context: opentelemetry.context.Context | None = None) -> None:
        name = opentelemetry.baggage.get_baggage(AGENT_NAME, parent_context)
        if name and (span.attributes or {}).get(AGENT_NAME) is None:
            span.set_attribute(AGENT_NAME, str(name))

    def on_end(self, span: ReadableSpan) -> None:
        pass


def tracer_provider(*exporters: Any, simple: bool = False) -> TracerProvider:
    """A tracer provider for agentloop: :class:`AgentLoopIdGenerator`,
    :class:`AgentNameSpanProcessor`, and a batch (or ``simple``) span
    processor for each exporter."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(id_generator=AgentLoopIdGenerator())
    provider.add_span_processor(AgentNameSpanProcessor())
    for exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter) if simple else BatchSpanProcessor(exporter))
    return provider


def configure_otlp(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) set:
    a global tracer provider exporting OTLP over HTTP there (the exporter
    reads OpenTelemetry's usual variables). None when neither is set."""
    env = os.environ if environ is None else environ
    if not (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = tracer_provider(OTLPSpanExporter())
    opentelemetry.trace.set_tracer_provider(provider)
    return provider


def _derived_id(kind: str, key: str, size: int) -> int:
    return int.from_bytes(hashlib.sha256(f"agentloop-{kind}:{key}".encode()).digest()[:size], "big") or 1


def _caller_context(headers: Mapping[str, Any]) -> opentelemetry.context.Context:
    """The trace context (and baggage) a workflow was started with, if any."""
    payload = headers.get(HEADER_KEY)
    if not payload:
        return opentelemetry.context.Context()
    carrier = temporalio.converter.PayloadConverter.default.from_payloads([payload])[0]
    return propagator.extract(carrier or {}, context=opentelemetry.context.Context())


def run_span(info: temporalio.workflow.Info) -> tuple[opentelemetry.context.Context, SpanContext]:
    """The context a run was started in, and its ``invoke_agent`` span's
    ids: the same on every worker and in every replay."""
    caller = _caller_context(info.headers)
    parent = opentelemetry.trace.get_current_span(caller).get_span_context()
    root = info.root.run_id if info.root is not None else info.run_id
    trace_id = parent.trace_id if parent.is_valid else _derived_id("trace", root, 16)
    span = SpanContext(trace_id=trace_id, span_id=_derived_id("span", info.run_id, 8), is_remote=False,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return caller, span


def _agent_name(args: Any) -> str:
    from agentloop.shared.runs.run import parse_run_input

    try:
        return parse_run_input(args).spec.name
    except (ValueError, TypeError):
        return ""


class AgentWorkflowInbound(WorkflowInboundInterceptor):
    """Runs an agent's workflow under its ``invoke_agent`` span (not
    recorded here: a parent for the spans of what the run starts) and with
    the agent's name in baggage."""

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        info = temporalio.workflow.info()
        if info.workflow_type != contracts.WORKFLOW_NAME:
            return await super().execute_workflow(input)
        caller, span = run_span(info)
        context = opentelemetry.trace.set_span_in_context(NonRecordingSpan(span), caller)
        name = _agent_name(input.args)
        if name:
            context = opentelemetry.baggage.set_baggage(AGENT_NAME, name, context)
        token = opentelemetry.context.attach(context)
        try:
            return await super().execute_workflow(input)
        finally:
            opentelemetry.context.detach(token)


def provider_of(model: str) -> str:
    """``openai`` of ``openai:gpt-4o``."""
    return model.split(":", 1)[0] if ":" in model else ""


class Tracing:
    """agentloop's spans, with ``tracer`` (the global provider's when None).

    Args:
        content: Put messages, tool arguments and results on the spans.
    """

    def __init__(self, tracer: opentelemetry.trace.Tracer | None = None, *, content: bool = False) -> None:
        self.tracer = tracer or opentelemetry.trace.get_tracer(TRACER_NAME)
        self.content = content

    @contextmanager
    def chat(self, model: str, step: int) -> Iterator[Span]:
        """The ``chat`` span of an LLM call (an exception marks it failed)."""
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": model.split(":", 1)[-1],
            "gen_ai.provider.name": provider_of(model), "agentloop.step": step}
        with self.tracer.start_as_current_span(f"chat {model.split(':', 1)[-1]}", kind=SpanKind.CLIENT,
                                               attributes=attributes) as span:
            yield span  # type: ignore[misc]

    def chat_request(self, span: Any, request: Any) -> None:
        """With content: the messages sent (transcript filled in)."""
        if self.content:
            span.set_attribute("gen_ai.system_instructions", request.system_prompt)
            span.set_attribute("gen_ai.input.messages",
                               json.dumps([m.model_dump(mode="json") for m in request.messages]))

    def chat_result(self, span: Any, response: Any, usage: Any) -> None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        span.set_attribute("gen_ai.response.finish_reasons", [str(response.finish_reason)])
        if response.model:
            span.set_attribute("gen_ai.response.model", response.model)
        if self.content:
            span.set_attribute("gen_ai.output.messages", json.dumps([response.message.model_dump(mode="json")]))

    @contextmanager
    def tool(self, name: str, call_id: str, arguments: Any) -> Iterator[Span]:
        """The ``execute_tool`` span of a tool call."""
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                      "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function"}
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(arguments)
        with self.tracer.start_as_current_span(f"execute_tool {name}", kind=SpanKind.INTERNAL,
                                               attributes=attributes) as span:
            yield span  # type: ignore[misc]

    def tool_result(self, span: Any, result: Any) -> None:
        if self.content:
            span.set_attribute("gen_ai.tool.call.result", result.content)
        if result.is_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool returned an error"))

    def run_ended(self, event: Any, agent: str, model: str, status: str) -> None:
        """Emit the run's ``invoke_agent`` span; called from the workflow
        (outside replays) when the run ends or continues as new."""
        info = temporalio.workflow.info()
        caller, ids = run_span(info)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent", AGENT_NAME: agent, "gen_ai.request.model": model.split(":", 1)[-1],
            "gen_ai.provider.name": provider_of(model), "gen_ai.conversation.id": info.workflow_id,
            "agentloop.run.status": status, "temporalWorkflowID": info.workflow_id, "temporalRunID": info.run_id,
        }
        usage = getattr(event, "usage", None)
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
        token = _forced_ids.set((ids.trace_id, ids.span_id))
        try:
            span = self.tracer.start_span(f"invoke_agent {agent}", context=caller, kind=SpanKind.INTERNAL,
                                          attributes=attributes, start_time=int(info.start_time.timestamp() * 1e9))
        finally:
            _forced_ids.reset(token)
        if span.get_span_context().span_id != ids.span_id and not _warned:
            _warned.append(True)
            log.warning("the tracer provider does not use agentloop.workers.tracing.AgentLoopIdGenerator: "
                        "invoke_agent spans are not the parents of their runs' spans")
        if status == "failed":
            span.set_attribute("error.type", str(getattr(event, "reason", "failed")))
            span.set_status(Status(StatusCode.ERROR, f"the run failed ({getattr(event, 'reason', '')})"))
        span.end(end_time=temporalio.workflow.time_ns())
