"""The harness's view of the children: one watch per child kind, and waits on convergence.

``ChildWatch`` lists and then watches every child kind of the benchmark namespace (its own
requests, counted by the ``Cluster``), keeps the latest copy of each child, and tracks which
desired children do not match yet. ``converged()`` returns the monotonic time at which the last
mismatch disappeared (the arrival of the event that fixed it); ``repaired(key)`` waits for one
child to go through a drift and come back. As no kubelet runs, it also makes each workload it
sees available for its generation (``benchmarks._kubelet``; a request of its own): the example's
query frontend waits for the query Deployment. Times are those at which the events were handled, so
they include the watch delivery: the same for both operators.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from benchmarks import _fleet as fleet
from benchmarks._kube import Cluster, HarnessError, collection_path
from benchmarks._kubelet import available_status


class ConvergenceTimeout(TimeoutError):
    """The children did not match within the bound: how many were left, and some of them."""

    def __init__(self, *, waited: float, left: list[fleet.ChildKey]) -> None:
        super().__init__(f"{len(left)} children still not as built after {waited:.0f} s: "
                         f"{left[:5]}")
        self.left = left


class ChildWatch:
    """Live children of the namespace against the desired ones (``kinds``: kind to
    ``(apiVersion, plural)``, the Thanos fleet's by default; ``kubelet``: make workloads
    available, off for a peer that needs no kubelet)."""

    def __init__(
        self, cluster: Cluster, *, namespace: str = fleet.NAMESPACE,
        kinds: Mapping[str, tuple[str, str]] = fleet.CHILD_KINDS, kubelet: bool = True,
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.kinds = dict(kinds)
        self.live: dict[fleet.ChildKey, dict[str, Any]] = {}
        self.desired: dict[fleet.ChildKey, dict[str, Any] | None] = {}
        self.unmatched: set[fleet.ChildKey] = set()
        self.last_change = time.monotonic()
        self._changed = asyncio.Condition()
        self._drifted: dict[fleet.ChildKey, bool] = {}
        self._matched_at: dict[fleet.ChildKey, float] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.kubelet = kubelet
        """Whether to make the workloads available as a kubelet would (see the module)."""
        self._kubelet: set[asyncio.Task[None]] = set()
        self._kubelet_error: HarnessError | None = None

    def _matches(self, key: fleet.ChildKey) -> bool:
        want, live = self.desired.get(key), self.live.get(key)
        if want is None:
            return live is None
        return live is not None and fleet.is_subset(want, live)

    def set_desired(self, desired: Mapping[fleet.ChildKey, dict[str, Any] | None]) -> None:
        """Hold the children to ``desired`` from now on."""
        self.desired = dict(desired)
        self.unmatched = {key for key in self.desired if not self._matches(key)}

    async def start(self) -> None:
        """List every child kind, then watch each from its list's resourceVersion."""
        for kind, (api_version, plural) in self.kinds.items():
            path = collection_path(api_version, plural, self.namespace)
            listed = await self.cluster.request("GET", path, verb="list")
            for item in listed.get("items") or ():
                self.live[fleet.child_key(item, kind)] = item
            version = str(listed["metadata"]["resourceVersion"])
            self._tasks.append(asyncio.create_task(self._follow(kind, path, version)))
        self.set_desired(self.desired)

    async def _follow(self, kind: str, path: str, version: str) -> None:
        async for event_type, obj in self.cluster.watch(path, version):
            if event_type not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            key = fleet.child_key(obj, kind)
            if event_type == "DELETED":
                self.live.pop(key, None)
            else:
                self.live[key] = obj
                if self.kubelet and (patch := available_status(obj)) is not None:
                    task = asyncio.create_task(self._make_available(path, obj, patch))
                    self._kubelet.add(task)
                    task.add_done_callback(self._kubelet.discard)
            now = time.monotonic()
            matched = self._matches(key)
            if matched:
                self.unmatched.discard(key)
                self._matched_at[key] = now
            elif key in self.desired:
                self.unmatched.add(key)
                if key in self._drifted:
                    self._drifted[key] = True
            self.last_change = now
            async with self._changed:
                self._changed.notify_all()

    async def _make_available(self, path: str, obj: Mapping[str, Any],
                              patch: Mapping[str, Any]) -> None:
        """Send the kubelet's status patch (a workload deleted meanwhile is left alone)."""
        name = obj["metadata"]["name"]
        try:
            await self.cluster.request("PATCH", f"{path}/{name}/status", verb="patch",
                                       body=patch, content_type="application/merge-patch+json")
        except HarnessError as error:
            if error.status != 404:
                self._kubelet_error = error  # raised by the next wait

    async def stop(self) -> None:
        """Cancel the watches (and the kubelet's patches in flight)."""
        pending = [*self._tasks, *self._kubelet]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _check_tasks(self) -> None:
        if self._kubelet_error is not None:
            raise RuntimeError("the harness's kubelet failed") from self._kubelet_error
        for task in self._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise RuntimeError("a harness watch failed") from task.exception()

    async def converged(self, *, timeout: float) -> float:
        """Wait until every desired child matches; the monotonic time it happened."""
        start = time.monotonic()
        async with self._changed:
            while self.unmatched:
                self._check_tasks()
                left = timeout - (time.monotonic() - start)
                if left <= 0:
                    raise ConvergenceTimeout(waited=timeout, left=sorted(self.unmatched))
                try:
                    await asyncio.wait_for(self._changed.wait(), timeout=min(left, 1.0))
                except TimeoutError:
                    continue
        return self.last_change if self.last_change >= start else start

    def expect_drift(self, key: fleet.ChildKey) -> None:
        """Mark ``key`` as about to drift (call before the drifting write)."""
        self._drifted[key] = False

    async def repaired(self, key: fleet.ChildKey, *, timeout: float) -> float | None:
        """After ``expect_drift(key)`` and the drift: the time the child matched again, or None."""
        start = time.monotonic()
        try:
            async with self._changed:
                while not (self._drifted.get(key) and key not in self.unmatched):
                    self._check_tasks()
                    left = timeout - (time.monotonic() - start)
                    if left <= 0:
                        return None
                    try:
                        await asyncio.wait_for(self._changed.wait(), timeout=min(left, 1.0))
                    except TimeoutError:
                        continue
            return self._matched_at.get(key, self.last_change)
        finally:
            self._drifted.pop(key, None)
