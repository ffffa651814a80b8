"""AgentRunWorkflow: one agent run, durable.

Each LLM step and each tool call is an activity; Temporal's event history is
the checkpoint, so a run survives worker crashes and restarts. This module is
deterministic: no I/O, clocks or randomness, only ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pydantic models and pure helpers: no side effects at import, and passing
    # them through keeps one class identity for the data converter.
    from agentloop.activity_io import (
        CallModelInput,
        CallModelResult,
        ExecuteToolInput,
        ExecuteToolResult,
        ModelRequest,
        ResolveToolsInput,
        ResolveToolsResult,
        ToolDefinition,
    )
    from pydantic import ValidationError

    from agentloop.errors import INVALID_INPUT_ERROR_TYPE, RUN_FAILED_ERROR_TYPE, describe_validation_error
    from agentloop.messages import Message, ToolCallPart, ToolResultPart
    from agentloop.report import AgentRunReport, RunReason, StepReport, ToolCallReport, Usage
    from agentloop.run import AgentRunInput, AgentRunResult, MessagesResult, RunState, RunStatus
    from workflows.loop_logic import (
        FailRun,
        FinalAnswer,
        RunTools,
        bad_arguments_message,
        decide_next_step,
        max_steps_message,
        unknown_tool_message,
    )

#: Extra time a tool activity gets beyond the tool's own limit, so the tool's
#: timeout (a clean error result) fires before Temporal's.
TOOL_TIMEOUT_GRACE = timedelta(seconds=30)


def _ms(delta: timedelta) -> float:
    return delta.total_seconds() * 1000


@workflow.defn(name="AgentRunWorkflow")
class AgentRunWorkflow:
    """The agent loop of DESIGN.md: step, decide, run tools, repeat."""

    def __init__(self) -> None:
        self._run_id = ""
        self._status: RunStatus = "running"
        self._reason: RunReason | None = None
        self._error: str | None = None
        self._messages: list[Message] = []
        self._input_count = 0
        self._step = 0
        self._usage = Usage()
        self._running_calls: dict[str, ToolCallPart] = {}
        self._report: AgentRunReport | None = None

    # Queries -----------------------------------------------------------------

    @workflow.query(name="state")
    def state(self) -> RunState:
        """Status, step, tool calls running now, usage."""
        return RunState(
            run_id=self._run_id,
            status=self._status,
            step=self._step,
            reason=self._reason,
            error=self._error,
            running_tool_calls=list(self._running_calls.values()),
            message_count=len(self._messages),
            usage=self._usage,
        )

    @workflow.query(name="messages")
    def messages(self) -> MessagesResult:
        """The conversation so far, input included."""
        return MessagesResult(messages=list(self._messages))

    @workflow.query(name="report")
    def report(self) -> AgentRunReport:
        """The run report (seed 004), complete up to now."""
        assert self._report is not None
        report = self._report.model_copy()
        if report.completed_at is None:
            report.total_ms = _ms(workflow.now() - report.started_at)
        return report

    # The loop ----------------------------------------------------------------

    @workflow.run
    async def run(self, input: AgentRunInput | dict[str, Any]) -> AgentRunResult:
        # Input that is not an AgentRunInput (an operator typing JSON into
        # `temporal workflow start`) arrives as a dict: fail the run with the
        # reasons, instead of failing workflow tasks forever on a decode error.
        if isinstance(input, dict):
            try:
                input = AgentRunInput.model_validate(input)
            except ValidationError as exc:
                raise ApplicationError(
                    f"invalid run input: {describe_validation_error(exc)}",
                    type=INVALID_INPUT_ERROR_TYPE,
                    non_retryable=True,
                ) from None
        self._run_id = workflow.info().workflow_id
        self._messages = list(input.messages)
        self._input_count = len(self._messages)
        self._report = AgentRunReport(
            id=self._run_id,
            model=input.spec.model,
            started_at=workflow.now(),
            user_message=next((m.text for m in reversed(self._messages) if m.role == "user"), ""),
        )
        try:
            return await self._loop(input)
        except asyncio.CancelledError:
            self._finish("cancelled", "cancelled", None)
            raise

    async def _loop(self, input: AgentRunInput) -> AgentRunResult:
        spec = input.spec
        tools = await self._resolve_tools(spec.tools)
        if isinstance(tools, FailRun):
            return self._fail(tools.reason, tools.message)

        continuations = 0
        failed_tool_steps = 0
        while True:
            # Seams for later stages: context preparation and input guardrails go here.
            step_report = StepReport(
                index=self._step, type="initial" if self._step == 0 else "tool_followup"
            )
            self._report_step(step_report)
            llm = await self._call_model(input, tools, step_report)
            if isinstance(llm, FailRun):
                return self._fail(llm.reason, llm.message)
            response = llm.response
            self._messages.append(response.message)
            self._report_final_text(response.message.text)

            decision = decide_next_step(response, spec=spec, continuations=continuations)
            if isinstance(decision, FinalAnswer):
                return self._complete()
            if isinstance(decision, FailRun):
                return self._fail(decision.reason, decision.message)
            assert isinstance(decision, RunTools)

            results = await self._run_tools(input, tools, decision.calls, step_report)
            self._messages.append(Message(role="tool", content=list(results)))
            if all(r.is_error for r in results):
                failed_tool_steps += 1
                if failed_tool_steps >= spec.max_consecutive_failed_tool_steps:
                    errors = "; ".join(f"{r.name}: {r.content}" for r in results)
                    return self._fail(
                        "tool_error",
                        f"every tool call of step {self._step + 1} failed ({errors})",
                    )
            else:
                failed_tool_steps = 0
            self._step += 1
            if self._step >= spec.max_steps:
                return self._fail("max_steps", max_steps_message(spec))
            continuations += 1

    # Activities --------------------------------------------------------------

    async def _resolve_tools(self, names: list[str]) -> list[ToolDefinition] | FailRun:
        if not names:
            return []
        resolved = await workflow.execute_activity(
            "resolve_tools",
            ResolveToolsInput(names=names),
            result_type=ResolveToolsResult,
            start_to_close_timeout=timedelta(seconds=30),
            summary="resolve tools",
        )
        if resolved.missing:
            return FailRun(
                "error",
                f"AgentSpec.tools names tools this worker does not have: "
                f"{', '.join(resolved.missing)}. Available: {', '.join(resolved.available) or 'none'}. "
                "Register them in a module the worker imports (agentloop worker --import MODULE).",
            )
        return resolved.tools

    async def _call_model(
        self, input: AgentRunInput, tools: list[ToolDefinition], step_report: StepReport
    ) -> CallModelResult | FailRun:
        spec = input.spec
        started = workflow.now()
        request = ModelRequest(
            model=spec.model_name,
            system_prompt=spec.system_prompt,
            messages=list(self._messages),
            tools=tools,
            temperature=spec.temperature,
            max_tokens=spec.max_tokens,
            parallel_tool_calls=spec.parallel_tool_calls,
        )
        try:
            result = await workflow.execute_activity(
                "call_model",
                CallModelInput(run_id=self._run_id, step=self._step, model=spec.model, request=request),
                result_type=CallModelResult,
                start_to_close_timeout=timedelta(seconds=spec.llm_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout_seconds),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=60),
                    maximum_attempts=spec.llm_max_attempts,
                ),
                summary=f"LLM step {self._step + 1}",
            )
        except ActivityError as err:
            step_report.llm_latency_ms = _ms(workflow.now() - started)
            cause = err.cause
            detail = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            return FailRun("error", f"LLM step {self._step + 1} failed: {detail}")
        response = result.response
        step_report.llm_latency_ms = _ms(workflow.now() - started)
        step_report.usage = response.usage
        step_report.finish_reason = response.finish_reason
        self._usage = self._usage + response.usage
        assert self._report is not None
        self._report.total_usage = self._usage
        self._report.total_llm_time_ms += step_report.llm_latency_ms
        return result

    async def _run_tools(
        self,
        input: AgentRunInput,
        tools: list[ToolDefinition],
        calls: list[ToolCallPart],
        step_report: StepReport,
    ) -> list[ToolResultPart]:
        started = workflow.now()
        if input.spec.parallel_tool_calls and len(calls) > 1:
            results = list(
                await asyncio.gather(*(self._run_tool(input, tools, c, step_report) for c in calls))
            )
        else:
            results = [await self._run_tool(input, tools, c, step_report) for c in calls]
        # Reports are appended as calls finish; keep them in call order like the results.
        order = {c.id: i for i, c in enumerate(calls)}
        step_report.tool_calls.sort(key=lambda r: order.get(r.call_id, len(order)))
        step_report.tool_total_ms = _ms(workflow.now() - started)
        assert self._report is not None
        self._report.total_tool_time_ms += step_report.tool_total_ms
        self._report.tool_call_count += len(calls)
        return results

    async def _run_tool(
        self,
        input: AgentRunInput,
        tools: list[ToolDefinition],
        call: ToolCallPart,
        step_report: StepReport,
    ) -> ToolResultPart:
        spec = input.spec
        report = ToolCallReport(call_id=call.id, tool_name=call.name, arguments=call.arguments)
        started = workflow.now()

        def finish(content: str, *, is_error: bool, skipped: bool = False) -> ToolResultPart:
            report.latency_ms = _ms(workflow.now() - started)
            report.result_size_bytes = len(content.encode())
            report.error = content if is_error else None
            report.skipped = skipped
            step_report.tool_calls.append(report)
            return ToolResultPart(id=call.id, name=call.name, content=content, is_error=is_error)

        if call.name not in {t.name for t in tools}:
            return finish(unknown_tool_message(call.name, tools), is_error=True, skipped=True)
        if call.arguments_error is not None:
            return finish(bad_arguments_message(call), is_error=True, skipped=True)

        timeout = spec.timeout_for(call.name)
        self._running_calls[call.id] = call
        try:
            result = await workflow.execute_activity(
                "execute_tool",
                ExecuteToolInput(
                    run_id=self._run_id,
                    step=self._step,
                    call_id=call.id,
                    tool_name=call.name,
                    arguments=call.arguments,
                    workspace=spec.workspace,
                    timeout_seconds=timeout,
                    output_limit=spec.tool_output_limit,
                ),
                result_type=ExecuteToolResult,
                start_to_close_timeout=timedelta(seconds=timeout) + TOOL_TIMEOUT_GRACE,
                heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout_seconds),
                # Tool failures come back as results; only lost workers and
                # infrastructure errors reach here, and those are worth a retry.
                retry_policy=RetryPolicy(maximum_attempts=spec.tool_max_attempts),
                summary=f"tool {call.name}",
            )
        except ActivityError as err:
            cause = err.cause
            detail = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            return finish(f"Tool '{call.name}' could not complete: {detail}", is_error=True)
        finally:
            self._running_calls.pop(call.id, None)
        report.truncated = result.truncated
        report.metrics = result.metrics
        return finish(result.content, is_error=result.is_error)

    # Bookkeeping -------------------------------------------------------------

    def _report_step(self, step_report: StepReport) -> None:
        assert self._report is not None
        self._report.steps.append(step_report)
        self._report.step_count = len(self._report.steps)

    def _report_final_text(self, text: str) -> None:
        assert self._report is not None
        if text:
            self._report.final_text = text

    def _finish(self, status: RunStatus, reason: RunReason, error: str | None) -> AgentRunResult:
        assert self._report is not None
        self._status, self._reason, self._error = status, reason, error
        now = workflow.now()
        self._report.completed_at = now
        self._report.total_ms = _ms(now - self._report.started_at)
        self._report.reason = reason
        self._report.error = error
        return AgentRunResult(
            run_id=self._run_id,
            status=status,
            reason=reason,
            final_text=self._report.final_text,
            error=error,
            messages=self._messages[self._input_count :],
            usage=self._usage,
            report=self._report,
        )

    def _complete(self) -> AgentRunResult:
        return self._finish("completed", "done", None)

    def _fail(self, reason: RunReason, message: str) -> AgentRunResult:
        result = self._finish("failed", reason, message)
        # The run fails in Temporal (so it shows as Failed in the UI and CLI);
        # the full result rides along in the error's details.
        raise ApplicationError(
            f"agent run failed ({reason}): {message}",
            result,
            type=RUN_FAILED_ERROR_TYPE,
            non_retryable=True,
        )
