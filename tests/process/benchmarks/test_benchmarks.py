"""benchmarks/loop/concurrency (and its CPU split) on real dev servers, at a few runs: both systems
(and both with their tool call local) finish, the figures it prints are
measured, and a server set up as it sets them up (search attributes cached,
``PRODUCTION_LIKE``) still finds runs by their search attributes; the
floor with agentloop's record has an agent run's history, event for event;
benchmarks/loop/peers prints the floor's and agentloop's rows (plain and encrypted) and skips the peers
that are not installed, in a note."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker

from agentloop import AgentClient
from agentloop.testing import register_scripted_model
from agentloop.workers.devserver import (
    FAIRNESS,
    FAST_POLLING,
    LOOPBACK_HTTP_API,
    PRODUCTION_LIKE,
    UPDATE_ADMISSION,
    DevServer,
)
from agentloop.workers.worker import connect
from agentloop.workflows.agent_run import AgentRunWorkflow
from agentloop.workflows.effects.recorder import RunRecorder
from benchmarks.durability import history_growth
from benchmarks.loop import agent_runs, concurrency, cpu_split, load
from tests.helpers.paths import ROOT


def test_the_peer_benchmark_measures_floor_and_agentloop_plain_and_encrypted_and_skips_peers_not_installed(
    tmp_path,
) -> None:
    # The peers' packages shadowed by ones that cannot be imported, as when
    # the [peers] extra is not installed (whether or not this venv has it).
    for package in ("agents", "pydantic_ai"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{package}'\", name={package!r})\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "benchmarks.loop.peers", "--steps", "2", "--reps", "1",
                           "--concurrency", "2", "--burst-steps", "1"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, env=env, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("system"))
    assert header.split() == ["system", "runs/s", "x", "floor", "WFT", "ms/step", "x", "floor", "wall", "ms/step",
                              "x", "floor", "history", "KiB", "at", "2", "x", "floor"]
    rows = {line.split()[0]: line.split()[1:] for line in lines if re.match(r"(floor|agentloop|agentloop\+enc) ", line)}
    assert sorted(rows) == ["agentloop", "agentloop+enc", "floor"]
    (cost,) = [line for line in lines if line.startswith("encryption (agentloop+enc / agentloop): ")]
    assert re.fullmatch(r".*: runs/s \d+\.\d\dx, WFT ms/step \d+\.\d\dx, wall ms/step \d+\.\d\dx, "
                        r"history \d+\.\d\dx", cost), cost
    # Four measures, each a median and its ratio to the floor's.
    for name, cells in rows.items():
        assert len(cells) == 8 and all(float(cell) > 0 for cell in cells[0::2]), (name, cells)
        assert all(re.fullmatch(r"\d+\.\d\dx", cell) for cell in cells[1::2]), (name, cells)
    assert rows["floor"][1::2] == ["1.00x"] * 4
    for peer, module in (("OpenAI Agents", "agents"), ("Pydantic AI", "pydantic_ai")):
        assert f'{peer}: skipped, not installed ({module}); pip install -e ".[peers]" installs it' in lines
        assert not any(line.startswith(peer + " ") for line in lines)


def test_a_server_given_dynamic_config_keeps_the_fast_polling_the_update_admission_limit_and_fairness() -> None:
    command = DevServer(dynamic_config=PRODUCTION_LIKE).command()
    settings = [command[i + 1] for i, arg in enumerate(command) if arg == "--dynamic-config-value"]
    expected = {**FAST_POLLING, **UPDATE_ADMISSION, **FAIRNESS, **LOOPBACK_HTTP_API, **PRODUCTION_LIKE}
    assert settings == [f"{k}={v}" for k, v in expected.items()]
    assert "system.forceSearchAttributesCacheRefreshOnRead=false" in settings


async def test_concurrency_benchmark_measures_floor_and_agentloop() -> None:
    register_scripted_model("bench-concurrency", agent_runs.scripted)
    # An odd repetition measures agentloop first; the rows are floor's first all the same.
    floor, agentloop = await concurrency.measure(4, True, timeout=120, rep=1)
    assert (floor["system"], agentloop["system"]) == ("floor", "agentloop")
    for row in (floor, agentloop):
        assert row["n"] == 4 and row["unfinished"] == 0
        assert row["rate"] > 0 and row["server_ms"] > 0 and row["worker_ms"] > 0
        # The worker's parts: its runs' activations, its activities, and what the collector took (maybe nothing).
        assert 0 < row["workflow_ms"] < row["worker_ms"] and 0 < row["activities_ms"] < row["worker_ms"]
        assert 0 <= row["full_gc_ms"] <= row["gc_ms"] < row["worker_ms"]
        # Collections a run by where they started: counts, so whole multiples of 1/n (maybe none at n = 4).
        for column in ("gcs_workflow", "gcs_activities", "gcs_elsewhere"):
            assert row[column] >= 0 and round(row[column] * 4, 6).is_integer()
    assert floor["queries"] is None and agentloop["queries"] == 0
    median = load.median_row([floor | {"rate": 1.0}, floor | {"rate": 3.0}, floor | {"rate": 2.0}])
    assert (median["rate"], median["rates"]) == (2.0, [1.0, 3.0, 2.0])


async def test_runs_are_found_by_search_attributes_on_a_production_like_server() -> None:
    register_scripted_model("bench-concurrency", agent_runs.scripted)
    with DevServer(dynamic_config=PRODUCTION_LIKE) as server:
        await server.wait_ready()
        client = await connect(server.address)
        row = await agent_runs.measure_agentloop(client, 3, "sa", True, timeout=120)
        assert row["unfinished"] == 0
        query = 'AgentModel="scripted:bench-concurrency" AND AgentStatus="completed"'
        found: list[str] = []
        for _ in range(100):  # visibility lags a little
            found = [w.id async for w in client.list_workflows(query)]
            if len(found) == 3:
                break
            await asyncio.sleep(0.1)
    assert sorted(found) == [f"agent-sa-{i}" for i in range(3)]


async def test_with_local_tools_it_measures_both_systems_with_their_tool_call_local_too() -> None:
    register_scripted_model("bench-concurrency", agent_runs.scripted)
    rows = await concurrency.measure(3, True, timeout=120, rep=0, local=True)
    assert [row["system"] for row in rows] == ["floor", "agentloop", "floor (local tool)", "agentloop (local tool)"]
    for row in rows:
        assert row["n"] == 3 and row["unfinished"] == 0 and row["rate"] > 0 and row["worker_ms"] > 0
    assert rows[1]["queries"] == 0 and rows[3]["queries"] == 0


async def test_with_unsandboxed_floor_and_without_it_measures_those_rows_too() -> None:
    register_scripted_model("bench-concurrency", agent_runs.scripted)
    rows = await concurrency.measure(3, True, timeout=120, rep=1, unsandboxed=True, without=("lookup",))
    assert [row["system"] for row in rows] == ["floor", "agentloop", "floor (unsandboxed)",
                                               "agentloop without lookup"]
    for row in rows:
        assert row["n"] == 3 and row["unfinished"] == 0 and row["rate"] > 0 and row["worker_ms"] > 0
    definitions = {kind: workflow_class.__temporal_workflow_definition
                   for kind, (workflow_class, _) in concurrency.FLOORS.items()}
    assert not definitions["floor-unsandboxed"].sandboxed and definitions["floor"].sandboxed
    assert not definitions["floor-record"].sandboxed  # as agentloop's own workflow runs
    assert definitions["floor-unsandboxed"].name != definitions["floor"].name


def _payload_sizes(message: Message) -> list[int]:
    """The byte sizes of every payload in a history event (search attributes included)."""
    sizes: list[int] = []
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = list(value.values())
        else:
            values = list(value) if field.is_repeated else [value]
        for item in values:
            if isinstance(item, Payload):
                sizes.append(item.ByteSize())
            elif isinstance(item, Message):
                sizes.extend(_payload_sizes(item))
    return sizes


async def test_the_record_floor_records_what_an_agent_run_records() -> None:
    register_scripted_model("bench-concurrency", agent_runs.scripted)
    rows = await concurrency.measure(2, True, timeout=120, rep=0, record=True)
    assert [row["system"] for row in rows] == ["floor", "agentloop", "floor (agentloop's record)"]
    assert all(row["unfinished"] == 0 and row["rate"] > 0 for row in rows)
    with DevServer(dynamic_config=PRODUCTION_LIKE) as server:
        await server.wait_ready()
        client = await connect(server.address)
        await agent_runs.measure_agentloop(client, 1, "rec", True, timeout=120)
        await concurrency.measure_floor(client, 1, "rec", 120, "floor-record")
        histories = [await client.get_workflow_handle(run_id).fetch_history()
                     for run_id in ("agent-rec-0", "floor-record-rec-0")]
    shapes = [Counter(EventType.Name(event.event_type) for event in history.events) for history in histories]
    sizes = [[size for event in history.events for size in _payload_sizes(event)] for history in histories]
    summaries = [sum(event.user_metadata.HasField("summary") for event in history.events) for history in histories]
    # The same events of each type (markers, upserts, activities, workflow tasks) and summaries; the same
    # number of payloads, of about the same bytes. When an agent run's history changes shape, so must RecordFloor.
    assert shapes[0] == shapes[1] and summaries[0] == summaries[1] > 8
    assert len(sizes[0]) == len(sizes[1]) and abs(sum(sizes[0]) - sum(sizes[1])) < 0.05 * sum(sizes[0])


async def test_without_lookup_and_events_its_runs_go_without_them_and_the_rest_is_put_back() -> None:
    register_scripted_model("bench-concurrency", agent_runs.scripted)
    saved = AgentRunWorkflow._look_tools_up, RunRecorder.emit
    with DevServer(dynamic_config=PRODUCTION_LIKE) as server:
        await server.wait_ready()
        client = await connect(server.address)
        row = await agent_runs.measure_agentloop(client, 2, "wo", True, timeout=120, without=("lookup", "events"))
        assert (AgentRunWorkflow._look_tools_up, RunRecorder.emit) == saved
        plain = await agent_runs.measure_agentloop(client, 1, "as", True, timeout=120)
        assert row["system"] == "agentloop without lookup, events" and plain["system"] == "agentloop"
        assert row["unfinished"] == plain["unfinished"] == 0 and row["queries"] == 0

        async def seen(run_id: str) -> tuple[int, int, int]:
            """The run's tool calls, lookups (local activity markers) and events."""
            handle = AgentClient(client).get_handle(run_id)
            result = await handle.result()
            history = await client.get_workflow_handle(run_id).fetch_history()
            markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")
                       and e.marker_recorded_event_attributes.marker_name == "core_local_activity"]
            events = [event async for event in handle.events()]  # read by query: a worker replays the run
            return sum(len(step.tool_calls) for step in result.report.steps), len(markers), len(events)

        # The echo calls still ran (on the run's own queue, from the lookup handed over), with no lookup and no
        # event. Such a run replays only with the same parts switched off: it is not one agentloop makes.
        plugin = agent_runs.bench_plugin()
        lookup = await agent_runs.handed_lookup(plugin, agent_runs.bench_spec(True), "agents-wo")
        async with Worker(client, task_queue="agents-wo", plugins=[plugin]):
            with agent_runs.switched_off(("lookup", "events"), lookup):
                assert [await seen(f"without-wo-{i}") for i in range(2)] == [(agent_runs.STEPS, 0, 0)] * 2
        async with Worker(client, task_queue="agents-as", plugins=[agent_runs.bench_plugin()]):
            calls, lookups, events = await seen("agent-as-0")
        assert (calls, lookups) == (agent_runs.STEPS, 1) and events > 10
    with (pytest.raises(ValueError, match="cannot switch off clock: the parts are lookup, events"),
          agent_runs.switched_off(["clock"], agent_runs.ResolveToolsResult())):
        pass
    with pytest.raises(ValueError, match="needs the lookup"), agent_runs.switched_off(["lookup"], None):
        pass
    assert agent_runs.parts_of(" events, lookup ,") == ("events", "lookup") and agent_runs.parts_of("") == ()


async def test_sustained_it_keeps_n_runs_in_flight_and_measures_a_window() -> None:
    register_scripted_model("bench-concurrency", agent_runs.scripted)
    rows = await concurrency.measure(2, True, timeout=120, rep=0, window=3.0)
    assert [row["system"] for row in rows] == ["floor", "agentloop"]
    for row in rows:
        # A run takes about 1.2 s of model time: two lanes finish several in a 3 s window.
        assert row["n"] == 2 and row["unfinished"] == 0 and row["rate"] > 0
        assert row["server_ms"] > 0 and row["worker_ms"] > 0 and 0 < row["workflow_ms"] < row["worker_ms"]
        assert 0 < row["activities_ms"] < row["worker_ms"]
    assert rows[1]["queries"] == 0


async def test_sustain_replaces_each_finished_run_and_counts_the_window_only() -> None:
    started: list[str] = []

    class Handle:
        def __init__(self, run_id: str) -> None:
            self.run_id = run_id

        async def result(self) -> None:
            await asyncio.sleep(0.05)

    async def start(run_id: str) -> Handle:
        started.append(run_id)
        return Handle(run_id)

    reads = iter([(1.0, 2.0), (2.0, 4.0)])
    driven = await load.sustain(start, "x", 3, 10, load.Sustained(0.5, lambda: next(reads)))
    assert driven.started == started and len(set(started)) == len(started)
    assert driven.unfinished == 0
    # Three lanes of 50 ms runs: about 30 finish in the 0.5 s window; the warm-up's first three do not count.
    assert 15 <= len(driven.measured) <= 31 and not set(driven.measured) & {"x-0", "x-1", "x-2"}
    # The window is at least 0.5 s (a sleep), a little more on a busy machine.
    assert len(driven.measured) / 1.0 <= driven.rate <= len(driven.measured) / 0.5
    assert driven.cpu_ms == (1000 / len(driven.measured), 2000 / len(driven.measured))


def test_cpu_split_counts_collections_and_puts_back_what_it_wrapped() -> None:
    originals = [cls.activate for cls in cpu_split.CpuSplit.INSTANCES]
    callbacks = list(gc.callbacks)
    gc.disable()  # only the two collections below
    try:
        junk = [[i] for i in range(200_000)]  # young objects, for both collections to walk
        with cpu_split.CpuSplit() as split:
            assert [cls.activate for cls in split.INSTANCES] != originals
            gc.collect(0)  # a young collection: collector time, none of it full
            young = split.seconds()
            gc.collect()
            activations, activities, collecting, full = split.seconds()
    finally:
        gc.enable()
    del junk
    assert young[2] > 0 and young[3] == 0
    assert activations == activities == 0  # no workflow ran
    assert full > 0 and collecting == young[2] + full  # the full collection counted, in both
    assert split.collections() == (0, 0, 2)  # both started outside any activation or activity
    assert [cls.activate for cls in cpu_split.CpuSplit.INSTANCES] == originals
    assert gc.callbacks == callbacks


def test_cpu_split_counts_an_activation_once_when_one_activate_runs_inside_another(monkeypatch) -> None:
    clock = [0.0]  # thread CPU, advanced by hand: each inner activation takes one second

    class Inner:
        def activate(self, activation: object) -> str:
            clock[0] += 1.0
            return f"done {activation}"

    class Outer:  # the sandbox's activate, around the SDK's
        def activate(self, activation: object) -> str:
            return Inner().activate(activation)

    class Split(cpu_split.CpuSplit):
        INSTANCES = (Inner, Outer)

    monkeypatch.setattr(cpu_split.time, "thread_time", lambda: clock[0])
    with Split() as split:
        assert Outer().activate(1) == "done 1" and Inner().activate(2) == "done 2"
    assert split.seconds()[0] == 2.0  # one second each, not three


def test_cpu_split_counts_collections_by_where_they_start() -> None:
    collected = []

    class Instance:
        def activate(self, activation: object) -> None:
            collected.append(gc.collect(0))  # a collection inside an activation

    class Split(cpu_split.CpuSplit):
        INSTANCES = (Instance,)

    async def activity() -> None:
        collected.append(gc.collect(0))  # one inside an activity's first step
        await asyncio.sleep(0)
        collected.append(gc.collect(0))  # and one inside its second

    async def run(split: cpu_split.CpuSplit) -> None:
        await cpu_split._Timed(activity(), split)
        collected.append(gc.collect(0))  # outside both, on the same thread the activity ran on

    gc.disable()  # only the collections above and below
    try:
        with Split() as split:
            Instance().activate(1)
            asyncio.run(run(split))
            gc.collect(0)  # elsewhere too
    finally:
        gc.enable()
    assert len(collected) == 4
    assert split.collections() == (1, 2, 2)


async def test_cpu_split_times_each_step_of_an_activity_and_hands_on_its_result_and_errors(monkeypatch) -> None:
    clock = [0.0]  # thread CPU, advanced by hand
    monkeypatch.setattr(cpu_split.time, "thread_time", lambda: clock[0])
    split = cpu_split.CpuSplit()

    async def activity(fail: bool) -> str:
        clock[0] += 1.0  # first step
        await asyncio.sleep(0)
        clock[0] += 2.0  # second step, after a suspension
        if fail:
            raise ValueError("the activity's own error")
        return "result"

    assert await cpu_split._Timed(activity(False), split) == "result"
    assert split.seconds() == (0.0, 3.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="own error"):
        await cpu_split._Timed(activity(True), split)
    assert split.seconds() == (0.0, 6.0, 0.0, 0.0)

    async def waits() -> None:
        clock[0] += 1.0
        await asyncio.sleep(10)

    task = asyncio.ensure_future(cpu_split._Timed(waits(), split))
    await asyncio.sleep(0)
    task.cancel()  # handed to the activity at its suspension
    with pytest.raises(asyncio.CancelledError):
        await task
    assert split.seconds() == (0.0, 7.0, 0.0, 0.0)


@pytest.mark.parametrize("flag", ["--record-floor", "--unsandboxed-floor"])
def test_a_floor_row_without_the_floor_is_refused_in_a_sentence(flag: str) -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.loop.concurrency", "--no-floor", flag],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{flag} is a floor: it cannot go with --no-floor" in done.stderr


async def test_history_growth_with_deltas_puts_streamed_batches_into_history() -> None:
    # The scripted model pacing its chunks streams each answer over several
    # batch windows (0.1 s): the published batches are signals in history.
    # Without --deltas, or with an answer that comes whole, there are none.
    streamed, whole = await history_growth.measure([3], True, 0.05), await history_growth.measure([3], True, 0.0)
    quiet = await history_growth.measure([3], False)
    for rows in (streamed, whole, quiet):
        assert [(row.steps, row.taken) for row in rows] == [(3, 3)]
        assert rows[0].message_bytes > 0 and rows[0].history_bytes > rows[0].message_bytes
    assert streamed[0].signals >= 3 and whole[0].signals == 0 and quiet[0].signals == 0
    assert streamed[0].history_bytes > quiet[0].history_bytes
    assert [row.runs for row in streamed + whole + quiet] == [1, 1, 1]


async def test_history_growth_counts_every_temporal_run_of_a_run_that_continued_as_new() -> None:
    one, chained = await history_growth.measure([4], False), await history_growth.measure([4], False, continue_every=2)
    assert (one[0].runs, one[0].taken, chained[0].taken) == (1, 4, 4)
    # Continued as new after steps 2 and 4 (a hand-over at the top of a step):
    # each Temporal run starts afresh, so the chain has more events than one run.
    assert chained[0].runs >= 2 and chained[0].events > one[0].events
    assert chained[0].history_bytes > one[0].history_bytes


def test_history_growth_refuses_a_negative_pause_in_a_sentence() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.durability.history_growth",
                           "--deltas", "--delta-seconds", "-1"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--delta-seconds must be 0 or more, not -1" in done.stderr


def test_the_mcp_calls_benchmark_measures_each_way_for_both_transports() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.tools.mcp_calls", "--calls", "2"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    rows = {(line[:10].strip(), line[11:39].strip()): line[39:].split() for line in done.stdout.splitlines()
            if line.startswith(("stdio ", "http "))}
    ways = ["fresh, mcp client (before)", "fresh, McpServers", "kept session (after)"]
    assert list(rows) == [(t, w) for t in ("stdio", "http") for w in ways], done.stdout
    for (transport, way), cells in rows.items():
        assert float(cells[0]) > 0 and re.fullmatch(r"\d+\.\d{3}x", cells[1]), (transport, way, cells)
        if way.endswith("(before)"):  # the baseline: 1x, and its shares starting and stopping
            assert cells[1] == "1.000x" and all(re.fullmatch(r"\d+%", c) for c in cells[2:4]), cells


def test_the_codec_cost_benchmark_measures_plain_and_encrypted_runs_and_the_codec() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.loop.codec_cost", "--steps", "2", "--reps", "1"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = {line.split()[0]: [float(cell) for cell in line.split()[1:]] for line in lines
            if line.startswith(("plain ", "encrypted "))}
    assert sorted(rows) == ["encrypted", "plain"] and all(len(r) == 2 and min(r) > 0 for r in rows.values())
    assert any(re.fullmatch(r"ratio\s+\d+\.\d\dx\s+\d+\.\d\dx  \(encrypted / plain\)", line) for line in lines), lines
    (codec,) = [line for line in lines if line.startswith("the codec itself: ")]
    found = re.fullmatch(r"the codec itself: (\d+\.\d+) ms a step \((\d+\.\d) payloads sealed or opened, "
                         r"(\d+\.\d) KiB sealed\)", codec)
    assert found and float(found.group(2)) > 1 and float(found.group(3)) > 0, codec


def test_the_sse_hold_benchmark_measures_the_gateway_with_streams_held_and_without() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.streaming.sse_hold", "--streams", "20", "--hold", "1"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rss = re.search(r"RSS: (\d+\.\d) MB with none, (\d+\.\d) MB with 20: (-?\d+\.\d) KB a stream", done.stdout)
    cpu = re.search(r"CPU over 1 s: (\d+\.\d\d) s with none, (\d+\.\d\d) s with 20: (-?\d+\.\d{3}) ms", done.stdout)
    assert rss and cpu, done.stdout
    assert float(rss.group(1)) > 0 and float(rss.group(2)) > 0


def test_the_eval_cost_benchmark_times_the_runs_and_their_eval_and_checks_every_case_passes() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.evals.eval_cost", "--runs", "4", "--concurrency", "2"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"eval \(recorded tools\)\s+\d+\.\d\d s\s+ratio eval/runs \d+\.\d\dx", out), out
    assert re.search(r"eval workflow history\s+\d+\.\d\d KiB per case", out), out
    assert re.search(r"reading the cases\s+\d+\.\d\d s\s+\(cases_from_runs\)\s+with it: \d+\.\d\dx", out), out
    assert re.search(r"pass rate\s+100%\s+tool executions during the eval: 0\n", out), out
