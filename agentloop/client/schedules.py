"""Scheduled agents on Temporal Schedules (``AgentClient.schedules``,
``agentloop schedule``; docs/schedules.md).

A schedule fires on a cron expression or an interval; each firing starts an
agent run with the same input, or sends that input as the next message of
one thread (``thread_id``), so the agent sees what it did last time. The
Temporal Schedule does the rest: overlap policy, catch-up window, jitter,
time zone, pause, trigger, backfill, and the Temporal UI shows it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from agentloop.shared.base import contracts
from agentloop.shared.base.errors import UserError
from agentloop.shared.base.priority import run_priority, tenant_problem, with_tenant
from agentloop.shared.definition.spec import AgentSpec, DoubleTexting
from agentloop.shared.runs.run import run_input
from agentloop.shared.runs.schedules import OverlapPolicy, ScheduleFeedInput, check_name, parse_duration
from agentloop.shared.runs.search_attributes import AGENT_SCHEDULE, start_search_attributes

_OVERLAP = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}
_OVERLAP_NAMES = {v: k for k, v in _OVERLAP.items()}

#: The schedule's memo keys: the thread it feeds, and when it fires as
#: given (the server keeps a cron expression as a calendar).
THREAD_MEMO = "agentloop_thread"
WHEN_MEMO = "agentloop_when"


class ScheduleSummary(BaseModel):
    """What ``describe`` and ``list`` say of a schedule.

    Attributes:
        name: The schedule's name (its Temporal schedule id).
        when: Its cron expressions and intervals, in words.
        paused: Whether it is paused; ``note`` says why, when one was given.
        overlap: Its overlap policy.
        thread_id: The thread it feeds; None when each firing starts a run.
        agent: The agent's name and model.
        next_runs: When it fires next.
        recent_runs: The run ids of its latest firings (for a thread, the
            feeding workflows' ids), oldest first.
        running: The run ids of its firings still running.
        fired: Firings so far; ``skipped_overlap``: firings skipped because
            the last one still ran.
    """

    name: str
    when: list[str] = Field(default_factory=list)
    paused: bool = False
    note: str = ""
    overlap: str = "skip"
    thread_id: str | None = None
    agent: str = ""
    next_runs: list[datetime] = Field(default_factory=list)
    recent_runs: list[str] = Field(default_factory=list)
    running: list[str] = Field(default_factory=list)
    fired: int = 0
    skipped_overlap: int = 0


def _overlap(policy: str) -> ScheduleOverlapPolicy:
    try:
        return _OVERLAP[policy.replace("-", "_")]
    except KeyError:
        raise UserError(f"unknown overlap policy {policy!r}; use one of {', '.join(_OVERLAP)}") from None


def _duration(value: timedelta | str | None, what: str) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    try:
        return parse_duration(value, what)
    except ValueError as exc:
        raise UserError(str(exc)) from None


class AgentSchedules:
    """``AgentClient.schedules``: create, list, describe, pause, unpause,
    trigger, backfill and delete schedules of agent runs."""

    def __init__(self, temporal: Client, task_queue: str) -> None:
        self._temporal = temporal
        self._task_queue = task_queue

    def handle(self, name: str) -> ScheduleHandle:
        """The Temporal handle of schedule ``name``, for anything not wrapped here."""
        return self._temporal.get_schedule_handle(name)

    async def create(
        self,
        name: str,
        spec: AgentSpec,
        input: str,
        *,
        cron: str | None = None,
        every: timedelta | str | None = None,
        overlap: OverlapPolicy | str = "skip",
        catchup_window: timedelta | str | None = None,
        jitter: timedelta | str | None = None,
        time_zone: str | None = None,
        thread_id: str | None = None,
        double_texting: DoubleTexting | None = None,
        paused: bool = False,
        note: str | None = None,
        tenant: str | None = None,
    ) -> ScheduleSummary:
        """Create schedule ``name``: on ``cron`` (five fields, e.g.
        ``0 7 * * 1-5``) or ``every`` (``1h``, ``15m``, a timedelta), each
        firing starts a run of ``spec`` on ``input``, whose run id is
        ``<name>-<firing time>`` and whose ``AgentSchedule`` search attribute
        is ``name``. With ``thread_id``, each firing sends ``input`` as the
        next message of that thread instead (started at the first firing;
        ``double_texting`` applies when a firing arrives while the thread
        still answers the last one).

        Args:
            overlap: While a firing's run still runs: ``skip`` (default),
                ``buffer_one``, ``buffer_all``, ``cancel_other``,
                ``terminate_other`` or ``allow_all``.
            catchup_window: How late a missed firing (the server was down)
                may still start; Temporal's default (a year) when None.
            jitter: Each firing is delayed by a random time up to this.
            time_zone: An IANA name (``Europe/Paris``) the cron is read in; UTC when None.
            paused: Create it paused (``note`` says why).
            tenant: Whose runs the firings start (docs/many-tenants.md): each
                run's (or the fed thread's) fairness key next to
                ``spec.priority``, and its ``AgentTenant``.

        Raises:
            UserError: A bad name, neither or both of ``cron`` and ``every``,
                a bad duration, overlap policy, cron expression or time
                zone, or a schedule of that name already exists.
        """
        try:
            check_name(name)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        if problem := tenant_problem(tenant):
            raise UserError(problem)
        if (cron is None) == (every is None):
            raise UserError("a schedule needs exactly one of cron (e.g. '0 7 * * *') and every (e.g. '1h')")
        when = ScheduleSpec(cron_expressions=[cron] if cron else [],
                            intervals=[ScheduleIntervalSpec(every=interval)]
                            if (interval := _duration(every, "every")) else [],
                            jitter=_duration(jitter, "jitter"), time_zone_name=time_zone)
        schedule = Schedule(
            action=self._action(name, spec, input, thread_id, double_texting, tenant),
            spec=when,
            policy=SchedulePolicy(overlap=_overlap(overlap), catchup_window=_duration(catchup_window, "catch-up window")
                                  or timedelta(days=365)),
            state=ScheduleState(paused=paused, note=note or ""),
        )
        try:
            given = f"cron {cron}" if cron else f"every {when.intervals[0].every}"
            memo = {WHEN_MEMO: given, **({THREAD_MEMO: thread_id} if thread_id else {})}
            await self._temporal.create_schedule(name, schedule, memo=memo)
        except ScheduleAlreadyRunningError:
            raise UserError(f"a schedule named {name} already exists; delete it first "
                            f"(agentloop schedule delete {name}) or choose another name") from None
        except RPCError as err:
            raise _rpc_sentence(name, err, cron=cron, time_zone=time_zone) from None
        return await self.describe(name)

    def _action(self, name: str, spec: AgentSpec, input: str, thread_id: str | None,
                double_texting: DoubleTexting | None, tenant: str | None = None) -> ScheduleActionStartWorkflow:
        queue, summary = self._task_queue, f"{spec.name} on {spec.model}, schedule {name}"
        # The firing's workflow runs at the run's Priority; a thread the feed
        # starts inherits it.
        priority = run_priority(spec.priority, tenant)
        if thread_id is not None:
            feed = ScheduleFeedInput(schedule=name, thread_id=thread_id, spec=spec, text=input,
                                     strategy=double_texting, tenant=tenant)
            attributes = TypedSearchAttributes([SearchAttributePair(AGENT_SCHEDULE, name)])
            return ScheduleActionStartWorkflow(contracts.SCHEDULE_FEED_WORKFLOW_NAME, feed, id=name, task_queue=queue,
                                               typed_search_attributes=attributes, static_summary=summary,
                                               priority=priority)
        pairs = [*start_search_attributes(spec, tenant).search_attributes, SearchAttributePair(AGENT_SCHEDULE, name)]
        return ScheduleActionStartWorkflow(contracts.WORKFLOW_NAME, with_tenant(run_input(spec, input), tenant),
                                           id=name, task_queue=queue,
                                           typed_search_attributes=TypedSearchAttributes(pairs),
                                           static_summary=summary, priority=priority)

    async def describe(self, name: str) -> ScheduleSummary:
        """What schedule ``name`` is and did.

        Raises:
            UserError: No such schedule.
        """
        try:
            description = await self.handle(name).describe()
        except RPCError as err:
            raise _rpc_sentence(name, err) from None
        return await _summary(description)

    async def list(self) -> list[ScheduleSummary]:
        """Every schedule of agent runs in the namespace (schedules of other
        workflows left out), by name. The list comes from Temporal's
        visibility store: a schedule just created may take a moment to show."""
        found: list[ScheduleSummary] = []
        async for entry in await self._temporal.list_schedules():
            action = entry.schedule.action if entry.schedule else None
            workflow = getattr(action, "workflow", None)
            if workflow in (contracts.WORKFLOW_NAME, contracts.SCHEDULE_FEED_WORKFLOW_NAME):
                try:
                    found.append(await self.describe(entry.id))
                except UserError:
                    continue  # deleted meanwhile
        return sorted(found, key=lambda s: s.name)

    async def pause(self, name: str, note: str | None = None) -> None:
        """Stop firing until :meth:`unpause` (``note`` says why, in describe and the Temporal UI)."""
        await self._call(name, lambda h: h.pause(note=note or "paused with agentloop"))

    async def unpause(self, name: str, note: str | None = None) -> None:
        """Fire again."""
        await self._call(name, lambda h: h.unpause(note=note or "unpaused with agentloop"))

    async def trigger(self, name: str, *, overlap: OverlapPolicy | str | None = None) -> None:
        """Fire now, once (the schedule's overlap policy unless ``overlap`` says otherwise)."""
        policy = _overlap(overlap) if overlap else None
        await self._call(name, lambda h: h.trigger(overlap=policy))

    async def backfill(self, name: str, start: datetime, end: datetime, *,
                       overlap: OverlapPolicy | str | None = "allow_all") -> None:
        """Fire now for every firing time between ``start`` and ``end`` (each
        run's id carries the firing time it stands for)."""
        if end <= start:
            raise UserError(f"backfill of {name}: the end ({end.isoformat()}) must come after the start "
                            f"({start.isoformat()})")
        policy = _overlap(overlap) if overlap else None
        await self._call(name, lambda h: h.backfill(ScheduleBackfill(start_at=start, end_at=end, overlap=policy)))

    async def delete(self, name: str) -> None:
        """Delete the schedule (runs it started go on)."""
        await self._call(name, lambda h: h.delete())

    async def _call(self, name: str, action: Any) -> None:
        try:
            await action(self.handle(name))
        except RPCError as err:
            raise _rpc_sentence(name, err) from None


async def _summary(d: ScheduleDescription) -> ScheduleSummary:
    spec, action = d.schedule.spec, d.schedule.action
    memo = await d.memo()
    given = memo.get(WHEN_MEMO)
    when = [given] if isinstance(given, str) else [f"cron {c}" for c in spec.cron_expressions] + \
        [f"every {i.every}" for i in spec.intervals] + [f"calendar {c}" for c in spec.calendars]
    if spec.time_zone_name:
        when = [f"{w} ({spec.time_zone_name})" for w in when]
    args = getattr(action, "args", None) or []
    agent, thread_id = "", memo.get(THREAD_MEMO)
    if args:
        raw = args[0]
        try:
            data = json.loads(raw.data) if hasattr(raw, "data") else raw
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        spec_data = data.get("spec") if isinstance(data.get("spec"), dict) else {}
        agent = f"{spec_data.get('name', 'agent')} on {spec_data.get('model', '?')}" if spec_data else ""
    return ScheduleSummary(
        name=d.id, when=when, paused=d.schedule.state.paused, note=d.schedule.state.note or "",
        overlap=_OVERLAP_NAMES.get(d.schedule.policy.overlap, str(d.schedule.policy.overlap)),
        thread_id=thread_id, agent=agent, next_runs=list(d.info.next_action_times[:5]),
        recent_runs=[getattr(a.action, "workflow_id", "") for a in d.info.recent_actions],
        running=[getattr(a, "workflow_id", "") for a in d.info.running_actions],
        fired=d.info.num_actions, skipped_overlap=d.info.num_actions_skipped_overlap,
    )


def _rpc_sentence(name: str, err: RPCError, *, cron: str | None = None, time_zone: str | None = None) -> UserError:
    """A server's refusal as one sentence saying what to do."""
    message = err.message
    if err.status == RPCStatusCode.NOT_FOUND:
        return UserError(f"no schedule named {name}; `agentloop schedule list` shows the schedules")
    if err.status == RPCStatusCode.INVALID_ARGUMENT:
        lowered = message.lower()
        if cron is not None and ("cron" in lowered or "spec" in lowered or "invalid" in lowered) \
                and "time zone" not in lowered and "timezone" not in lowered:
            return UserError(f"schedule {name}: the cron expression {cron!r} is not valid ({message}); write five "
                             "fields, minute hour day-of-month month day-of-week, e.g. '0 7 * * 1-5' (07:00 on "
                             "weekdays)")
        if time_zone is not None:
            return UserError(f"schedule {name}: the server refused it ({message}); check the time zone "
                             f"{time_zone!r} is an IANA name such as 'Europe/Paris'")
        return UserError(f"schedule {name}: the server refused it ({message})")
    return UserError(f"schedule {name}: {message}")
