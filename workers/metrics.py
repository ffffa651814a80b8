"""A worker's metrics in Prometheus's format: agentloop's own, and
Temporal's runtime metrics beside them on the same endpoint.

Needs ``prometheus-client`` (``pip install 'agentloop[telemetry]'``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import threading
import urllib.request
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from agentloop.shared.base.errors import UserError

log = logging.getLogger("agentloop.telemetry")

#: Seconds; LLM steps take seconds to minutes, tool calls milliseconds to minutes.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
#: A person answers in seconds to hours.
APPROVAL_WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600)
TERMINAL = ("completed", "stopped", "failed", "cancelled")
#: A model call waits in its lane for milliseconds (dispatch) to minutes (a rate-limited backlog).
LANE_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
#: ``1`` adds the tenant label to the lane and spend metrics (see :class:`AgentMetrics`).
TENANT_LABEL_ENV = "AGENTLOOP_METRICS_TENANT_LABEL"


def tenant_label_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``AGENTLOOP_METRICS_TENANT_LABEL`` asks for the tenant label (``1``, ``true``, ``yes``)."""
    env = os.environ if environ is None else environ
    return env.get(TENANT_LABEL_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class AgentMetrics:
    """agentloop's metrics, in a registry of their own (:attr:`registry`).

    Activity-side ones count what this worker's activities did; the
    workflow-side ones (approvals waiting, runs by status) what the runs
    this worker executes did, outside replays.

    Lane waits (``agentloop_lane_wait_seconds``, by lane) carry a ``tenant``
    label, and the spend of each tenant is counted
    (``agentloop_tenant_llm_cost_usd``), only with ``tenant_label`` (or
    ``AGENTLOOP_METRICS_TENANT_LABEL=1``): every label value is a time
    series of its own in Prometheus, and a fleet with thousands of tenants
    would make thousands of series per histogram bucket. The tenant is the
    run's fairness key (``activity.info().priority``).
    """

    def __init__(self, *, tenant_label: bool | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.tenant_label = tenant_label_from_env() if tenant_label is None else tenant_label
        self.lane_wait = Histogram("agentloop_lane_wait_seconds",
                                   "How long an LLM call waited in its provider lane's task queue before it started.",
                                   ["lane", "tenant"] if self.tenant_label else ["lane"],
                                   buckets=LANE_WAIT_BUCKETS, registry=r)
        self.tenant_cost = (Counter("agentloop_tenant_llm_cost_usd",
                                    "What LLM calls cost, in US dollars, by tenant (the run's fairness key).",
                                    ["tenant"], registry=r) if self.tenant_label else None)
        # Tenants' spend: by tenant only when asked (a label per tenant may be many series).
        self.tenant_tokens = Counter("agentloop_tenant_spend_tokens",
                                     "Tokens runs of tenants with a quota reported to their ledger (by tenant when "
                                     f"{TENANT_LABEL_ENV}=1, else tenant=\"\").", ["tenant"], registry=r)
        self.tenant_usd = Counter("agentloop_tenant_spend_usd",
                                  "US dollars runs of tenants with a quota reported to their ledger (by tenant when "
                                  f"{TENANT_LABEL_ENV}=1, else tenant=\"\").", ["tenant"], registry=r)
        self.tokens = Counter("agentloop_llm_tokens", "Tokens of LLM calls, by model and direction (input, output).",
                              ["model", "direction"], registry=r)
        self.cost = Counter("agentloop_llm_cost_usd", "What LLM calls cost, in US dollars, at the run's prices.",
                            ["model"], registry=r)
        self.llm_calls = Counter("agentloop_llm_calls", "LLM calls (steps) that answered, by model.", ["model"],
                                 registry=r)
        self.llm_latency = Histogram("agentloop_llm_step_seconds", "Duration of an LLM call attempt, by model.",
                                     ["model"], buckets=LATENCY_BUCKETS, registry=r)
        self.tool_calls = Counter("agentloop_tool_calls", "Tool calls run, by tool.", ["tool"], registry=r)
        self.tool_errors = Counter("agentloop_tool_errors", "Tool calls that returned an error, by tool.", ["tool"],
                                   registry=r)
        self.tool_latency = Histogram("agentloop_tool_seconds", "Duration of a tool call, by tool.", ["tool"],
                                      buckets=LATENCY_BUCKETS, registry=r)
        self.approval_wait = Histogram("agentloop_approval_wait_seconds",
                                       "How long a tool call waited for an operator's decision (not tool time).",
                                       buckets=APPROVAL_WAIT_BUCKETS, registry=r)
        self.approvals_waiting = Gauge("agentloop_approvals_waiting",
                                       "Tool calls waiting for an operator's approval in runs this worker executes.",
                                       registry=r)
        self.runs_live = Gauge("agentloop_runs", "Runs this worker executes, by live status.", ["status"], registry=r)
        self.runs_ended = Counter("agentloop_runs_ended", "Runs that ended on this worker, by status.", ["status"],
                                  registry=r)
        self._lock = threading.Lock()
        self._approvals: dict[str, set[str]] = {}
        self._status: dict[str, str] = {}
        self._statuses: set[str] = set()

    def model_call(self, model: str, input_tokens: int, output_tokens: int, cost: float | None,
                   seconds: float) -> None:
        self.llm_calls.labels(model).inc()
        self.tokens.labels(model, "input").inc(input_tokens)
        self.tokens.labels(model, "output").inc(output_tokens)
        if cost is not None:
            self.cost.labels(model).inc(cost)
        self.llm_latency.labels(model).observe(seconds)

    def lane_waited(self, lane: str, seconds: float, tenant: str = "", cost: float | None = None) -> None:
        """An LLM call of ``lane`` waited ``seconds`` in its queue; with the
        tenant label on, its tenant's spend counts ``cost`` too."""
        labels = (lane, tenant or "none") if self.tenant_label else (lane,)
        self.lane_wait.labels(*labels).observe(seconds)
        if self.tenant_cost is not None and cost is not None:
            self.tenant_cost.labels(tenant or "none").inc(cost)

    def tenant_spend(self, tenant: str, tokens: int, usd: float) -> None:
        """What a run of ``tenant`` reported to the tenant's quota ledger."""
        label = tenant if self.tenant_label else ""
        self.tenant_tokens.labels(label).inc(tokens)
        self.tenant_usd.labels(label).inc(usd)

    def tool_call(self, tool: str, *, error: bool, seconds: float) -> None:
        self.tool_calls.labels(tool).inc()
        if error:
            self.tool_errors.labels(tool).inc()
        self.tool_latency.labels(tool).observe(seconds)

    def run_event(self, event: Any) -> None:
        """Follow a run's event (from the workflow, outside replays)."""
        kind, run_id = getattr(event, "type", ""), event.run_id
        with self._lock:
            if kind == "agent.tool.approval.requested":
                self._approvals.setdefault(run_id, set()).add(event.approval.call_id)
            elif kind == "agent.tool.approval.resolved":
                self._approvals.get(run_id, set()).discard(event.call_id)
                if getattr(event, "waited_ms", None) is not None:
                    self.approval_wait.observe(event.waited_ms / 1000)
            elif kind == "agent.run.status.changed":
                if event.status in TERMINAL:
                    self._end(run_id, event.status)
                else:
                    self._status[run_id] = event.status
            elif kind == "agent.run.continued":
                self._status.pop(run_id, None)  # the next Temporal run says its status again
            self._refresh()

    def _end(self, run_id: str, status: str) -> None:
        self._approvals.pop(run_id, None)
        self._status.pop(run_id, None)
        self.runs_ended.labels(status).inc()

    def _refresh(self) -> None:
        self.approvals_waiting.set(sum(len(calls) for calls in self._approvals.values()))
        counts: dict[str, int] = {}
        for status in self._status.values():
            counts[status] = counts.get(status, 0) + 1
        self._statuses.update(counts)
        for status in self._statuses:  # statuses seen before, now at 0
            counts.setdefault(status, 0)
        for status, count in counts.items():
            self.runs_live.labels(status).set(count)


def free_local_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MetricsServer:
    """``GET /metrics`` on ``host:port``: :class:`AgentMetrics` and, when
    ``temporal_url`` is given (the Prometheus endpoint of Temporal's
    runtime), Temporal's metrics after them. A request whose ``Host`` is a
    name not allowed (:func:`metrics_host_refusal`) is 403.

    Raises:
        UserError: The port cannot be bound.
    """

    def __init__(self, metrics: AgentMetrics, port: int, *, host: str = "0.0.0.0",
                 temporal_url: str | None = None, allowed_hosts: Iterable[str] | None = None) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                refused = metrics_host_refusal(self.headers.get("Host"), server.allowed_hosts)
                if refused is not None:
                    self.send_error(403, "Host not allowed", refused)
                    return
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "only /metrics is served here")
                    return
                body = server.scrape()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.metrics, self.temporal_url = metrics, temporal_url
        self.allowed_hosts = metrics_allowed_hosts() if allowed_hosts is None else frozenset(allowed_hosts)
        try:
            self.httpd = ThreadingHTTPServer((host, port), Handler)
        except OSError as err:
            raise UserError(f"cannot serve metrics on port {port} ({err.strerror}): choose another with "
                            "--metrics-port or AGENTLOOP_METRICS_PORT") from None
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="agentloop metrics", daemon=True)

    def scrape(self) -> bytes:
        body = generate_latest(self.metrics.registry)
        if self.temporal_url:
            try:
                with urllib.request.urlopen(self.temporal_url, timeout=5) as response:
                    body += response.read()
            except OSError as err:
                log.warning("could not read Temporal's runtime metrics at %s: %s", self.temporal_url, err)
        return body

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


#: Host names, besides IP addresses, ``localhost`` and this machine's name,
#: that the metrics endpoint answers to (comma-separated).
METRICS_HOSTS_ENV = "AGENTLOOP_METRICS_ALLOWED_HOSTS"


def metrics_allowed_hosts(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The names of ``AGENTLOOP_METRICS_ALLOWED_HOSTS``, with ``localhost``
    and this machine's host name (a pod's, in Kubernetes)."""
    env = os.environ if environ is None else environ
    named = {h.strip().lower() for h in env.get(METRICS_HOSTS_ENV, "").split(",") if h.strip()}
    return frozenset(named | {"localhost", socket.gethostname().lower()})


def metrics_host_refusal(host: str | None, allowed: Iterable[str]) -> str | None:
    """Why a scrape with this ``Host`` header is refused, or None.

    A web page can read this endpoint only by DNS rebinding: its own name
    resolved to the worker's address, so its requests carry that name as
    ``Host``. An IP address (what Prometheus's Kubernetes discovery scrapes)
    and no ``Host`` at all are never such a page; a name must be allowed.
    """
    if not host:
        return None
    name = host.strip().lower()
    name = name[1:].partition("]")[0] if name.startswith("[") else name.rpartition(":")[0] if ":" in name else name
    try:
        ipaddress.ip_address(name)
        return None
    except ValueError:
        pass
    if name in allowed:
        return None
    return (f"this metrics endpoint answers to IP addresses, localhost and {', '.join(sorted(allowed))}, not "
            f"Host {host[:100]!r}; a scraper that names it otherwise: list the name in {METRICS_HOSTS_ENV}")
