"""What :class:`~agentloop.workers.plugin.AgentLoopPlugin` checks and builds
before it configures anything: the worker's role, a tools worker's
environment, the data converter, the payload codec and the workflow runner.
Importable from :mod:`agentloop.workers.plugin` too.
"""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import DataConverter, DefaultPayloadConverter, PayloadCodec
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agentloop.shared.base.encryption import codec_from_env
from agentloop.shared.base.errors import UserError
from agentloop.workers.config import WORKER_ROLES, provider_keys_in


def tool_task_queue(task_queue: str) -> str:
    """The queue a run on ``task_queue`` sends its tool activities to."""
    from agentloop.shared.base.contracts import TOOL_QUEUE_SUFFIX

    return task_queue + TOOL_QUEUE_SUFFIX


def check_role(role: str) -> str:
    """``role``, checked.

    Raises:
        UserError: Not one of :data:`~agentloop.workers.config.WORKER_ROLES`.
    """
    if role not in WORKER_ROLES:
        raise UserError(f"worker role {role!r} is not one of {', '.join(WORKER_ROLES)} "
                        "(--role or AGENTLOOP_WORKER_ROLE)")
    return role


def check_tools_environment(environ: dict[str, str] | None = None) -> None:
    """Refuse to run tools in a process that holds provider keys.

    Dropping them from ``os.environ`` would not do: ``/proc/<pid>/environ``
    keeps showing what the process started with.

    Raises:
        UserError: One of :data:`~agentloop.workers.config.PROVIDER_KEY_VARIABLES` is set.
    """
    present = provider_keys_in(environ)
    if present:
        raise UserError(
            f"a tools worker must not hold provider keys, but {', '.join(present)} "
            f"{'is' if len(present) == 1 else 'are'} set in its environment; start it without them "
            f"(e.g. env -u {' -u '.join(present)} agentloop worker --role tools), and give the keys "
            "to the models worker only"
        )


def data_converter(converter: DataConverter | None) -> DataConverter:
    """The data converter agentloop needs, from the one a client or replayer has.

    Temporal's default becomes ``pydantic_data_converter``; a converter with
    the default payload converter and a codec or failure converter of its own
    keeps them, with the pydantic payload converter; one whose payload
    converter is pydantic's (or a subclass) is kept as it is.

    Raises:
        UserError: The converter has a payload converter of its own that is
            not pydantic's: agentloop's models would not survive it.
    """
    if converter is None or converter is DataConverter.default:
        return pydantic_data_converter
    payload_class = converter.payload_converter_class
    if payload_class is DefaultPayloadConverter:
        return dataclasses.replace(converter, payload_converter_class=PydanticPayloadConverter)
    if issubclass(payload_class, PydanticPayloadConverter):
        return converter
    raise UserError(
        f"agentloop needs temporalio.contrib.pydantic.pydantic_data_converter, but this client's data "
        f"converter uses the payload converter {payload_class.__module__}.{payload_class.__qualname__}; "
        "leave data_converter unset (AgentLoopPlugin sets it), pass pydantic_data_converter, or make "
        "your payload_converter_class subclass temporalio.contrib.pydantic.PydanticPayloadConverter"
    )


def plugin_codec(codec: PayloadCodec | bool | None) -> PayloadCodec | None:
    """The codec of ``AgentLoopPlugin(codec=...)``: the one given, the
    environment's (None), or none (False).

    Raises:
        UserError: ``True``, or malformed keys in the environment.
    """
    if codec is None:
        return codec_from_env()
    if codec is False:
        return None
    if not isinstance(codec, PayloadCodec):
        raise UserError(f"AgentLoopPlugin(codec=...) takes a temporalio.converter.PayloadCodec, None (from "
                        f"AGENTLOOP_ENCRYPTION_KEYS) or False (none), not {codec!r}")
    return codec


def workflow_runner(runner: WorkflowRunner | None = None) -> WorkflowRunner:
    """``runner`` (a new ``SandboxedWorkflowRunner`` when None) with the
    ``agentloop`` package passed through the sandbox.

    Passed through, agentloop is imported once, outside the sandbox: its
    workflow code is deterministic and keeps no module state, and one class
    identity for its pydantic models is what the data converter needs. A
    user's own sandbox restrictions are kept; a runner that is not sandboxed
    is returned as it is.
    """
    if runner is None:
        runner = SandboxedWorkflowRunner()
    if isinstance(runner, SandboxedWorkflowRunner):
        return dataclasses.replace(runner, restrictions=runner.restrictions.with_passthrough_modules("agentloop"))
    return runner
