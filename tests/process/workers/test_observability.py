"""A worker process's telemetry: spans exported by OTLP to a local receiver
(real HTTP, OTLP protobuf decoded with opentelemetry-proto), its
Prometheus endpoint scraped during a run, JSON logs; the worker killed
mid-run and its successor replaying the run emit no span twice."""

from __future__ import annotations

import json
import re
import signal
import threading
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from agentloop import AgentClient, AgentRunFailed
from agentloop.shared.definition.pricing import Budget, ModelPrice
from agentloop.workers.metrics import free_local_port
from tests.helpers.agents import awaiting, spec
from tests.helpers.polling import eventually
from tests.helpers.runs import wait_state

FIXTURE = "tests.helpers.fixtures.telemetry_fixture"
PRICES = Budget(prices={"scripted:observed": ModelPrice(input_per_mtok=2.0, output_per_mtok=10.0)})


class OtlpReceiver:
    """``POST /v1/traces`` on localhost: keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            receiver.spans.append({
                                "name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                            })
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"].startswith(prefix)]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return response.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of ``name{labels}`` in a Prometheus scrape (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"^{name}(?:\{{(.*)\}})? (\S+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


@pytest.fixture
def receiver():
    r = OtlpReceiver()
    yield r
    r.httpd.shutdown()


def telemetry_env(receiver: OtlpReceiver, port: int) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100",
            "AGENTLOOP_METRICS_PORT": str(port), "AGENTLOOP_LOG_FORMAT": "json", "AGENTLOOP_LOG_LEVEL": "INFO"}


async def test_killed_worker_and_its_successor_emit_each_span_once_and_count_what_the_report_says(
    agent_client: AgentClient, spawn_worker, receiver: OtlpReceiver, workspace: Path
) -> None:
    first_port = free_local_port()
    first = spawn_worker(FIXTURE, **telemetry_env(receiver, first_port))
    run_spec = spec("scripted:observed", name="observer", tools=["note", "write_file"], default_permission="auto",
                    budget=PRICES, workspace=str(workspace))  # not the worker's directory (the checkout)
    handle = await agent_client.start(run_spec, "note, then write")
    await wait_state(handle, awaiting(), "the write waits for approval", timeout=60)
    # Steps 0 and 1 and the note call are exported before the worker dies.
    await eventually(lambda: len(receiver.named("chat ")) == 2 and len(receiver.named("execute_tool note")) == 1,
                     "the first worker's spans", timeout=30)
    before = scrape(first_port)
    assert sample(before, "agentloop_approvals_waiting") == 1
    assert sample(before, "agentloop_runs", status="awaiting_approval") == 1
    assert "temporal_" in before  # Temporal's runtime metrics on the same endpoint
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)

    second_port = free_local_port()
    second = spawn_worker(FIXTURE, **telemetry_env(receiver, second_port))
    await handle.approve("call_1_0")
    result = await handle.result()
    assert (workspace / "out.txt").read_text() == "x"
    after = scrape(second_port)
    second.send_signal(signal.SIGTERM)  # a clean stop exports what is buffered
    second.wait(timeout=60)

    runs = receiver.named("invoke_agent observer")
    assert len(runs) == 1
    spans = [s for s in receiver.spans if s["trace_id"] == runs[0]["trace_id"]]
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert sorted(s["attributes"]["agentloop.step"] for s in chats) == [0, 1, 2]
    tools = Counter(s["attributes"]["gen_ai.tool.call.id"] for s in spans if s["name"].startswith("execute_tool"))
    assert tools == {"call_0_0": 1, "call_1_0": 1}
    assert all(s["attributes"].get("gen_ai.agent.name") == "observer" for s in spans)
    assert sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in chats) == result.usage.input_tokens

    # Each worker counted what its activities did: together, the report.
    for direction, expected in (("input", result.usage.input_tokens), ("output", result.usage.output_tokens)):
        counted = sum(sample(text, "agentloop_llm_tokens_total", model="scripted:observed", direction=direction)
                      for text in (before, after))
        assert counted == expected, direction
    cost = sum(sample(text, "agentloop_llm_cost_usd_total", model="scripted:observed") for text in (before, after))
    assert result.report.total_cost_usd > 0 and abs(cost - result.report.total_cost_usd) < 1e-9
    assert sample(before, "agentloop_tool_calls_total", tool="note") == 1
    assert sample(after, "agentloop_tool_calls_total", tool="write_file") == 1
    assert sample(after, "agentloop_approvals_waiting") == 0
    assert sample(after, "agentloop_runs_ended_total", status="completed") == 1
    assert sample(after, "agentloop_tool_seconds_count", tool="write_file") == 1

    # JSON logs: the tool's line carries the run id, step and call id.
    lines = [json.loads(line) for line in spawn_worker.log.read_text().splitlines() if line.startswith("{")]
    noted = [line for line in lines if line["message"] == "noting a"]
    assert noted and noted[0]["run_id"] == handle.run_id and noted[0]["call_id"] == "call_0_0" and noted[0]["step"] == 0


async def test_a_failed_run_is_one_info_line_with_its_reason(
    agent_client: AgentClient, spawn_worker, receiver: OtlpReceiver
) -> None:
    worker = spawn_worker(FIXTURE, **telemetry_env(receiver, free_local_port()))
    handle = await agent_client.start(spec("scripted:endless", name="looper", tools=["note"], max_steps=1), "go")
    with pytest.raises(AgentRunFailed):
        await handle.result()
    await eventually(lambda: receiver.named("invoke_agent looper"), "the failed run's span", timeout=30)
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=60)
    text = spawn_worker.log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    failed = [line for line in lines if line["message"].startswith(f"run {handle.run_id} failed")]
    assert len(failed) == 1, failed
    assert failed[0]["level"] == "INFO" and failed[0]["reason"] == "max_steps" and failed[0]["run_id"] == handle.run_id
    assert "Traceback" not in text  # tracebacks go to DEBUG, which this worker does not show
    span = receiver.named("invoke_agent looper")[0]
    assert span["attributes"]["error.type"] == "max_steps"
