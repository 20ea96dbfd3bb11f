"""The reliability suite's shared shell: the operator as a process, a fleet of parents, checks.

``OperatorProcess`` runs ``python -m reconciler run MODULE:ATTR --kubeconfig PATH`` (what
``optk run`` runs) with its stderr in a file and a metrics port, and always ends it (SIGKILL at
the latest). ``Fleet`` creates ``Thanos`` parents in one namespace and answers the questions
every phase asks: which parents have not converged (children as built and Ready for their
generation), which children are duplicated or lost, whether seeded objects that are not ours
were written. Only public names are used: the official client (through ``KubernetesClient``),
``builders.run_builders``, ``objectmatcher.calculate_patch`` and the example's ``build``.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from builders import run_builders
from builders.names import INSTANCE_LABEL, MANAGED_BY_LABEL
from examples.thanos import builders as thanos
from examples.thanos.crds import API_VERSION, KIND
from objectmatcher import MERGE_PATCH, calculate_patch
from reconciler import ApiError, KubernetesClient, NotFoundError

__all__ = ["CHILD_KINDS", "ROOT", "SOAK", "Fleet", "OperatorProcess", "eventually", "free_port"]

ROOT = Path(__file__).resolve().parents[2]
SOAK = os.environ.get("OPTK_SOAK", "") not in ("", "0")
"""Longer runs (``make soak`` sets ``OPTK_SOAK=1``); CI uses the small figures."""

CHILD_KINDS = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("networking.k8s.io/v1", "Ingress"),
)
THANOS = "examples.thanos.operator:operator"


def eventually(condition: Callable[[], bool], what: str, timeout: float) -> float:
    """Wait (bounded) until ``condition()``; returns the seconds it took, fails naming ``what``."""
    start = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - start
        except (ApiError, OSError):
            pass  # the server may be away or faulty while we wait
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OperatorProcess:
    """One operator replica as a process; ``kill()`` in a finalizer always ends it."""

    def __init__(self, *, kubeconfig: Path, log: Path, target: str = THANOS,
                 environ: Mapping[str, str] | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.log = log
        self.target = target
        self.environ = dict(environ or {})
        self.metrics_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> OperatorProcess:
        """Start (or restart) the process."""
        assert self.process is None or self.process.poll() is not None
        env = {**os.environ, "PYTHONPATH": str(ROOT), **self.environ}
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "reconciler", "run", self.target, "--kubeconfig",
                 str(self.kubeconfig), "--metrics-port", str(self.metrics_port)],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )
        self.starts += 1
        return self

    @property
    def pid(self) -> int:
        """The running process id."""
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        """Whether the process runs."""
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the running process."""
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL (after a SIGCONT, in case it was stopped) and reap."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(10)

    def metrics(self) -> str:
        """The /metrics text ('' while it does not answer)."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2
            ) as answer:
                return str(answer.read().decode())
        except OSError:
            return ""

    def ready(self) -> bool:
        """Whether /readyz answers 200 (caches synced)."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=2
            ) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def reconciles(self) -> int:
        """``controller_runtime_reconcile_total`` summed over results (0 before it answers)."""
        total = 0.0
        for match in re.finditer(r"^controller_runtime_reconcile_total\{[^}]*\} ([0-9.e+]+)$",
                                 self.metrics(), re.M):
            total += float(match.group(1))
        return int(total)

    def output(self) -> str:
        """Everything the process wrote (stdout and stderr, all starts)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _ready(parent: Mapping[str, Any]) -> bool:
    generation = parent["metadata"].get("generation")
    for condition in (parent.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True"
                        and condition.get("observedGeneration", generation) == generation)
    return False


def base_spec(index: int) -> dict[str, Any]:
    """The spec of the fleet's parent number ``index`` (2 or 4 children)."""
    spec: dict[str, Any] = {"query": {"replicas": 1 + index % 3}}
    if index % 2 == 0:
        spec["rule"] = {}
    return spec


class Fleet:
    """``Thanos`` parents ``p0..pN-1`` in ``namespace`` and the checks on their children."""

    def __init__(self, client: KubernetesClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.names: list[str] = []

    def create_namespace(self) -> None:
        """Create the namespace."""
        self.client.create({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": self.namespace}})

    def create_parents(self, count: int, *, prefix: str = "p") -> None:
        """Create ``count`` parents."""
        for index in range(count):
            name = f"{prefix}{index}"
            self.client.create({"apiVersion": API_VERSION, "kind": KIND,
                                "metadata": {"name": name, "namespace": self.namespace},
                                "spec": base_spec(index)})
            self.names.append(name)

    def parent(self, name: str) -> dict[str, Any] | None:
        """The live parent or None."""
        try:
            return self.client.get(API_VERSION, KIND, name, namespace=self.namespace)
        except NotFoundError:
            return None

    def patch_parent(self, name: str, patch: Mapping[str, Any]) -> None:
        """A merge patch of a parent, as a user's ``kubectl patch --type merge``."""
        self.client.patch(API_VERSION, KIND, name, patch, patch_type=MERGE_PATCH,
                          namespace=self.namespace)

    def random_change(self, rng: random.Random) -> str:
        """Change one random parent's spec (replicas, the rule block on or off); its name."""
        name = rng.choice(self.names)
        if rng.random() < 0.5:
            self.patch_parent(name, {"spec": {"query": {"replicas": rng.randint(1, 6)}}})
        else:
            self.patch_parent(name, {"spec": {"rule": {} if rng.random() < 0.5 else None}})
        return name

    def live(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        """The live object or None."""
        try:
            return self.client.get(api_version, kind, name, namespace=self.namespace)
        except NotFoundError:
            return None

    def pending(self, name: str) -> list[str]:
        """What keeps parent ``name`` from being converged ([] when it is)."""
        parent = self.parent(name)
        if parent is None:
            return [f"{KIND} {name} missing"]
        problems = []
        for desired, state in run_builders(thanos.build(parent), parent=parent):
            meta = desired["metadata"]
            live = self.live(desired["apiVersion"], desired["kind"], meta["name"])
            label = f"{desired['kind']} {meta['name']}"
            if state.is_absent:
                if live is not None and not live["metadata"].get("deletionTimestamp"):
                    problems.append(f"{label} still exists")
            elif live is None:
                problems.append(f"{label} missing")
            elif not calculate_patch(live, desired).is_empty:
                problems.append(f"{label} differs")
        if not _ready(parent):
            problems.append(f"{name} not Ready for generation {parent['metadata']['generation']}")
        return problems

    def unconverged(self) -> dict[str, list[str]]:
        """Every parent that has not converged, with its problems."""
        found = {}
        for name in self.names:
            problems = self.pending(name)
            if problems:
                found[name] = problems
        return found

    def wait_converged(self, timeout: float) -> float:
        """Wait until every parent converged; the seconds it took (fails listing the rest)."""
        start = time.monotonic()
        left: dict[str, list[str]] = {}
        while time.monotonic() - start < timeout:
            try:
                left = self.unconverged()
            except (ApiError, OSError) as error:
                left = {"(server)": [str(error)]}
            if not left:
                return time.monotonic() - start
            time.sleep(0.25)
        shown = "; ".join(f"{k}: {', '.join(v)}" for k, v in list(left.items())[:5])
        raise AssertionError(f"{len(left)} parents not converged after {timeout:.0f} s: {shown}")

    def census(self) -> tuple[int, int]:
        """(duplicated, lost): children beyond or missing from what the parents build.

        Duplicated counts live objects labelled as a fleet parent's child (managed-by the example)
        that its builders do not want present, plus any (parent, kind, component) seen twice;
        lost counts wanted children that do not exist."""
        wanted: set[tuple[str, str]] = set()
        for name in self.names:
            parent = self.parent(name)
            if parent is None:
                continue
            for desired, state in run_builders(thanos.build(parent), parent=parent):
                if not state.is_absent:
                    wanted.add((desired["kind"], desired["metadata"]["name"]))
        names = set(self.names)
        seen: Counter[tuple[str, str]] = Counter()
        slots: Counter[tuple[str, str, str]] = Counter()
        for api_version, kind in CHILD_KINDS:
            items = self.client.list(api_version, kind, namespace=self.namespace,
                                     label_selector=f"{MANAGED_BY_LABEL}={thanos.OPERATOR_NAME}")
            for item in items.get("items", []):
                meta = item["metadata"]
                labels = meta.get("labels") or {}
                if meta.get("deletionTimestamp") or labels.get(INSTANCE_LABEL) not in names:
                    continue  # being deleted, or a child of a parent outside this fleet
                seen[(kind, meta["name"])] += 1
                slots[(kind, labels.get(INSTANCE_LABEL, ""),
                       labels.get("app.kubernetes.io/component", ""))] += 1
        duplicated = sum(1 for key in seen if key not in wanted)
        duplicated += sum(n - 1 for n in slots.values() if n > 1)
        lost = sum(1 for key in wanted if key not in seen)
        return duplicated, lost

    def seed_unowned(self, count: int) -> dict[tuple[str, str], str]:
        """Objects that are not ours (no owner, no managed-by), some named like children;
        returns their resourceVersions by (kind, name)."""
        seeds: dict[tuple[str, str], str] = {}
        for index in range(count):
            made = self.client.create({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"not-ours-{index}", "namespace": self.namespace,
                             "labels": {"app.kubernetes.io/name": "thanos"}},
                "data": {"owner": "someone else"},
            })
            seeds[("ConfigMap", made["metadata"]["name"])] = made["metadata"]["resourceVersion"]
        made = self.client.create({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "not-ours-query", "namespace": self.namespace},
            "spec": {"ports": [{"port": 80}]},
        })
        seeds[("Service", "not-ours-query")] = made["metadata"]["resourceVersion"]
        return seeds

    def written_seeds(self, seeds: Mapping[tuple[str, str], str]) -> list[str]:
        """The seeded objects whose resourceVersion changed (or that are gone)."""
        changed = []
        for (kind, name), version in seeds.items():
            live = self.live("v1", kind, name)
            if live is None or live["metadata"]["resourceVersion"] != version:
                changed.append(f"{kind} {name}")
        return changed
