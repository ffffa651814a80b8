"""Where a worker process's CPU goes: the process's and the server's CPU
seconds and RSS, and :class:`CpuSplit`, the thread CPU of its workflow
activations, its activities' own code and the garbage collector, with the
collector's full collections apart, and where the collections start (the
parts ``benchmarks.loop.concurrency`` reports)."""

from __future__ import annotations

import gc
import os
import resource
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Self

from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor
from temporalio.worker._workflow_instance import _WorkflowInstanceImpl
from temporalio.worker.workflow_sandbox._runner import _Instance as _SandboxedInstance


def rss_mb() -> tuple[float, float]:
    """This process's resident set now and at its peak, in MB."""
    now = 0.0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) / 1024
    return now, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds(pid: int | None) -> float:
    """CPU (user + system) a process has used: this one when ``pid`` is None."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuSplit(Interceptor):
    """Thread CPU seconds this process spends in workflow activations, in
    activities and in the garbage collector, counted while installed
    (``with``; for activities, on a worker given it as an interceptor).

    Activations are timed around the workflow instances' ``activate`` (the
    SDK's for workflows outside the sandbox, the sandbox's around it for
    those inside, so its cost counts too; each activation runs on one thread,
    synchronously); an activity by each step of its coroutine (an async
    activity's own code, after the SDK has decoded its input and before it
    encodes its result); collections by ``gc.callbacks``: three parts of the
    worker's CPU, read as ``seconds()``. A collection during an activation
    or an activity counts in both. Of the collector's time, that of its full
    collections (generation 2) is counted apart as well: the part that walks
    every object the process holds, so grows with the runs in flight.

    Collections are also counted by where they start, ``collections()``:
    inside an activation, inside an activity's step, or elsewhere (the SDK
    decoding activations and encoding completions between them, its
    activity worker around the activities, the client). Python starts a
    young collection at the allocation that makes 700 more tracked objects
    made than freed since the last one, so the counts say who was
    allocating when the collector started (the busiest places most), not
    who keeps the objects that made the collections necessary."""

    #: Where a collection can start, in the order ``collections()`` counts them.
    SITES = ("workflow", "activities", "elsewhere")

    #: The classes whose ``activate`` runs an activation (the outermost counts).
    INSTANCES = (_WorkflowInstanceImpl, _SandboxedInstance)

    def __init__(self) -> None:
        self.activations = 0.0
        self.activities = 0.0
        self.collecting = 0.0
        self.full_collecting = 0.0
        self.started: Counter[str] = Counter()
        self._collection_began = 0.0
        self._originals: list[tuple[type, Callable[..., object]]] = []
        self._inside = threading.local()

    def seconds(self) -> tuple[float, float, float, float]:
        """(activations, activities, collecting, of which in full collections) so far."""
        return self.activations, self.activities, self.collecting, self.full_collecting

    def collections(self) -> tuple[int, int, int]:
        """Collections so far that started in activations, in activities and elsewhere (:data:`SITES`)."""
        workflow, activities, elsewhere = (self.started[site] for site in self.SITES)
        return workflow, activities, elsewhere

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """See :class:`temporalio.worker.Interceptor`."""
        return _TimedActivities(next, self)

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._collection_began = time.thread_time()
            inside = self._inside  # this thread's: an activation and an activity's step each run on one
            self.started["workflow" if getattr(inside, "active", False)
                         else "activities" if getattr(inside, "stepping", False) else "elsewhere"] += 1
        else:
            took = time.thread_time() - self._collection_began
            self.collecting += took
            if info["generation"] == 2:
                self.full_collecting += took

    def _timed(self, activate: Callable[..., object]) -> Callable[..., object]:
        def timed(instance: object, activation: object) -> object:
            if getattr(self._inside, "active", False):  # the sandbox's activate around the SDK's
                return activate(instance, activation)
            self._inside.active, began = True, time.thread_time()
            try:
                return activate(instance, activation)
            finally:
                self.activations += time.thread_time() - began
                self._inside.active = False

        return timed

    def __enter__(self) -> Self:
        for cls in self.INSTANCES:
            self._originals.append((cls, cls.activate))
            cls.activate = self._timed(cls.activate)
        gc.callbacks.append(self._collected)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for cls, activate in self._originals:
            cls.activate = activate
        self._originals.clear()
        gc.callbacks.remove(self._collected)


class _TimedActivities(ActivityInboundInterceptor):
    """Adds the thread CPU of each step of an activity's coroutine to a :class:`CpuSplit`."""

    def __init__(self, next: ActivityInboundInterceptor, split: CpuSplit) -> None:
        super().__init__(next)
        self._split = split

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        return await _Timed(self.next.execute_activity(input), self._split)


class _Timed:
    """An awaitable that runs ``coro`` and counts the thread CPU of each of its steps."""

    def __init__(self, coro: Coroutine[Any, Any, Any], split: CpuSplit) -> None:
        self._coro, self._split = coro, split

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._coro.__await__()
        value: Any = None
        error: BaseException | None = None
        inside = self._split._inside
        while True:
            began, inside.stepping = time.thread_time(), True
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                inside.stepping = False
                self._split.activities += time.thread_time() - began
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # noqa: BLE001 (a cancellation, handed to the activity as it came)
                value, error = None, exc
