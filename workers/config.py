"""Connection settings from the environment, shared by client, worker and CLI.

Where Temporal is and how to reach it come from Temporal's own environment
configuration (:mod:`temporalio.envconfig`), read the way the ``temporal`` CLI
reads it: ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``,
``TEMPORAL_TLS`` and ``TEMPORAL_TLS_*``, ``TEMPORAL_GRPC_META_*``, over the
profile ``TEMPORAL_PROFILE`` (default ``default``) of the TOML file
``TEMPORAL_CONFIG_FILE`` (default ``temporal.toml`` in the user's config
directory, e.g. ``~/.config/temporalio/temporal.toml``). What runs where is
agentloop's own: ``AGENTLOOP_TASK_QUEUE``, ``AGENTLOOP_IMPORTS``,
``AGENTLOOP_WORKER_ROLE``, and a versioned worker's ``AGENTLOOP_DEPLOYMENT_NAME``
and ``AGENTLOOP_BUILD_ID`` (Temporal Worker Deployment versioning,
docs/deploying.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop.activities.provider_keys import PROVIDER_KEY_VARIABLES
from agentloop.shared.base.errors import UserError

if TYPE_CHECKING:
    from temporalio.client import Client

DEFAULT_TASK_QUEUE = "agentloop"

#: What a worker process runs (``agentloop worker --role``, ``AGENTLOOP_WORKER_ROLE``):
#: ``models`` polls the run's task queue (the workflow and ``call_model``),
#: ``tools`` polls ``<task queue>-tools`` (``resolve_tools`` and
#: ``execute_tool``), ``all`` both, in one process.
WORKER_ROLES = ("all", "models", "tools")


def lanes_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The provider lanes a worker of role ``all`` or ``models`` polls
    (``AGENTLOOP_LANES``, comma-separated; ``all``, the default, for the
    built-in providers' lanes; ``none`` for none), see
    :func:`agentloop.shared.definition.lanes.parse_lanes`.

    Raises:
        UserError: A name that is not a lane name.
    """
    from agentloop.shared.definition.lanes import parse_lanes

    env = os.environ if environ is None else environ
    try:
        return parse_lanes(env.get("AGENTLOOP_LANES", ""))
    except ValueError as exc:
        raise UserError(f"{exc} (--lanes or AGENTLOOP_LANES)") from None

@dataclass
class TemporalConfig:
    """Where Temporal is, how to reach it, and which task queue runs agents.

    Attributes:
        address: ``host:port`` of the Temporal frontend; None means "start the
            embedded dev server" for CLI commands that can.
        namespace: Temporal namespace.
        task_queue: Task queue the workers poll and runs are started on.
        imports: Modules a worker imports to register tools and scripted models.
        role: What a worker runs: ``all`` (default), ``models`` or ``tools``
            (see :data:`WORKER_ROLES`).
        connect_options: Further keyword arguments of
            ``temporalio.client.Client.connect`` for ``address``: ``tls``,
            ``api_key``, ``rpc_metadata``, from Temporal's environment
            configuration. Holds secrets: never printed or logged.
        source: Where ``address`` came from, for messages
            (``TEMPORAL_ADDRESS``, or the profile and its file).
        deployment_name: The Worker Deployment a versioned worker belongs
            to (``AGENTLOOP_DEPLOYMENT_NAME``); empty: an unversioned worker.
        build_id: The version of the code within it (``AGENTLOOP_BUILD_ID``).
    """

    address: str | None = None
    namespace: str = "default"
    task_queue: str = DEFAULT_TASK_QUEUE
    imports: list[str] = field(default_factory=list)
    role: str = "all"
    connect_options: dict[str, Any] = field(default_factory=dict, repr=False)
    source: str = "TEMPORAL_ADDRESS"
    deployment_name: str = ""
    build_id: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TemporalConfig:
        """Read Temporal's environment configuration (see the module's
        docstring), ``AGENTLOOP_TASK_QUEUE``, ``AGENTLOOP_IMPORTS``
        (comma-separated) and ``AGENTLOOP_WORKER_ROLE``; the role is checked
        where it is used.

        Raises:
            UserError: The configuration file or profile cannot be read, or a
                TLS file it names cannot be read.
        """
        env = os.environ if environ is None else environ
        options = temporal_connect_options(env)
        address = options.pop("target_host", None) or None
        namespace = options.pop("namespace", None) or "default"
        imports = [m.strip() for m in env.get("AGENTLOOP_IMPORTS", "").split(",") if m.strip()]
        source = "TEMPORAL_ADDRESS"
        if address and not env.get("TEMPORAL_ADDRESS"):
            source = f"profile {env.get('TEMPORAL_PROFILE') or 'default'!r} of {config_file_shown(env)}"
        return cls(
            address=address,
            namespace=namespace,
            task_queue=task_queue_from_env(env),
            imports=imports,
            role=(env.get("AGENTLOOP_WORKER_ROLE") or "all").strip().lower(),
            connect_options=options,
            source=source,
            deployment_name=(env.get("AGENTLOOP_DEPLOYMENT_NAME") or "").strip(),
            build_id=(env.get("AGENTLOOP_BUILD_ID") or "").strip(),
        )

    def deployment_version(self) -> tuple[str, str] | None:
        """``(deployment name, build id)`` of a versioned worker; None for an
        unversioned one (neither set).

        Raises:
            UserError: Only one of the two is set, or one holds a character
                Temporal refuses (``.`` in the name, whitespace).
        """
        return check_deployment_version(self.deployment_name, self.build_id)

    def describe_security(self) -> str:
        """How the connection is secured, in words without secrets:
        ``plaintext``, ``TLS``, ``mTLS``, each with ``+ API key`` when one is sent."""
        tls = self.connect_options.get("tls")
        if not tls:
            words = "plaintext"
        elif getattr(tls, "client_cert", None):
            words = "mTLS"
        else:
            words = "TLS"
        return words + (" + API key" if self.connect_options.get("api_key") else "")

    def for_address(self, address: str) -> TemporalConfig:
        """This configuration pointed at ``address`` (an embedded server),
        without TLS, API key or metadata."""
        return TemporalConfig(address=address, namespace=self.namespace, task_queue=self.task_queue,
                              imports=list(self.imports), role=self.role, source="the embedded server",
                              deployment_name=self.deployment_name, build_id=self.build_id)

    def for_dev_server(self, dev: Holder, environ: Mapping[str, str] | None = None) -> TemporalConfig:
        """This configuration pointed at a running ``agentloop dev``: its
        server, namespace and task queue (unless ``AGENTLOOP_TASK_QUEUE`` is set)."""
        env = os.environ if environ is None else environ
        config = self.for_address(dev.address)  # type: ignore[arg-type]
        config.namespace = dev.namespace or config.namespace
        if dev.task_queue and not env.get("AGENTLOOP_TASK_QUEUE"):
            config.task_queue = dev.task_queue
        config.source = f"the running {dev.describe()}"
        return config


# The embedded server's data directory ----------------------------------------------
#
# A command that starts the embedded server (``agentloop run`` or ``agentloop
# dev``) holds ``server.lock`` in the data directory for as long as the server
# runs; the lock file says which command holds it, and ``server.address`` holds
# the address. The CLI and AgentClient.connect find a running ``agentloop dev``
# here.

#: The file in the data directory that holds the embedded server's address
#: while a ``run`` or ``dev`` command keeps the server up.
ADDRESS_FILE = "server.address"

#: The data directory's lock file: held by the command that runs the embedded server.
LOCK_FILE = "server.lock"


def agentloop_home() -> Path:
    """Where the embedded server keeps its SQLite file and log (``$AGENTLOOP_HOME``)."""
    return Path(os.environ.get("AGENTLOOP_HOME") or Path.home() / ".agentloop")


@dataclass
class Holder:
    """The command that holds a data directory's lock, as its lock file says.

    Attributes:
        command: ``run`` or ``dev``; None when the file does not say (an
            older agentloop, or a command that is just starting).
        pid: That command's process id.
        address: Its server's address, once the server is up.
        namespace: Its server's namespace.
        task_queue: The task queue its worker polls.
        ui_url: Its server's web UI, when it runs one.
        workspace: Its worker's default workspace.
    """

    command: str | None = None
    pid: int | None = None
    address: str | None = None
    namespace: str | None = None
    task_queue: str | None = None
    ui_url: str | None = None
    workspace: str | None = None

    def describe(self) -> str:
        who = f"`agentloop {self.command}`" if self.command else "another agentloop command"
        return who + (f" (pid {self.pid})" if self.pid else "")


def lock_held(data_dir: Path) -> bool:
    """Whether a ``run`` or ``dev`` command holds the data directory's lock now."""
    try:
        lock = open(data_dir / LOCK_FILE, "a")  # noqa: SIM115
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        lock.close()  # closing releases the lock if we took it
    return False


def read_holder(data_dir: Path) -> Holder | None:
    """The command holding the data directory's lock; None when none does."""
    try:
        text = (data_dir / LOCK_FILE).read_text()
    except OSError:
        text = ""
    if not lock_held(data_dir):
        return None
    try:
        info = json.loads(text)
        fields = ("command", "pid", "namespace", "task_queue", "ui_url", "workspace")
        holder = Holder(**{k: info.get(k) for k in fields})
    except (ValueError, TypeError, AttributeError):  # written by an older agentloop, or being written
        holder = Holder()
    with contextlib.suppress(OSError):
        holder.address = (data_dir / ADDRESS_FILE).read_text().strip() or None
    return holder


def find_dev_server(data_dir: Path | None = None) -> Holder | None:
    """The ``agentloop dev`` serving the data directory (``$AGENTLOOP_HOME``),
    once its server is up; None when none is."""
    holder = read_holder(data_dir or agentloop_home())
    return holder if holder is not None and holder.command == "dev" and holder.address else None


#: The garbage collector's thresholds for a worker process of the ``agentloop`` command.
GC_THRESHOLD_VARIABLE = "AGENTLOOP_GC_THRESHOLD"


def gc_threshold_from_env(environ: Mapping[str, str] | None = None) -> tuple[int, ...] | None:
    """The collector thresholds a worker process of the ``agentloop`` command
    sets: ``AGENTLOOP_GC_THRESHOLD``, one to three whole numbers,
    comma-separated, as ``gc.set_threshold`` takes them; None (Python's own,
    700, 10, 10) when it is unset or ``python``.

    With hundreds of runs in flight, each holding a few hundred objects the
    collector tracks, Python's thresholds have it walk them all every few
    seconds; ``700,10,100`` walks them far less often (4 full collections
    against 29 in one measurement), CPU bought with memory (docs/performance.md).

    Raises:
        UserError: A value that is neither.
    """
    env = os.environ if environ is None else environ
    value = env.get(GC_THRESHOLD_VARIABLE, "").strip()
    if value.lower() in ("", "python"):
        return None
    parts = [part.strip() for part in value.split(",")]
    if not 1 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
        raise UserError(
            f"{GC_THRESHOLD_VARIABLE}={value!r} is not one to three whole numbers, comma-separated, as "
            "gc.set_threshold takes them (e.g. 700,10,100), nor 'python' (Python's own thresholds, the default)"
        )
    return tuple(int(part) for part in parts)


def check_deployment_version(deployment_name: str, build_id: str) -> tuple[str, str] | None:
    """``(deployment_name, build_id)`` when both are given, None when
    neither is (see :meth:`TemporalConfig.deployment_version`).

    Raises:
        UserError: One without the other, or a value Temporal refuses.
    """
    if not deployment_name and not build_id:
        return None
    if not deployment_name or not build_id:
        given, missing = (("--build-id", "--deployment-name (AGENTLOOP_DEPLOYMENT_NAME)") if build_id
                          else ("--deployment-name", "--build-id (AGENTLOOP_BUILD_ID)"))
        raise UserError(f"a versioned worker needs both a deployment name and a build id, but only {given} is "
                        f"set: set {missing} too, or neither for an unversioned worker")
    for label, value in (("deployment name", deployment_name), ("build id", build_id)):
        if any(c.isspace() for c in value) or len(value) > 255:
            raise UserError(f"the {label} {value!r} has whitespace or is over 255 characters; use letters, "
                            "digits, '-' and '_' (e.g. a git commit)")
    if "." in deployment_name:
        raise UserError(f"the deployment name {deployment_name!r} has a '.', which Temporal reserves to join "
                        "it with the build id; use '-' or '_' instead")
    return deployment_name, build_id


def task_queue_from_env(environ: Mapping[str, str] | None = None) -> str:
    """``AGENTLOOP_TASK_QUEUE``, or ``agentloop``."""
    env = os.environ if environ is None else environ
    return env.get("AGENTLOOP_TASK_QUEUE") or DEFAULT_TASK_QUEUE


def config_file_shown(environ: Mapping[str, str]) -> str:
    """The configuration file Temporal's environment configuration reads, for messages."""
    explicit = environ.get("TEMPORAL_CONFIG_FILE")
    if explicit:
        return explicit
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".config")
    return str(Path(base) / "temporalio" / "temporal.toml")


def temporal_connect_options(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``Client.connect`` keyword arguments (``target_host``, ``namespace``,
    ``api_key``, ``tls``, ``rpc_metadata``) from Temporal's environment
    configuration, as the ``temporal`` CLI reads it; TLS files are read here.

    Raises:
        UserError: The file or the profile cannot be read, or a TLS file is missing.
    """
    from temporalio.envconfig import ClientConfigProfile

    env = dict(os.environ if environ is None else environ)
    try:
        profile = ClientConfigProfile.load(override_env_vars=env)
    except RuntimeError as exc:  # the bridge's ConfigError: bad TOML, unknown profile
        reason = " ".join(str(exc).split())
        raise UserError(
            f"cannot read Temporal's client configuration ({config_file_shown(env)}, profile "
            f"{env.get('TEMPORAL_PROFILE') or 'default'!r}): {reason[:300]}; fix the file, or set "
            "TEMPORAL_CONFIG_FILE and TEMPORAL_PROFILE to one that exists"
        ) from None
    try:
        return dict(profile.to_client_connect_config())
    except OSError as exc:  # a TLS file named by TEMPORAL_TLS_*_PATH or the profile
        raise UserError(
            f"cannot read the TLS file {exc.filename}: {exc.strerror} (named by TEMPORAL_TLS_*_PATH or the "
            f"profile's tls settings in {config_file_shown(env)})"
        ) from None


async def connect_client(config: TemporalConfig, **options: Any) -> Client:
    """``Client.connect`` to ``config.address`` with its namespace, TLS, API
    key and gRPC metadata; ``options`` (``data_converter``, ``plugins``...)
    are passed on and win over the configuration. Given neither a data
    converter nor plugins, the client gets pydantic's data converter, with
    the payload encryption of ``AGENTLOOP_ENCRYPTION_KEYS`` when it is set.

    Raises:
        UserError: No address, or the connection failed; the message says
            where the address came from and what to check.
    """
    from temporalio.client import Client

    if not config.address:
        raise UserError("no Temporal address: set TEMPORAL_ADDRESS (or an address in a profile of "
                        "Temporal's temporal.toml)")
    if "data_converter" not in options and "plugins" not in options:
        from agentloop.shared.base.encryption import converter_from_env

        options["data_converter"] = converter_from_env()  # pydantic's, encrypting when keys are set
    kwargs: dict[str, Any] = {"namespace": config.namespace, **config.connect_options, **options}
    try:
        return await Client.connect(config.address, **kwargs)
    except RuntimeError as exc:  # the SDK's "Failed client connect: <transport error>"
        raise UserError(connect_failure(config, str(exc))) from None


def connect_failure(config: TemporalConfig, error: str) -> str:
    """A sentence about a failed connection: what, where from, why, what to check."""
    reason, hint = _connect_reason(" ".join(error.split()), bool(config.connect_options.get("tls")))
    return (f"cannot connect to Temporal at {config.address} (from {config.source}; namespace "
            f"{config.namespace!r}, {config.describe_security()}): {reason}; {hint}")


def _connect_reason(error: str, tls: bool) -> tuple[str, str]:
    running = "check that the server is running and the address is right"
    if "Connection refused" in error:
        return "connection refused", running
    if "dns error" in error or "failed to lookup address" in error:
        return "the host name does not resolve", "check the address"
    if "UnknownIssuer" in error:
        return ("the server's TLS certificate is signed by an authority this client does not trust",
                "set TEMPORAL_TLS_SERVER_CA_CERT_PATH (or tls.server_ca_cert_path in the profile) to its CA")
    if "NotValidForName" in error or "certificate" in error.lower():
        match = re.search(r"InvalidCertificate\((\w+)", error)
        return (f"the server's TLS certificate was refused ({match.group(1) if match else 'invalid'})",
                "check TEMPORAL_TLS_SERVER_NAME and TEMPORAL_TLS_SERVER_CA_CERT_PATH")
    if "deadline" in error.lower() or "timed out" in error.lower():
        return "no answer in time", running
    short = error.removeprefix("Failed client connect: ")
    short = short if len(short) <= 200 else short[:197] + "..."
    if tls:
        hint = ("if the server wants a client certificate, set TEMPORAL_TLS_CLIENT_CERT_PATH and "
                "TEMPORAL_TLS_CLIENT_KEY_PATH; check the address")
    else:
        hint = ("if the server speaks TLS (Temporal Cloud does), set TEMPORAL_TLS=true, "
                "TEMPORAL_TLS_CLIENT_CERT_PATH/TEMPORAL_TLS_CLIENT_KEY_PATH or TEMPORAL_API_KEY; " + running)
    return short, hint


def provider_keys_in(environ: dict[str, str] | None = None) -> list[str]:
    """Names of :data:`PROVIDER_KEY_VARIABLES` set (non-empty) in the environment."""
    env = os.environ if environ is None else environ
    return [name for name in PROVIDER_KEY_VARIABLES if env.get(name)]
