"""Scheduled agents: what a schedule's firing starts, and the options of a
schedule, as data (``AgentClient.schedules``, ``agentloop schedule``).

A schedule is a Temporal Schedule. Each firing starts an agent run
(``AgentRunWorkflow``), or, for a schedule that feeds a thread, a tiny
``AgentScheduleFeed`` workflow that sends the firing's input to the thread as
its next message (starting the thread at the first firing), so the agent
sees what it did last time and the thread's double-texting strategy applies
to a firing that arrives while the last one is still answered. Temporal
appends the firing time to the workflow id it starts: a firing's run id is
``<schedule name>-<firing time>``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from agentloop.shared.base.messages import Message
from agentloop.shared.definition.spec import AgentSpec, DoubleTexting
from agentloop.shared.runs.run import AgentRunInput
from agentloop.shared.runs.search_attributes import AGENT_SCHEDULE, AGENT_THREAD, start_search_attributes
from agentloop.shared.runs.threads import ThreadOptions

#: What happens to a firing while the schedule's last run still runs.
OverlapPolicy = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"]

#: What a schedule's name may be (it starts its runs' ids).
SCHEDULE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,99}$")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, what: str = "--every") -> timedelta:
    """``30s``, ``15m``, ``1h``, ``1d``, ``1h30m`` as a timedelta.

    Raises:
        ValueError: Not such a duration, or zero.
    """
    parts = re.findall(r"(\d+)\s*([smhd])", text.strip().lower())
    if not parts or re.sub(r"\s*(\d+)\s*([smhd])\s*", "", text.strip().lower()):
        raise ValueError(f"{what} {text!r} is not a duration; write it as a number and a unit "
                         "(s, m, h, d), e.g. 30s, 15m, 1h, 1d or 1h30m")
    seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"{what} {text!r} is zero; give a positive duration, e.g. 1h")
    return timedelta(seconds=seconds)


def check_name(name: str) -> str:
    """A schedule's name, checked.

    Raises:
        ValueError: It is not 1-100 letters, digits, ``.``, ``_`` or ``-``.
    """
    if not SCHEDULE_NAME.match(name):
        raise ValueError(f"schedule name {name!r} is not allowed: use 1-100 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit (it starts the id of every run it fires)")
    return name


class ScheduleFeedInput(BaseModel):
    """The input of ``AgentScheduleFeed``: one firing of a schedule that feeds a thread.

    Attributes:
        schedule: The schedule's name.
        thread_id: The thread it feeds.
        spec: The agent; starts the thread at the first firing.
        text: The message each firing sends.
        strategy: The double-texting strategy of the thread (when the
            firing starts it) and of each message; None: the spec's.
        tenant: The thread's tenant when the firing starts it (the feed's
            workflow runs at its Priority, which the thread inherits).
    """

    model_config = ConfigDict(extra="forbid")

    schedule: str
    thread_id: str = Field(min_length=1)
    spec: AgentSpec
    text: str
    strategy: DoubleTexting | None = None
    tenant: str | None = None


class ScheduleFeedResult(BaseModel):
    """What a feeding firing did: ``started`` the thread, or sent it its next message."""

    thread_id: str
    started: bool


def thread_start(feed: ScheduleFeedInput) -> tuple[AgentRunInput, TypedSearchAttributes]:
    """The first run of a thread a schedule feeds: its input (the firing's
    message as turn 1), its start search attributes (with ``AgentThread``
    and ``AgentSchedule``)."""
    built = AgentRunInput(spec=feed.spec, messages=[Message.user(feed.text)],
                          thread=ThreadOptions(id=feed.thread_id, double_texting=feed.strategy), tenant=feed.tenant)
    pairs = [*start_search_attributes(feed.spec, feed.tenant).search_attributes,
             SearchAttributePair(AGENT_THREAD, feed.thread_id), SearchAttributePair(AGENT_SCHEDULE, feed.schedule)]
    return built, TypedSearchAttributes(pairs)


def ended_thread_message(feed: ScheduleFeedInput) -> str:
    """Why a firing could not feed its thread."""
    return (f"schedule {feed.schedule} feeds thread {feed.thread_id}, which has ended and takes no more messages; "
            f"delete the schedule, or create it again with another thread id")
