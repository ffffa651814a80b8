"""agentloop beside the other durable agent frameworks on Temporal, and the floor.

The same scripted agent run, against the same local mock LLM, on one dev
server of its own (fast polling: transfer/timer MaxPollRPS=1000), in one
process, the systems interleaved (each repetition measures each system in
turn, the order rotating) so the machine's noise hits all alike:

* floor: a hand-written loop of plain activities (``ChatFloor`` in
  ``floor_workflows.py``): per step one activity calls the mock with the
  ``openai`` SDK and the whole message list, one runs the tool;
* agentloop: ``AgentRunWorkflow`` on an ``AgentLoopPlugin`` worker, its
  OpenAI provider pointed at the mock (``OPENAI_BASE_URL``), ``echo``
  registered as a tool, deltas streamed (the default);
* agentloop+enc: the same with every payload encrypted (AES-256-GCM,
  :class:`~agentloop.shared.base.encryption.EncryptionCodec`, as
  ``AGENTLOOP_ENCRYPTION_KEYS`` sets it up); a line after the table gives its
  ratios to agentloop's medians: the cost of encryption;
* OpenAI Agents on Temporal and Pydantic AI's Temporal durability
  (``peer_systems/``), each as its docs set it up, when installed
  (``pip install -e ".[peers]"``); skipped with a note otherwise.

The mock (an OpenAI Chat Completions server, JSON and SSE, in a process of
its own) scripts every run: while the request holds fewer than S tool
results it asks for one ``echo`` call with a 200-character text, then it
answers "done". S comes from the model name (``mock-steps-S``) or the
``X-Mock-Steps`` header. A run is S+1 model calls and S tool calls; the mock
answers at once, so the figures are orchestration only.

Prints one table, medians over ``--reps``, each with its ratio to the floor's
median of the same run: throughput (``--concurrency`` runs of
``--burst-steps`` steps started at once, runs/s), workflow-task time per step
(the run's workflow tasks from Started to Completed, from the history's
server timestamps, at ``--steps``), wall time per step (one run at a time,
start to result, at ``--steps``), and the history's size at ``--steps`` (the
sum of its serialized events). Usage::

    python -m benchmarks.loop.peers [--steps 50] [--reps 5] [--concurrency 20] [--burst-steps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentloop import AgentClient, AgentSpec
from agentloop.shared.base.encryption import EncryptionCodec, with_codec
from agentloop.workers.devserver import DevServer, free_port, port_in_use
from agentloop.workers.worker import connect
from benchmarks.loop.agent_runs import bench_plugin
from benchmarks.loop.floor_workflows import PEER_SYSTEM_PROMPT, ChatFloor, ChatFloorActivities, peer_model_name

#: What installs the peers (pyproject's optional extra).
PEERS_INSTALL = 'pip install -e ".[peers]"'

# ---------------------------------------------------------------- the mock LLM

TOOL_TEXT = ("The quick brown fox jumps over the lazy dog. " * 5)[:185]
_STEPS_IN_MODEL = re.compile(r"mock-steps-(\d+)")


def mock_answer(body: dict[str, Any], steps: int) -> dict[str, Any]:
    """The assistant message for this conversation: one ``echo`` call while
    it holds fewer than ``steps`` tool results, then "done"."""
    done = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    if done >= steps:
        return {"role": "assistant", "content": "done"}
    arguments = json.dumps({"text": f"step {done:04d}: {TOOL_TEXT}"})
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{done:04d}", "type": "function",
                            "function": {"name": "echo", "arguments": arguments}}]}


def mock_chunks(base: dict[str, Any], message: dict[str, Any], usage: dict[str, int] | None) -> Iterator[bytes]:
    """``message`` as OpenAI's SSE stream of ``chat.completion.chunk`` events."""
    def event(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return b"data: " + json.dumps({**base, "object": "chat.completion.chunk", "choices": choices,
                                       **extra}).encode() + b"\n\n"

    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        arguments = call["function"]["arguments"]
        head = {"index": 0, "id": call["id"], "type": "function", "function": {"name": "echo", "arguments": ""}}
        yield event({"role": "assistant", "content": None, "tool_calls": [head]})
        piece = len(arguments) // 4 + 1
        for i in range(0, len(arguments), piece):
            yield event({"tool_calls": [{"index": 0, "function": {"arguments": arguments[i:i + piece]}}]})
        yield event({}, "tool_calls")
    else:
        yield event({"role": "assistant", "content": ""})
        yield event({"content": message["content"]})
        yield event({}, "stop")
    if usage is not None:
        yield event(None, usage=usage)
    yield b"data: [DONE]\n\n"


class _MockHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as against the real API

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        model = body.get("model", "mock")
        match = _STEPS_IN_MODEL.search(model)
        steps = int(self.headers.get("x-mock-steps") or (match.group(1) if match else 3))
        message = mock_answer(body, steps)
        prompt = len(json.dumps(body.get("messages") or [])) // 4
        usage = {"prompt_tokens": prompt, "completion_tokens": 16, "total_tokens": prompt + 16}
        base = {"id": "chatcmpl-mock", "created": 1_700_000_000, "model": model}
        if body.get("stream"):
            wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for chunk in mock_chunks(base, message, usage if wants_usage else None):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
            return
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        payload = json.dumps({**base, "object": "chat.completion", "usage": usage,
                              "choices": [{"index": 0, "message": message, "finish_reason": finish}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def serve_mock(port: int) -> None:
    """Serve the mock LLM on ``port`` until the process is stopped."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _MockHandler)
    server.daemon_threads = True
    server.serve_forever()


@contextlib.contextmanager
def mock_llm() -> Iterator[str]:
    """The mock LLM in a process of its own (as a provider is); its base URL.
    Stops that process, by its PID, on the way out."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.loop.peers", "--serve-mock", str(port)])
    try:
        deadline = time.monotonic() + 30
        while not port_in_use(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the mock LLM did not come up on port {port}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

# ---------------------------------------------------------------- the systems


@dataclass
class System:
    """One system under test: how to connect its client (with its plugins),
    build its worker, and start a run of ``steps`` tool steps."""

    name: str
    connect: Callable[[str, str], Any]  # (address, mock_url) -> awaitable Client
    worker: Callable[[Client, str, str], Worker]  # (client, task_queue, mock_url)
    start: Callable[[Client, str, int, str], Any]  # (client, task_queue, steps, run_id) -> awaitable handle


def floor_system() -> System:
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("benchmarks.loop.floor_workflows"))

    def worker(client: Client, queue: str, mock_url: str) -> Worker:
        acts = ChatFloorActivities(mock_url)
        return Worker(client, task_queue=queue, workflows=[ChatFloor], activities=[acts.call_model, acts.echo],
                      workflow_runner=runner)

    async def start(client: Client, queue: str, steps: int, run_id: str) -> WorkflowHandle:
        return await client.start_workflow(ChatFloor.run, steps, id=run_id, task_queue=queue)

    return System("floor", lambda address, mock_url: Client.connect(address), worker, start)


def agentloop_system(encrypted: bool = False) -> System:
    async def connect_agentloop(address: str, mock_url: str) -> Client:
        os.environ["OPENAI_BASE_URL"] = mock_url  # read by the OpenAI provider, as the README tells users
        os.environ["OPENAI_API_KEY"] = "mock"
        if encrypted:
            codec = EncryptionCodec([("bench", os.urandom(32))])
            return await Client.connect(address, data_converter=with_codec(pydantic_data_converter, codec))
        return await connect(address)

    async def start(client: Client, queue: str, steps: int, run_id: str) -> WorkflowHandle:
        spec = AgentSpec(model=f"openai:{peer_model_name(steps)}", system_prompt=PEER_SYSTEM_PROMPT,
                         tools=["echo"], default_permission="allow", max_steps=steps + 5)
        handle = await AgentClient(client, task_queue=queue).start(spec, "Run the benchmark script.", run_id=run_id)
        return handle.workflow_handle

    return System("agentloop+enc" if encrypted else "agentloop", connect_agentloop,
                  lambda client, queue, mock_url: Worker(client, task_queue=queue, plugins=[bench_plugin()]), start)


#: The peers: name, module in ``benchmarks.loop.peer_systems``, and what its
#: ``start`` runs.
PEERS = [("OpenAI Agents", "oai", "OpenAIAgentsWorkflow"), ("Pydantic AI", "pai", "PydanticAIAgentWorkflow")]


def peer_system(name: str, module_name: str, workflow_name: str) -> System:
    """A peer's :class:`System`; ``ImportError`` when its packages are not installed."""
    module = importlib.import_module(f"benchmarks.loop.peer_systems.{module_name}")
    run = getattr(module, workflow_name).run

    async def start(client: Client, queue: str, steps: int, run_id: str) -> WorkflowHandle:
        return await client.start_workflow(run, steps, id=run_id, task_queue=queue)

    return System(name, module.connect, lambda client, queue, mock_url: module.worker(client, queue), start)

# ---------------------------------------------------------------- measurement


@dataclass
class Samples:
    """One system's samples over the repetitions."""

    rate: list[float] = field(default_factory=list)  # runs/s of a burst
    exec_ms: list[float] = field(default_factory=list)  # workflow-task ms a step
    wall_ms: list[float] = field(default_factory=list)  # wall ms a step
    history_kib: list[float] = field(default_factory=list)


def result_text(result: Any) -> str:
    """A run's final answer, whatever the system returns."""
    return str(getattr(result, "final_text", result))


async def one_run(system: System, client: Client, queue: str, steps: int) -> tuple[float, float, float, str]:
    """One run of ``steps``: wall ms a step, workflow-task ms a step, history
    KiB, and its answer."""
    started = time.perf_counter()
    handle = await system.start(client, queue, steps, f"{system.name.replace(' ', '-')}-{uuid.uuid4().hex[:8]}")
    result = await handle.result()
    wall_ms = (time.perf_counter() - started) * 1000
    history = await handle.fetch_history()
    exec_ms, begun = 0.0, 0.0
    for event in history.events:
        kind, at = event.WhichOneof("attributes"), event.event_time.ToNanoseconds() / 1e6
        if kind == "workflow_task_started_event_attributes":
            begun = at
        elif kind in ("workflow_task_completed_event_attributes", "workflow_task_failed_event_attributes",
                      "workflow_task_timed_out_event_attributes"):
            exec_ms += at - begun
    kib = sum(event.ByteSize() for event in history.events) / 1024
    return wall_ms / steps, exec_ms / steps, kib, result_text(result)


async def burst(system: System, client: Client, queue: str, n: int, steps: int) -> float:
    """``n`` runs of ``steps`` started at once: runs/s to the last result."""
    started = time.perf_counter()
    handles = await asyncio.gather(*(system.start(client, queue, steps, f"{system.name.replace(' ', '-')}-b-"
                                                  f"{uuid.uuid4().hex[:8]}") for _ in range(n)))
    await asyncio.gather(*(handle.result() for handle in handles))
    return n / (time.perf_counter() - started)


@contextlib.asynccontextmanager
async def running(systems: list[System], address: str, mock_url: str,
                  notes: list[str]) -> AsyncIterator[list[tuple[System, Client, str]]]:
    """Each system's client and worker, checked with a warm-up run; one
    that fails it is left out with a note."""
    live = []
    async with contextlib.AsyncExitStack() as stack:
        for system in systems:
            queue = f"peers-{system.name.replace(' ', '-')}-{uuid.uuid4().hex[:6]}"
            try:
                client = await system.connect(address, mock_url)
                await stack.enter_async_context(system.worker(client, queue, mock_url))
                *_, answer = await asyncio.wait_for(one_run(system, client, queue, 2), 120)
                if answer != "done":
                    raise RuntimeError(f"the warm-up run answered {answer!r}, not 'done'")
                await asyncio.wait_for(burst(system, client, queue, 2, 1), 120)
            except Exception as exc:  # noqa: BLE001 - note why, and measure the others
                if system.name in ("floor", "agentloop", "agentloop+enc"):
                    raise
                notes.append(f"{system.name}: failed its warm-up run, not measured ({type(exc).__name__}: {exc})")
                continue
            live.append((system, client, queue))
        yield live


async def measure(systems: list[System], address: str, mock_url: str, steps: int, reps: int,
                  concurrency: int, burst_steps: int, notes: list[str]) -> dict[str, Samples]:
    """Each system's samples, repetition by repetition, the systems in turn
    (the first of each repetition rotating)."""
    samples: dict[str, Samples] = {}
    async with running(systems, address, mock_url, notes) as live:
        for rep in range(reps):
            order = live[rep % len(live):] + live[:rep % len(live)]
            for system, client, queue in order:
                gc.collect()
                wall_ms, exec_ms, kib, answer = await one_run(system, client, queue, steps)
                if answer != "done":
                    raise RuntimeError(f"{system.name}: a run answered {answer!r}, not 'done'")
                got = samples.setdefault(system.name, Samples())
                got.wall_ms.append(wall_ms)
                got.exec_ms.append(exec_ms)
                got.history_kib.append(kib)
            for system, client, queue in order:
                gc.collect()
                samples[system.name].rate.append(await burst(system, client, queue, concurrency, burst_steps))
    return samples


def table(samples: dict[str, Samples], steps: int) -> list[str]:
    """The printed table: medians, each with its ratio to the floor's."""
    floor = samples["floor"]
    columns = (("runs/s", 9, ".2f", "rate"), ("WFT ms/step", 13, ".2f", "exec_ms"),
               ("wall ms/step", 14, ".1f", "wall_ms"), (f"history KiB at {steps}", 20, ".0f", "history_kib"))
    lines = [f"{'system':<16}" + "".join(f"{title:>{width}}{'x floor':>9}" for title, width, _, _ in columns)]
    for name, got in samples.items():
        cells = ""
        for _, width, spec, attribute in columns:
            value = statistics.median(getattr(got, attribute))
            cells += f"{value:>{width}{spec}}{value / statistics.median(getattr(floor, attribute)):>8.2f}x"
        lines.append(f"{name:<16}{cells}")
    return lines


def encryption_cost(samples: dict[str, Samples]) -> str:
    """agentloop+enc's medians over agentloop's, in the same run."""
    plain, sealed = samples["agentloop"], samples["agentloop+enc"]

    def ratio(attribute: str) -> str:
        return f"{statistics.median(getattr(sealed, attribute)) / statistics.median(getattr(plain, attribute)):.2f}x"

    return (f"encryption (agentloop+enc / agentloop): runs/s {ratio('rate')}, WFT ms/step {ratio('exec_ms')}, "
            f"wall ms/step {ratio('wall_ms')}, history {ratio('history_kib')}")


async def main(steps: int, reps: int, concurrency: int, burst_steps: int) -> None:
    notes: list[str] = []
    with mock_llm() as mock_url:
        os.environ["AGENTLOOP_PEERS_MOCK_URL"] = mock_url  # read by peer_systems/pai_agent.py at import
        systems = [floor_system(), agentloop_system(), agentloop_system(encrypted=True)]
        for name, module_name, workflow_name in PEERS:
            try:
                systems.append(peer_system(name, module_name, workflow_name))
            except ImportError as exc:
                notes.append(f"{name}: skipped, not installed ({exc.name or exc}); {PEERS_INSTALL} installs it")
        with DevServer() as server:
            await server.wait_ready()
            samples = await measure(systems, server.address, mock_url, steps, reps, concurrency, burst_steps, notes)
    print(f"dev server: fast polling (transfer/timer MaxPollRPS=1000); mock LLM answering at once; "
          f"medians of {reps} repetitions, systems interleaved")
    print(f"runs/s: {concurrency} runs of {burst_steps} steps at once; WFT ms/step (workflow-task time), "
          f"wall ms/step and history: one run of {steps} steps at a time")
    for line in table(samples, steps):
        print(line)
    print(encryption_cost(samples))
    for note in notes:
        print(note)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50, help="tool steps of the runs timed one at a time")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (the table gives medians)")
    parser.add_argument("--concurrency", type=int, default=20, help="runs started at once for runs/s")
    parser.add_argument("--burst-steps", type=int, default=5, help="tool steps of each of those runs")
    parser.add_argument("--serve-mock", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_mock:
        serve_mock(args.serve_mock)
        sys.exit(0)
    for flag, value in (("--steps", args.steps), ("--reps", args.reps), ("--concurrency", args.concurrency),
                        ("--burst-steps", args.burst_steps)):
        if value < 1:
            parser.error(f"{flag} must be at least 1, not {value}")
    asyncio.run(main(args.steps, args.reps, args.concurrency, args.burst_steps))
