"""The ``current_deployment_version`` local activity: a versioned run asks,
at a turn boundary, which version of its Worker Deployment is current
(``agentloop.shared.base.versioning``)."""

from __future__ import annotations

from temporalio import activity
from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest

from agentloop.shared.base.versioning import TARGET_VERSION_ACTIVITY, TargetVersionInput, TargetVersionResult


@activity.defn(name=TARGET_VERSION_ACTIVITY)
async def current_deployment_version(input: TargetVersionInput) -> TargetVersionResult:
    """The deployment's current and ramping versions, from the server
    (``DescribeWorkerDeployment``); a refusal (no such deployment, no
    permission) is raised, and the run stays where it is."""
    client = activity.client()
    answer = await client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=input.deployment_name)
    )
    routing = answer.worker_deployment_info.routing_config
    current = routing.current_deployment_version.build_id if routing.HasField("current_deployment_version") else ""
    ramping = routing.ramping_deployment_version.build_id if routing.HasField("ramping_deployment_version") else ""
    return TargetVersionResult(current_build_id=current or None, ramping_build_id=ramping or None,
                               ramping_percentage=routing.ramping_version_percentage)
