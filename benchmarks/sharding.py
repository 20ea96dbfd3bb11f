"""Benchmark: sharding parents across 1, 2 and 3 operator replicas (issue 16).

The embedded API server runs in this process with its request log on; each replica is a
separate process (``python -m tests.sharding.sample``: one ConfigMap per ``Item`` parent, user
agent ``optk-shard/<id>``) that reports its own CPU seconds, peak RSS and cached objects. For
each replica count the parents exist first, then the replicas start together
(``replicas_hint``); convergence is every parent labelled with a live shard and its ConfigMap
written and labelled alike; then a steady-state window follows.

- ``per_replica``: for "1", "2", "3" replicas, the median replica's ``cpu_s`` (convergence plus
  the steady window), ``peak_rss_mb`` and ``cached_objects`` (its parents and children, plus on
  the replica running the assigner the parents and Leases the assigner caches), with the split
  ``cpu_converge_s``/``cpu_steady_s``, the convergence seconds and requests per replica, and the
  same without the interpreter's start (``cpu_work_s``: CPU after the imports;
  ``peak_rss_above_base_mb``: peak RSS above the RSS before the runtime started), and
  ``share_reconcile_s``, the seconds from its first to its last child created at start (one
  reconcile pass over its share). ``assigner_replica``: with 3 replicas, the peak RSS of the
  replica running the assigner (it also caches every parent's metadata view) against the
  median of the others.
- ``takeover_s``: with 3 replicas, ``kill -9`` of one that does not run the assigner, right
  after it renewed its Lease (the worst case: the Lease has a whole duration to run), until
  every one of its parents is held by a live replica: labelled with its shard, in that
  replica's parent cache, and its children labelled for that replica's child informers
  (``lease_duration_s`` plus the relabelling is the bound). ``takeover_timeline`` gives each
  step in seconds after the kill (``takeover_timeline``'s docstring), ``takeover_cpu_s`` the
  CPU seconds of the server's process and of each survivor from the kill until every parent
  and child is in the survivors' caches (polled from their reports, not from the server).
  ``--children N`` gives each parent N ConfigMaps (default 1).
- ``moved_on_join``: then a third replica joins the two survivors: the fraction of all parents
  that moved (ideal: 1/3), and ``drains_on_join``, the drains its old owners acknowledged.
- ``overlapping_writers``: parents whose children or status were written by two replicas
  interleaved (A, B, A) within one lease duration, from the server's request log over the run.

On a 2-core machine the replicas, the server and this process share the cores: wall-clock
scale-out is bounded by the cores; the per-replica figures are what scales.

Run: ``python -m benchmarks.sharding [--json] [--parents 1000] [--steady 5] [--lease 5]
[--replicas 1,2,3]`` (``--replicas 3``: only the 3-replica phase, for a quick takeover figure).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler import ApiError, KubernetesClient
from reconciler._sharding.decisions import SHARD_LABEL
from reconciler.embedded import EmbeddedApiServer
from reconciler.embedded._accounting import RequestRecord

ROOT = Path(__file__).resolve().parents[1]
API_VERSION = "shardtest.optk.dev/v1"
AGENT = "optk-shard/"


def _wait(predicate: Callable[[], bool], timeout: float, what: str, poll: float = 0.5) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(poll)
    return time.monotonic() - started


class Replica:
    """One replica process."""

    def __init__(self, server: EmbeddedApiServer, namespace: str, shard: str, *,
                 directory: Path, lease: float, hint: int, children: int = 1) -> None:
        self.shard = shard
        self.status_path = directory / f"{namespace}-{shard}.json"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.sharding.sample", "--kubeconfig",
             str(server.kubeconfig_path), "--shard", shard, "--namespace", namespace,
             "--status", str(self.status_path), "--lease", str(lease),
             "--replicas-hint", str(hint), "--children", str(children)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.status_path.read_text()))
        except (OSError, ValueError):
            return {}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def _labels(client: KubernetesClient, kind: str, namespace: str) -> dict[str, str | None]:
    api = API_VERSION if kind == "Item" else "v1"
    body = client.list(api, kind, namespace=namespace)
    return {o["metadata"]["name"]: (o["metadata"].get("labels") or {}).get(SHARD_LABEL)
            for o in body.get("items") or ()}


def _child_names(parent: str, per_parent: int) -> list[str]:
    """The ConfigMaps of a parent in ``tests.sharding.sample``."""
    return [f"{parent}-cfg", *(f"{parent}-cfg-{i}" for i in range(1, per_parent))]


def _parent_of(child: str) -> str:
    """The parent of a ``tests.sharding.sample`` ConfigMap."""
    return child.rsplit("-cfg", 1)[0]


def _converged(client: KubernetesClient, namespace: str, live: set[str],
               per_parent: int = 1) -> bool:
    parents = _labels(client, "Item", namespace)
    children = _labels(client, "ConfigMap", namespace)
    return all(shard in live and all(children.get(child) == shard
                                     for child in _child_names(name, per_parent))
               for name, shard in parents.items())


def overlapping_writers(log: list[RequestRecord], window: float) -> int:
    """Parents whose children or status were written by two replicas interleaved (A, B, A)
    within ``window`` seconds of each other."""
    writes: dict[str, list[tuple[float, str]]] = {}
    for record in log:
        agent = record.user_agent or ""
        if not agent.startswith(AGENT) or record.code >= 400 or not record.name:
            continue
        if record.verb not in ("create", "update", "patch", "delete"):
            continue
        if record.resource.startswith("configmaps"):
            parent = f"{record.namespace}/{_parent_of(record.name)}"
        elif record.resource == "items.shardtest.optk.dev/status":
            parent = f"{record.namespace}/{record.name}"
        else:
            continue
        writes.setdefault(parent, []).append((record.at, agent))
    count = 0
    for sequence in writes.values():
        sequence.sort()
        last_seen: dict[str, float] = {}
        previous = None
        for at, agent in sequence:
            if (agent != previous and agent in last_seen and previous is not None
                    and at - last_seen[previous] <= window):
                count += 1
                break
            last_seen[agent] = at
            previous = agent
    return count


def _requests(log: list[RequestRecord], since: float) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in log:
        if record.at >= since and (record.user_agent or "").startswith(AGENT):
            shard = (record.user_agent or "")[len(AGENT):]
            counts[shard] = counts.get(shard, 0) + 1
    return counts


def _creation_spans(log: list[RequestRecord], namespace: str) -> dict[str, float]:
    """Per replica, the seconds from its first to its last ConfigMap creation in
    ``namespace``: one reconcile pass over its share of the parents (at start)."""
    spans: dict[str, list[float]] = {}
    for record in log:
        agent = record.user_agent or ""
        if (record.verb == "create" and record.resource == "configmaps" and record.code < 400
                and record.namespace == namespace and agent.startswith(AGENT)):
            spans.setdefault(agent[len(AGENT):], []).append(record.at)
    return {shard: round(max(ats) - min(ats), 3) for shard, ats in spans.items()}


def run_phase(server: EmbeddedApiServer, client: KubernetesClient, *, replicas: int,
              parents: int, steady: float, lease: float, directory: Path, children: int,
              failover: bool) -> dict[str, Any]:
    """Start ``replicas`` replicas on ``parents`` parents; measure convergence and steady
    state (and with ``failover``, a kill -9 takeover and a join)."""
    namespace = f"bench-{replicas}-{uuid.uuid4().hex[:6]}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for index in range(parents):
        client.create({"apiVersion": API_VERSION, "kind": "Item",
                       "metadata": {"name": f"p{index:04d}", "namespace": namespace},
                       "spec": {"value": "1"}})
    shards = [chr(ord("a") + i) for i in range(replicas)]
    started_at = time.time()
    running = {s: Replica(server, namespace, s, directory=directory, lease=lease, hint=replicas,
                          children=children)
               for s in shards}
    result: dict[str, Any] = {}
    try:
        converge = _wait(lambda: _converged(client, namespace, set(shards), children),
                         120 + parents * children / 5, f"{replicas} replicas converging")
        at_converge = {s: r.status() for s, r in running.items()}
        time.sleep(steady)
        at_end = {s: r.status() for s, r in running.items()}
        figures = []
        for shard in shards:
            a, b = at_converge[shard], at_end[shard]
            figures.append({
                "shard": shard, "leading": b.get("leading"),
                "cpu_s": round(b.get("cpu_s", 0.0), 3),
                "cpu_converge_s": round(a.get("cpu_s", 0.0), 3),
                "cpu_steady_s": round(b.get("cpu_s", 0.0) - a.get("cpu_s", 0.0), 3),
                "peak_rss_mb": round(b.get("peak_rss_mb", 0.0), 1),
                "cpu_work_s": round(b.get("cpu_s", 0.0) - b.get("base", {}).get("cpu_s", 0.0), 3),
                "peak_rss_above_base_mb": round(
                    b.get("peak_rss_mb", 0.0) - b.get("base", {}).get("rss_mb", 0.0), 1),
                "cached_objects": b.get("cached_objects", 0),
                "cached_parents": b.get("cached_parents", 0),
                "assigner_cached": b.get("assigner_cached", 0),
                "reconciles": b.get("reconciles", 0),
            })
        log = server.request_log()
        requests = _requests(log, started_at)
        passes = _creation_spans(log, namespace)
        for entry in figures:
            entry["requests"] = requests.get(entry["shard"], 0)
            entry["share_reconcile_s"] = passes.get(entry["shard"], 0.0)
        median = {key: statistics.median(f[key] for f in figures)
                  for key in ("cpu_s", "cpu_converge_s", "cpu_steady_s", "peak_rss_mb",
                              "cached_objects", "requests", "cpu_work_s",
                              "peak_rss_above_base_mb", "share_reconcile_s")}
        result = {"converge_s": round(converge, 2), "median": median, "replicas": figures}
        if failover:
            result.update(_failover(server, client, namespace, running, parents=parents,
                                    children=children,
                                    lease=lease, directory=directory))
    finally:
        for replica in running.values():
            replica.stop()
    return result


def _failover(server: EmbeddedApiServer, client: KubernetesClient, namespace: str,
              running: dict[str, Replica], *, parents: int, lease: float, children: int,
              directory: Path) -> dict[str, Any]:
    leader = next(s for s, r in running.items() if r.status().get("leading"))
    victim = next(s for s, r in running.items() if not r.status().get("leading"))
    before = _labels(client, "Item", namespace)
    theirs = {name for name, shard in before.items() if shard == victim}
    # kill it right after it renewed its Lease: the worst case, a whole duration to run
    def lease_version() -> str:
        return str(client.get("coordination.k8s.io/v1", "Lease", f"shards-shard-{victim}",
                              namespace=namespace)["metadata"]["resourceVersion"])
    version = lease_version()
    _wait(lambda: lease_version() != version, 10 * lease,
          "the victim's Lease renewal", poll=0.01)
    cpu_before = {s: r.status().get("cpu_s", 0.0) for s, r in running.items() if s != victim}
    server_cpu = time.process_time()
    running.pop(victim).process.send_signal(signal.SIGKILL)
    killed = time.time()
    live = set(running)

    def arrived() -> bool:  # the survivors' own reports: no load on the server while polling
        seen: set[str] = set()
        for replica in running.values():
            seen.update(n for n, at in replica.status().get("arrivals", {}).items()
                        if at > killed)
        return theirs <= seen
    def held() -> bool:  # every parent and child in the survivors' caches
        figures = [r.status() for r in running.values()]
        return (sum(f.get("cached_parents", 0) for f in figures) == parents
                and sum(f.get("cached_children", 0) for f in figures) == parents * children)
    _wait(arrived, 10 * lease + parents / 10, "takeover", poll=0.1)
    _wait(held, 120, "takeover: children in the new owners' caches", poll=0.1)
    cpu = {"server": round(time.process_time() - server_cpu, 3),
           **{s: round(r.status().get("cpu_s", 0.0) - cpu_before[s], 3)
              for s, r in running.items()}}
    _wait(lambda: _converged(client, namespace, live, children), 120,
          "takeover converging")
    time.sleep(0.5)  # the replicas' last reports
    timeline = takeover_timeline(
        server.request_log(), {s: r.status() for s, r in running.items()}, victim=victim,
        leader=leader, parents=theirs, killed=killed, lease=lease, per_parent=children)
    # a third replica joins the two survivors
    before = _labels(client, "Item", namespace)
    released = sum(r.status().get("releases", 0) for r in running.values())
    joiner = "j"
    running[joiner] = Replica(server, namespace, joiner, directory=directory, lease=lease,
                              hint=1, children=children)
    live.add(joiner)
    _wait(lambda: joiner in set(_labels(client, "Item", namespace).values())
          and _converged(client, namespace, live, children), 120, "join converging")
    time.sleep(lease)
    after = _labels(client, "Item", namespace)
    moved = sum(after[n] != before.get(n) for n in after)
    drains = sum(r.status().get("releases", 0) for s, r in running.items()
                 if s != joiner) - released
    return {"takeover_s": timeline["held"], "takeover_timeline": timeline,
            "takeover_cpu_s": cpu,
            "taken_over_parents": len(theirs),
            "moved_on_join": round(moved / max(1, parents), 4),
            "drains_on_join": drains, "moved_parents_on_join": moved}


def takeover_timeline(log: list[RequestRecord], statuses: dict[str, dict[str, Any]], *,
                      victim: str, leader: str, parents: set[str], killed: float,
                      lease: float, per_parent: int = 1) -> dict[str, float]:
    """The takeover after ``kill -9`` of ``victim`` (wall time ``killed``) as seconds after the
    kill, from the server's request log and the survivors' reports:

    - ``last_renewal``: the victim's last Lease write (negative: before the kill; the
      benchmark kills right after a renewal, so its Lease has about a whole duration to run);
    - ``lease_expired``: that renewal plus the lease duration (the assigner's own clock
      decides; it sees the renewal a little after it is written);
    - ``expiry_noticed``: the assigner's live shards changed (the Lease was a duration old);
    - ``first_relabelled``/``relabelled``: the assigner's first and last label patch of the
      victim's parents;
    - ``arrived``: the last of them arrived in its new owner's parent cache (an ADDED event);
    - ``children_relabelled``: the last of their children written by its new owner (its
      shard label: from then on its child informers watch it);
    - ``held``: every parent of the victim is in a live owner's parent cache and its children
      in that owner's child informers: the takeover is complete (``takeover_s``);
    - ``after_expiry``: ``held`` minus ``lease_expired``: the work of the takeover itself
      (the issue's bound is the lease duration plus one reconcile).
    """
    def after(at: float) -> float:
        return round(at - killed, 3)

    renewals = [r.at for r in log if r.resource.startswith("leases") and r.code < 400
                and r.user_agent == f"{AGENT}{victim}" and r.verb in ("update", "patch")
                and r.at <= killed]
    relabels: dict[str, float] = {}
    children: dict[str, dict[str, float]] = {}
    for record in log:
        if record.at <= killed or record.code >= 400 or not record.name:
            continue
        agent = record.user_agent or ""
        if (record.resource == "items.shardtest.optk.dev" and record.verb == "patch"
                and agent == f"{AGENT}{leader}" and record.name in parents):
            relabels[record.name] = max(relabels.get(record.name, 0.0), record.at)
        elif (record.resource == "configmaps" and agent.startswith(AGENT)
              and record.verb in ("create", "update", "patch")):
            parent = _parent_of(record.name)
            if parent in parents:
                children.setdefault(parent, {}).setdefault(record.name, record.at)
    arrivals: dict[str, float] = {}
    for status in statuses.values():
        for name, at in (status.get("arrivals") or {}).items():
            if name in parents and at > killed:
                arrivals[name] = max(arrivals.get(name, 0.0), at)
    noticed = (statuses.get(leader, {}).get("assigner") or {}).get("live_changed_at")
    done = {n: max(c.values()) for n, c in children.items() if len(c) == per_parent}
    held = [max(arrivals.get(n, float("inf")), done.get(n, float("inf"))) for n in parents]
    expired = max(renewals) + lease if renewals else float("nan")
    return {
        "last_renewal": after(max(renewals)) if renewals else float("nan"),
        "lease_expired": after(expired),
        "expiry_noticed": after(noticed) if noticed and noticed > killed else float("nan"),
        "first_relabelled": after(min(relabels.values())) if relabels else float("nan"),
        "relabelled": after(max(relabels.values())) if relabels else float("nan"),
        "arrived": after(max(arrivals.values())) if arrivals else float("nan"),
        "children_relabelled": after(max(done.values())) if done else float("nan"),
        "held": after(max(held)) if held else 0.0,
        "after_expiry": round(max(held) - expired, 3) if held else 0.0,
        "relabelled_parents": len(relabels),
        "relabelled_children": sum(len(c) for c in children.values()),
    }


def run(*, parents: int, steady: float, lease: float,
        counts: tuple[int, ...] = (1, 2, 3), children: int = 1) -> dict[str, Any]:
    """The phases for ``counts`` replicas (3 among them: the takeover and the join run with
    3); the JSON result."""
    if 3 not in counts:
        raise ValueError(f"the replica counts must include 3, got {counts}")
    with tempfile.TemporaryDirectory(prefix="optk-sharding-") as tmp, \
            EmbeddedApiServer() as server:
        server.enable_request_log(limit=5_000_000)
        client = KubernetesClient(server.api_client())
        from tests.sharding.sample import ITEM_CRD

        client.create(ITEM_CRD)
        _wait(lambda: client.is_served(API_VERSION, "Item"), 30, "the Item CRD", poll=0.05)
        phases = {str(n): run_phase(server, client, replicas=n, parents=parents, steady=steady,
                                    children=children,
                                    lease=lease, directory=Path(tmp), failover=n == 3)
                  for n in counts}
        overlaps = overlapping_writers(server.request_log(), lease)
    three = phases["3"]
    return {
        "parents": parents, "children_per_parent": children, "steady_s": steady,
        "lease_duration_s": lease,
        "per_replica": {n: {"cpu_s": p["median"]["cpu_s"],
                            "peak_rss_mb": p["median"]["peak_rss_mb"],
                            "cached_objects": p["median"]["cached_objects"],
                            "cpu_converge_s": p["median"]["cpu_converge_s"],
                            "cpu_steady_s": p["median"]["cpu_steady_s"],
                            "requests": p["median"]["requests"],
                            "cpu_work_s": p["median"]["cpu_work_s"],
                            "peak_rss_above_base_mb": p["median"]["peak_rss_above_base_mb"],
                            "share_reconcile_s": p["median"]["share_reconcile_s"],
                            "converge_s": p["converge_s"]}
                        for n, p in phases.items()},
        "replicas": {n: p["replicas"] for n, p in phases.items()},
        "takeover_s": three["takeover_s"],
        "takeover_timeline": three["takeover_timeline"],
        "takeover_cpu_s": three["takeover_cpu_s"],
        "taken_over_parents": three["taken_over_parents"],
        "moved_on_join": three["moved_on_join"],
        "drains_on_join": three["drains_on_join"],
        "moved_parents_on_join": three["moved_parents_on_join"],
        "overlapping_writers": overlaps,
        "assigner_replica": _assigner_figures(three["replicas"]),
        "cpus": os.cpu_count(), "python": platform.python_version(),
    }


def _assigner_figures(replicas: list[dict[str, Any]]) -> dict[str, Any]:
    """With 3 replicas: the one running the assigner (it caches every parent's metadata view
    and the Leases besides its share) against the median of the others."""
    leader = next((r for r in replicas if r["leading"]), None)
    others = [r for r in replicas if not r["leading"]]
    if leader is None or not others:
        return {}
    return {
        "peak_rss_mb": leader["peak_rss_mb"],
        "peak_rss_above_base_mb": leader["peak_rss_above_base_mb"],
        "assigner_cached": leader["assigner_cached"],
        "others_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in others),
        "others_peak_rss_above_base_mb": statistics.median(
            r["peak_rss_above_base_mb"] for r in others),
        "cpu_work_s": leader["cpu_work_s"],
        "others_cpu_work_s": statistics.median(r["cpu_work_s"] for r in others),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print a summary (and the JSON line last with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--parents", type=int, default=1000)
    parser.add_argument("--steady", type=float, default=5.0, help="steady-state window (s)")
    parser.add_argument("--lease", type=float, default=5.0, help="shard lease duration (s)")
    parser.add_argument("--children", type=int, default=1,
                        help="ConfigMaps per parent (default 1)")
    parser.add_argument("--replicas", default="1,2,3",
                        help="replica counts to run, 3 among them (default 1,2,3: the figures "
                             "the acceptance checks read need all three)")
    args = parser.parse_args(argv)
    try:
        counts = tuple(int(n) for n in args.replicas.split(","))
        result = run(parents=args.parents, steady=args.steady, lease=args.lease, counts=counts,
                     children=args.children)
    except (ApiError, TimeoutError, ValueError) as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 1
    for n, figures in result["per_replica"].items():
        print(f"{n} replica(s), {result['parents']} parents: median replica "
              f"{figures['cpu_s']} CPU s ({figures['cpu_converge_s']} converging, "
              f"{figures['cpu_work_s']} after start), "
              f"{figures['peak_rss_mb']} MB peak RSS ({figures['peak_rss_above_base_mb']} above "
              f"base), {figures['cached_objects']} cached objects, "
              f"{figures['requests']} requests; converged in {figures['converge_s']} s")
    steps = ", ".join(f"{k} {v}" for k, v in result["takeover_timeline"].items())
    print(f"takeover after kill -9: {result['takeover_s']} s (lease "
          f"{result['lease_duration_s']} s; {steps}; CPU s from the kill until every parent "
          f"and child is in the survivors' caches: {result['takeover_cpu_s']}); "
          f"join moved {result['moved_on_join']:.1%} with {result['drains_on_join']} drains; "
          f"overlapping writers: {result['overlapping_writers']}")
    lead = result["assigner_replica"]
    if lead:
        print(f"the replica running the assigner ({lead['assigner_cached']} objects in its "
              f"cache): {lead['peak_rss_mb']} MB peak RSS ({lead['peak_rss_above_base_mb']} above "
              f"base), the others {lead['others_peak_rss_mb']} "
              f"({lead['others_peak_rss_above_base_mb']})")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
