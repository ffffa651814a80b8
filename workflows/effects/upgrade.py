"""Moving a run to its deployment's current version at a turn boundary
(``AgentSpec.upgrade``; decisions: ``agentloop.shared.base.versioning``).

On a versioned worker a run is pinned. A thread whose policy is
``at_turn_boundary`` asks, when its next message arrives and before the turn
begins, which version is current: Temporal's own signal
(``is_target_worker_deployment_version_changed``, on servers that send it)
or, else, a ``current_deployment_version`` local activity (a marker in
history, so replays read it). When another version is current, the run
continues as new with auto-upgrade (see :meth:`Handover.upgrade`), the
message still queued: the new run takes the turn on the new version.
Runs on unversioned workers, and pinned ones, make no command here.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkerDeploymentVersion
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentloop.shared.base.versioning import (
        TARGET_VERSION_ACTIVITY,
        MoveOn,
        TargetVersionInput,
        TargetVersionResult,
        UpgradeDecision,
        decide_upgrade,
    )
    from agentloop.workflows.patches import UPGRADE_PATCH

#: How long the local activity may take to ask the server.
ASK_TIMEOUT = timedelta(seconds=10)


def deployment_version() -> WorkerDeploymentVersion | None:
    """The Worker Deployment Version of the worker running this task; None
    on an unversioned worker (whose version, if any, names no deployment)."""
    version = workflow.info().get_current_deployment_version()
    return version if version is not None and version.deployment_name and version.build_id else None


async def upgrade_due(policy: str) -> UpgradeDecision:
    """Whether the run moves to another version now (see the module)."""
    version = deployment_version()
    build_id = version.build_id if version is not None else None
    changed = workflow.info().is_target_worker_deployment_version_changed()
    decision = decide_upgrade(policy=policy, build_id=build_id, target_changed=changed, current=None)
    if build_id is None or policy != "at_turn_boundary" or isinstance(decision, MoveOn):
        return decision
    if not workflow.patched(UPGRADE_PATCH):
        return decision
    assert version is not None
    try:
        current = await workflow.execute_local_activity(
            TARGET_VERSION_ACTIVITY, TargetVersionInput(deployment_name=version.deployment_name),
            result_type=TargetVersionResult, summary="current deployment version",
            start_to_close_timeout=ASK_TIMEOUT, retry_policy=RetryPolicy(maximum_attempts=2),
        )
    except (ActivityError, ApplicationError) as err:
        workflow.logger.warning("could not ask which version of %s is current (%s); staying on %s",
                                version.deployment_name, err.cause or err, build_id)
        return decision
    return decide_upgrade(policy=policy, build_id=build_id, target_changed=changed, current=current)
