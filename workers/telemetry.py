"""A worker's telemetry: traces, metrics and structured logs of agent runs
(docs/observability.md).

:class:`Telemetry` gives a worker interceptors (``AgentLoopPlugin`` adds
them): Temporal's ``TracingInterceptor`` and agentloop's, which wraps the
``call_model`` and ``execute_tool`` activities in ``chat`` and
``execute_tool`` spans, counts their tokens, cost, latency and errors, puts
the run id, step and call id on their log records, and gives workflows the
extern function that the run's recorder hands its events to outside
replays (approvals waiting, runs by status, the failed-run log line, the
``invoke_agent`` span).

Configured from the environment by :meth:`Telemetry.from_env`:
``OTEL_EXPORTER_OTLP_ENDPOINT`` (traces, OTLP over HTTP),
``AGENTLOOP_METRICS_PORT`` (Prometheus), ``AGENTLOOP_TELEMETRY_CONTENT=1``
(messages and tool arguments and results on spans) and
``AGENTLOOP_LOG_FORMAT=json``. Without the ``telemetry`` extra installed,
and with none of them set, a worker runs without telemetry.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from types import MappingProxyType
from typing import Any

import temporalio.activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from agentloop.activities.agent_activities import REQUEST_SEEN
from agentloop.shared.base import contracts
from agentloop.shared.base.errors import UserError
from agentloop.shared.runs.quotas import QuotaCall

log = logging.getLogger("agentloop.telemetry")

CONTENT_ENV = "AGENTLOOP_TELEMETRY_CONTENT"
METRICS_PORT_ENV = "AGENTLOOP_METRICS_PORT"
LOG_FORMAT_ENV = "AGENTLOOP_LOG_FORMAT"
TERMINAL_EVENTS = {"thread.run.completed", "thread.run.failed", "thread.run.cancelled", "agent.run.continued"}
INSTALL_HINT = "install the telemetry extra: pip install 'agentloop[telemetry]'"


def _flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def metrics_port_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """``AGENTLOOP_METRICS_PORT``, checked (None when unset).

    Raises:
        UserError: Not a port number.
    """
    raw = (os.environ if environ is None else environ).get(METRICS_PORT_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise UserError(f"{METRICS_PORT_ENV} must be a port number from 1 to 65535, not {raw!r}")
    return int(raw)


class Telemetry:
    """What a worker reports about its runs.

    Args:
        traces: Make spans, with ``tracer`` or the global tracer provider's
            (give it :func:`agentloop.workers.tracing.tracer_provider`, or
            add ``AgentLoopIdGenerator`` and ``AgentNameSpanProcessor`` to
            your own).
        metrics: Count into these (:class:`agentloop.workers.metrics.AgentMetrics`); none when None.
        content: Put message content, tool arguments and results on spans.
        tracer: An OpenTelemetry tracer.

    Raises:
        UserError: ``traces`` without the telemetry extra installed.
    """

    def __init__(self, *, traces: bool = True, metrics: Any = None, content: bool = False,
                 tracer: Any = None) -> None:
        self.metrics = metrics
        self.content = content
        self.tracing: Any = None
        if traces:
            try:
                from agentloop.workers.tracing import Tracing
            except ImportError as err:
                raise UserError(f"traces need OpenTelemetry's SDK ({err.name} is missing): {INSTALL_HINT}") from None
            self.tracing = Tracing(tracer, content=content)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, metrics_port: int | None = None) -> Telemetry | None:
        """The telemetry the environment asks for, or None: traces when an
        OTLP endpoint is set (the global tracer provider then exports
        there), metrics when a metrics port is (``metrics_port`` or
        ``AGENTLOOP_METRICS_PORT``; serving them is :func:`serve_metrics`'s job).

        Raises:
            UserError: A malformed port, or telemetry asked for without the extra installed.
        """
        env = os.environ if environ is None else environ
        port = metrics_port if metrics_port is not None else metrics_port_from_env(env)
        traces = bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        if not traces and port is None:
            return None
        metrics = None
        if port is not None:
            try:
                from agentloop.workers.metrics import AgentMetrics
            except ImportError as err:
                raise UserError(f"metrics need {err.name}: {INSTALL_HINT}") from None
            metrics = AgentMetrics()
        if traces:
            try:
                from agentloop.workers.tracing import configure_otlp
            except ImportError as err:
                raise UserError(f"traces need OpenTelemetry's SDK ({err.name} is missing): {INSTALL_HINT}") from None
            configure_otlp(env)
        return cls(traces=traces, metrics=metrics, content=_flag(env, CONTENT_ENV))

    def interceptors(self) -> list[Interceptor]:
        """Temporal's ``TracingInterceptor`` (with traces), then agentloop's."""
        ours: list[Interceptor] = []
        if self.tracing is not None:
            from temporalio.contrib.opentelemetry import TracingInterceptor

            ours.append(TracingInterceptor(self.tracing.tracer))
        ours.append(TelemetryInterceptor(self))
        return ours

    # What workflows tell (outside replays) -----------------------------------------------

    def observe(self, event: Any, agent: str, model: str) -> None:
        """A run's event, handed over by its recorder (see
        :func:`agentloop.workflows.effects.recorder.observe`)."""
        try:
            self._observe(event, agent, model)
        except Exception:  # telemetry must never fail a workflow task
            log.debug("telemetry could not take the event %s", getattr(event, "type", event), exc_info=True)

    def _observe(self, event: Any, agent: str, model: str) -> None:
        if isinstance(event, QuotaCall):
            self.quota_reported(event)
            return
        kind = getattr(event, "type", "")
        if self.metrics is not None:
            self.metrics.run_event(event)
        if kind == "thread.run.failed":
            error = " ".join(str(event.error).split())
            log.info("run %s failed (%s): %s", event.run_id, event.reason, error[:500],
                     extra={"run_id": event.run_id, "step": event.step, "agent": agent, "reason": event.reason})
        if self.tracing is not None and kind in TERMINAL_EVENTS:
            status = {"thread.run.failed": "failed", "thread.run.cancelled": "cancelled",
                      "agent.run.continued": "continued"}.get(kind, getattr(event, "status", "completed"))
            self.tracing.run_ended(event, agent, model, status)

    # What activities do -----------------------------------------------------------------

    async def call_model(
        self, input: ExecuteActivityInput, next: Callable[[ExecuteActivityInput], Awaitable[Any]]
    ) -> Any:
        arg = input.args[0] if input.args else None
        model = getattr(arg, "model", "")
        spans = self.tracing.chat(model, arg.step) if self.tracing is not None and arg else nullcontext()
        seen: list[Any] = []
        token = REQUEST_SEEN.set(seen) if self.content and self.tracing is not None else None
        with log_fields(run_id=getattr(arg, "run_id", None), step=getattr(arg, "step", None)), spans as span:
            started = time.monotonic()
            try:
                result = await next(input)
            finally:
                if token is not None:
                    REQUEST_SEEN.reset(token)
                if seen and span is not None:
                    self.tracing.chat_request(span, seen[-1])
            seconds = time.monotonic() - started
            response = getattr(result, "response", None)
            if response is None:
                return result
            usage = response.usage + result.failed_attempts_usage
            if span is not None:
                self.tracing.chat_result(span, response, usage)
            if self.metrics is not None:
                from agentloop.shared.definition.pricing import cost_of

                price = getattr(arg, "price", None)
                cost = cost_of(usage, price) if price is not None else None
                self.metrics.model_call(model, usage.input_tokens, usage.output_tokens, cost, seconds)
                self._lane_waited(result, cost, getattr(arg, "tenant", None))
            return result

    def _lane_waited(self, result: Any, cost: float | None, tenant: str | None = None) -> None:
        """A model call in a provider lane: its wait there, and its tenant's spend."""
        from temporalio import activity

        from agentloop.shared.definition.lanes import lane_of_queue

        info = activity.info()
        lane = lane_of_queue(info.task_queue)
        wait = getattr(result, "queue_wait_ms", None)
        if lane is None or wait is None or self.metrics is None:
            return
        # The run's tenant, from the model call's input: an inherited priority reads as unset here.
        if tenant is None and info.priority is not None:
            tenant = info.priority.fairness_key
        self.metrics.lane_waited(lane, wait / 1000, tenant or "", cost)

    def quota_reported(self, call: Any) -> None:
        """A run reported its usage to its tenant's ledger (handed over by
        the run, outside replays): the tenant's spend."""
        spent = _quota_used(call)
        if self.metrics is not None and spent is not None:
            self.metrics.tenant_spend(*spent)

    async def execute_tool(
        self, input: ExecuteActivityInput, next: Callable[[ExecuteActivityInput], Awaitable[Any]]
    ) -> Any:
        arg = input.args[0] if input.args else None
        name, call_id = getattr(arg, "tool_name", ""), getattr(arg, "call_id", "")
        spans = (self.tracing.tool(name, call_id, arg.arguments) if self.tracing is not None and arg
                 else nullcontext())
        with log_fields(run_id=getattr(arg, "run_id", None), step=getattr(arg, "step", None), call_id=call_id), \
                spans as span:
            started = time.monotonic()
            result = await next(input)
            seconds = time.monotonic() - started
            if span is not None:
                self.tracing.tool_result(span, result)
            replayed = "replayed_from_attempt" in (getattr(result, "metrics", None) or {})
            if self.metrics is not None and not replayed:
                self.metrics.tool_call(name, error=bool(getattr(result, "is_error", False)), seconds=seconds)
            return result


def _quota_used(call: Any) -> tuple[str, int, float] | None:
    """The tenant and the usage a quota call reported (None: nothing)."""
    request = getattr(call, "reserve", None) or getattr(call, "release", None)
    used = getattr(request, "used", None)
    if used is None or not (used.tokens or used.usd):
        return None
    return call.tenant, used.tokens or 0, used.usd or 0.0


class TelemetryInterceptor(Interceptor):
    """agentloop's worker interceptor (see the module's docs)."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityInbound(next, self.telemetry)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        input.unsafe_extern_functions[contracts.OBSERVE_EXTERN] = self.telemetry.observe
        if self.telemetry.tracing is None:
            return None
        from agentloop.workers.tracing import AgentWorkflowInbound

        return AgentWorkflowInbound


class _ActivityInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, telemetry: Telemetry) -> None:
        super().__init__(next)
        self.telemetry = telemetry

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        kind = temporalio.activity.info().activity_type
        if kind == contracts.CALL_MODEL:
            return await self.telemetry.call_model(input, super().execute_activity)
        if kind in (contracts.EXECUTE_TOOL, contracts.EXECUTE_TOOL_HERE):
            return await self.telemetry.execute_tool(input, super().execute_activity)
        with log_fields(run_id=temporalio.activity.info().workflow_id):
            return await super().execute_activity(input)


# Structured logs ------------------------------------------------------------------------

#: Fields of the log records made where they are set (run id, step, call id).
#: Never changed in place: each :func:`log_fields` sets a new mapping.
_fields: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "agentloop_log_fields", default=MappingProxyType({}))
FIELDS = ("run_id", "step", "call_id", "agent", "reason")


@contextmanager
def log_fields(**fields: Any) -> Iterator[None]:
    """Log records made inside carry ``fields`` (those not None)."""
    token = _fields.set({**_fields.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _fields.reset(token)


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of ``record``: its own, the ones of
    :func:`log_fields`, and the workflow or activity Temporal names."""
    found: dict[str, Any] = dict(_fields.get())
    for key in FIELDS:
        if getattr(record, key, None) is not None:
            found[key] = getattr(record, key)
    temporal = getattr(record, "temporal_workflow", None) or getattr(record, "temporal_activity", None)
    if isinstance(temporal, dict) and "run_id" not in found and temporal.get("workflow_id"):
        found["run_id"] = temporal["workflow_id"]
    return found


class TracebacksToDebug(logging.Filter):
    """A record above DEBUG with a traceback is logged as its one line;
    the traceback follows as a DEBUG record of the same logger (shown only
    when DEBUG is)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.levelno > logging.DEBUG:
            exc_info, record.exc_info, record.exc_text = record.exc_info, None, None
            logger = logging.getLogger(record.name)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("traceback of: %s", record.getMessage(), exc_info=exc_info,
                             extra=record_fields(record))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message and the fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                                "message": record.getMessage(), **record_fields(record)}
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """The usual line, with the fields after it as ``key=value``."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = record_fields(record)
        if not fields:
            return text
        first, _, rest = text.partition("\n")
        tail = " ".join(f"{k}={v}" for k, v in fields.items())
        return f"{first} [{tail}]" + (f"\n{rest}" if rest else "")


def configure_logging(environ: Mapping[str, str] | None = None) -> str:
    """Format the root logger's handlers as ``AGENTLOOP_LOG_FORMAT`` says
    (``text``, the default, or ``json``) with the structured fields, and
    send tracebacks to DEBUG. Returns the format.

    Raises:
        UserError: An unknown format.
    """
    fmt = ((os.environ if environ is None else environ).get(LOG_FORMAT_ENV) or "text").strip().lower()
    if fmt not in ("text", "json"):
        raise UserError(f"{LOG_FORMAT_ENV} must be text or json, not {fmt!r}")
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig()
    for handler in root.handlers:
        handler.setFormatter(JsonFormatter() if fmt == "json" else
                             TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        if not any(isinstance(f, TracebacksToDebug) for f in handler.filters):
            handler.addFilter(TracebacksToDebug())
    return fmt


def serve_metrics(telemetry: Telemetry | None, port: int | None, temporal_url: str | None = None) -> Any:
    """Serve ``telemetry``'s metrics on ``port`` (a started
    :class:`~agentloop.workers.metrics.MetricsServer`), or None."""
    if telemetry is None or telemetry.metrics is None or port is None:
        return None
    from agentloop.workers.metrics import MetricsServer

    return MetricsServer(telemetry.metrics, port, temporal_url=temporal_url).start()
