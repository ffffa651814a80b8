"""Provider lanes: the task queue a run's model calls go to.

A model call (activity ``call_model``) goes to ``<the run's queue>-llm-<lane>``,
the lane of its provider (``openai``, ``anthropic``, ``scripted``) unless the
spec names one (``AgentSpec.lane``: a model behind its own proxy or base URL,
a cheap model with a limit of its own). The Temporal server paces each lane
for the whole fleet with the queue's rate limit (``agentloop lanes set``).

Pure functions of the spec and the run's queue: the workflow decides the
queue with them, and replays decide the same; workers and ``agentloop lanes``
use them to name the queues they poll and show.
"""

from __future__ import annotations

import re

from agentloop.shared.base.errors import checked

#: What goes between the run's queue and the lane in a lane's queue name.
LANE_QUEUE_INFIX = "-llm-"

#: The lanes every models worker polls unless told otherwise: one per built-in provider.
KNOWN_LANES = ("openai", "anthropic", "scripted")

#: ``AgentSpec.lane`` saying: no lane, model calls on the run's own queue (as before lanes).
NO_LANE = ""

#: A model call that waited this long in its lane is a wait the step's
#: event and the run's report tell of (less is an ordinary dispatch).
LANE_WAIT_NOTICE_MS = 100.0

#: A lane's name: lower case letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit.
LANE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


def lane_problem(lane: str) -> str | None:
    """Why ``lane`` is not a lane name (:data:`LANE_NAME`), or None."""
    if LANE_NAME.match(lane):
        return None
    return (f"lane {lane!r} is not a lane name: use 1 to 63 lower-case letters, digits, '.', '_' "
            "or '-', starting with a letter or digit (e.g. 'openai', 'gpt-mini', 'proxy.eu')")


def spec_lane_problem(lane: str | None) -> str | None:
    """Why ``lane`` cannot be ``AgentSpec.lane``, or None: a lane name,
    None (the provider's lane) and :data:`NO_LANE` can."""
    return None if lane is None or lane == NO_LANE else lane_problem(lane)


def check_lane(lane: str) -> str:
    """``lane``, checked.

    Raises:
        ValueError: Not a lane name (:data:`LANE_NAME`).
    """
    return checked(lane, lane_problem)


def lane_of(model: str, lane: str | None = None) -> str | None:
    """The lane of a model call: ``lane`` when the spec names one, None
    when it says :data:`NO_LANE` (the run's own queue), else the provider of
    ``model`` (``provider:model``)."""
    if lane is not None:
        return lane or None
    provider, sep, _ = model.partition(":")
    return provider if sep and provider else None


def lane_wait(lane: str | None, queue_wait_ms: float | None) -> float | None:
    """How long a model call waited in its lane, rounded to the millisecond,
    when it went to one and waited at least :data:`LANE_WAIT_NOTICE_MS`; else None."""
    if lane is None or queue_wait_ms is None or queue_wait_ms < LANE_WAIT_NOTICE_MS:
        return None
    return round(queue_wait_ms, 0)


def lane_queue(task_queue: str, lane: str) -> str:
    """The task queue of ``lane`` for runs on ``task_queue``."""
    return f"{task_queue}{LANE_QUEUE_INFIX}{lane}"


def lane_in_queue(task_queue: str, queue: str) -> str | None:
    """The lane whose queue ``queue`` is, for runs on ``task_queue``; None
    when it is not one of theirs."""
    prefix = task_queue + LANE_QUEUE_INFIX
    return queue[len(prefix):] if queue.startswith(prefix) and len(queue) > len(prefix) else None


def lane_of_queue(queue: str) -> str | None:
    """The lane a task queue serves (what follows its last
    :data:`LANE_QUEUE_INFIX`), or None for a queue that is no lane's."""
    _, infix, lane = queue.rpartition(LANE_QUEUE_INFIX)
    return lane if infix and lane else None


def parse_lanes(text: str) -> tuple[str, ...]:
    """Lanes from a comma-separated list (``--lanes``, ``AGENTLOOP_LANES``);
    ``all`` (or nothing) stands for :data:`KNOWN_LANES`, and ``all,proxy``
    for those and ``proxy``; ``none`` for no lane at all.

    Raises:
        ValueError: A name that is not a lane name.
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    if names == ["none"]:
        return ()
    lanes: list[str] = []
    for name in names or ["all"]:
        for lane in KNOWN_LANES if name == "all" else (check_lane(name),):
            if lane not in lanes:
                lanes.append(lane)
    return tuple(lanes)
