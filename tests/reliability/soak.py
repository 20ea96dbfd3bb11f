"""``python -m tests.reliability.soak [--seconds N]``: the soak run of ``make soak`` (10 minutes).

An embedded server in this process, the example operator as a process, 50 parents. At a steady
rate (one drift every ``--interval`` seconds) a random drift lands: a parent's spec changes, a
child is edited by hand or deleted. Every ``--sample`` seconds one child is edited and the time
until the operator repairs it is measured, with the operator's and this process's (the
server's) resident memory. At the end: every parent converged, nothing duplicated or lost, and
both stable (the last third of the samples against the first: memory within 1.5x + 64 MiB, the
repair latency's median within 3x + 1 s). Figures go to the counter file; exit 0 when stable.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from objectmatcher import MERGE_PATCH
from reconciler import KubernetesClient
from reconciler.embedded import EmbeddedApiServer
from reconciler.embedded._storage import DEFAULT_HISTORY_BYTES
from tests.reliability import _counts
from tests.reliability._harness import Fleet, OperatorProcess, eventually

__all__ = ["main", "run_soak"]


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _drift(fleet: Fleet, rng: random.Random) -> str:
    name = rng.choice(fleet.names)
    draw = rng.random()
    if draw < 0.4:
        fleet.random_change(rng)
        return "spec"
    if draw < 0.8:
        fleet.client.patch("apps/v1", "Deployment", f"{name}-query",
                           {"spec": {"replicas": rng.randint(7, 9)}}, patch_type=MERGE_PATCH,
                           namespace=fleet.namespace)
        return "edit"
    fleet.client.delete("v1", "Service", f"{name}-query", namespace=fleet.namespace)
    return "delete"


def run_soak(*, seconds: float, interval: float = 0.5, sample: float = 10.0,
             parents: int = 50, seed: int = 7,
             history_bytes: int = DEFAULT_HISTORY_BYTES) -> dict[str, object]:
    """Run the soak for ``seconds``; returns its figures (``stable`` says whether it passed).
    ``history_bytes``: the server's watch history bound (a small one fills within minutes, so
    the server's memory should be flat for the rest of the run)."""
    rng = random.Random(seed)
    samples: list[dict[str, float]] = []
    drifts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="optk-soak-") as workdir, \
            EmbeddedApiServer(history_bytes=history_bytes) as server:
        client = KubernetesClient(server.api_client())
        replica = OperatorProcess(kubeconfig=server.kubeconfig_path,
                                  log=Path(workdir) / "operator.log")
        try:
            replica.start()
            eventually(lambda: client.is_served("monitoring.optk.dev/v1alpha1", "Thanos"),
                       "the Thanos CRD", 60)
            fleet = Fleet(client, "soak")
            fleet.create_namespace()
            fleet.create_parents(parents)
            fleet.wait_converged(120)
            started = time.monotonic()
            next_sample = started
            while time.monotonic() - started < seconds:
                kind = _drift(fleet, rng)
                drifts[kind] = drifts.get(kind, 0) + 1
                if time.monotonic() >= next_sample:
                    probe = rng.choice(fleet.names)
                    client.patch("apps/v1", "Deployment", f"{probe}-query",
                                 {"spec": {"replicas": 99}}, patch_type=MERGE_PATCH,
                                 namespace="soak")
                    latency = eventually(lambda probe=probe: fleet.live(
                        "apps/v1", "Deployment", f"{probe}-query")["spec"]["replicas"] != 99,
                        f"{probe}-query repaired", 60)
                    samples.append({"at": round(time.monotonic() - started, 1),
                                    "repair_seconds": round(latency, 3),
                                    "operator_rss_mib": round(_rss_mib(replica.pid), 1),
                                    "server_rss_mib": round(_rss_mib(os.getpid()), 1)})
                    next_sample += sample
                time.sleep(interval)
            converge = fleet.wait_converged(120)
            duplicated, lost = fleet.census()
        finally:
            replica.kill()
    third = max(1, len(samples) // 3)
    first, last = samples[:third], samples[-third:]

    def median(rows: list[dict[str, float]], key: str) -> float:
        return float(statistics.median(row[key] for row in rows))

    stable = (duplicated, lost) == (0, 0) and all(
        median(last, key) <= median(first, key) * 1.5 + 64
        for key in ("operator_rss_mib", "server_rss_mib")
    ) and median(last, "repair_seconds") <= median(first, "repair_seconds") * 3 + 1.0
    half = samples[len(samples) // 2:]
    span = half[-1]["at"] - half[0]["at"] if len(half) > 1 else 0.0
    figures: dict[str, object] = {
        "seconds": seconds, "history_bytes": history_bytes,
        # the slope over the second half of the run, MiB per minute
        **{f"{key}_per_min_second_half": round(
            (half[-1][key] - half[0][key]) / span * 60, 2) if span else None
           for key in ("operator_rss_mib", "server_rss_mib")},
        "drifts": drifts, "samples": samples, "stable": stable,
        "final_converge_seconds": round(converge, 2), "duplicated": duplicated, "lost": lost,
    }
    _counts.add("soak", {"soak.drifts": sum(drifts.values()), "objects.duplicated": duplicated,
                         "objects.lost": lost, "soak.samples": len(samples)})
    for key in ("operator_rss_mib", "server_rss_mib", "repair_seconds"):
        _counts.figure(f"soak.{key}.first_third_median", median(first, key))
        _counts.figure(f"soak.{key}.last_third_median", median(last, key))
        _counts.figure(f"soak.{key}.max", max(row[key] for row in samples))
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak and print its figures as JSON (last line); exit 1 when not stable."""
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.soak")
    parser.add_argument("--seconds", type=float, default=600.0, help="how long (default 600)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between drifts")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--history-bytes", type=int, default=DEFAULT_HISTORY_BYTES,
                        help="the server's watch history bound, bytes (default 64 MiB)")
    args = parser.parse_args(argv)
    figures = run_soak(seconds=args.seconds, interval=args.interval, sample=args.sample,
                       history_bytes=args.history_bytes)
    print(json.dumps(figures, sort_keys=True))
    return 0 if figures["stable"] else 1


if __name__ == "__main__":
    sys.exit(main())
