"""Worker versioning, decided: when a run moves to the deployment's current
version (``AgentSpec.upgrade``, docs/deploying.md).

A run on a versioned worker is pinned: it finishes on the Worker Deployment
Version it started on. A thread (or a run whose spec says
``upgrade="at_turn_boundary"``) moves to the current version at a turn
boundary, by continuing as new with Temporal's auto-upgrade: the new run
starts on the current version, then is pinned there. Pure decisions here;
``agentloop.workflows.effects.upgrade`` does the asking and the moving.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

#: The local activity that asks the server for a deployment's current version.
TARGET_VERSION_ACTIVITY = "current_deployment_version"


class TargetVersionInput(BaseModel):
    """What the ``current_deployment_version`` local activity is asked.

    Attributes:
        deployment_name: The run's Worker Deployment.
    """

    deployment_name: str


class TargetVersionResult(BaseModel):
    """The deployment's routing, as the server said.

    Attributes:
        current_build_id: The current version's build id; None when the
            current version is unversioned workers, or the server would not say.
        ramping_build_id: The ramping version's, if any.
        ramping_percentage: Its share of new runs.
    """

    current_build_id: str | None = None
    ramping_build_id: str | None = None
    ramping_percentage: float = 0.0


@dataclass(frozen=True)
class Stay:
    """The run goes on on its version."""

    why: str


@dataclass(frozen=True)
class MoveOn:
    """The run continues as new on the current version."""

    to_build_id: str


UpgradeDecision = Stay | MoveOn


def decide_upgrade(*, policy: str, build_id: str | None, target_changed: bool,
                   current: TargetVersionResult | None) -> UpgradeDecision:
    """Whether a run at a turn boundary moves on.

    Args:
        policy: The spec's upgrade policy (``pinned`` or ``at_turn_boundary``).
        build_id: The version this run runs on; None on an unversioned worker.
        target_changed: Temporal said the run's target version changed
            (servers that send it).
        current: The deployment's routing, when asked; None when not asked
            or the server would not say.
    """
    if build_id is None:
        return Stay("unversioned worker")
    if policy != "at_turn_boundary":
        return Stay("pinned")
    if current is not None and current.current_build_id and current.current_build_id != build_id:
        return MoveOn(current.current_build_id)
    if target_changed:
        return MoveOn(current.current_build_id if current and current.current_build_id else "")
    return Stay("on the current version")
