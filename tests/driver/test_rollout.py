"""A new operator version rolled out in batches (issue 29, ``Operator(rollout=Rollout(...))``):
on the embedded server, with its request log as the witness of which parents were written.

Server-only: the request log is the embedded server's (``enable_request_log``)."""

from __future__ import annotations

import json
import logging
import re
import textwrap
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest

from reconciler import KubernetesClient, LeaderElection, Readiness, Reporting, Rollout
from reconciler._commands.cli import main
from reconciler._commands.rollouts import rollout_action, rollout_store
from reconciler._driver.rollout_plan import Phase, RolloutState
from reconciler._driver.rollouts import PAUSED_CONDITION
from reconciler._driver.runtime import OperatorRuntime
from reconciler._driver.upgrades import operator_fingerprint
from reconciler.testing import wait_idle
from tests.driver.conftest import child_data, import_file, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION, GROUP
from tests.driver.test_kstatus_parents import _build as with_web

_SOURCE = '''
"""Version {version} of a Thing operator (its rollout test)."""
from builders import child_name, resource_builder
from builders.objects import config_map
from reconciler import Operator, Reporting, ResyncPolicy


@resource_builder
def settings(parent):
    value = str(parent["spec"]["value"])
    if {strict} and value == "bad":
        raise ValueError("value 'bad' is no longer accepted")
    return config_map(metadata={{"name": child_name(parent["metadata"]["name"], "cfg")}},
                      data={{"value": value, {extra}}})


def build(parent):
    return [settings(parent)]


operator = Operator(api_version={api_version!r}, kind="Thing", build=build, name={name!r},
                    namespace={namespace!r}, reporting=Reporting(events=False),
                    resync=ResyncPolicy(heartbeat=0.5, heartbeat_namespace={namespace!r}))
'''

_WRITES = frozenset({"create", "update", "patch", "delete"})
_PARENTS = [f"p-{index:02d}" for index in range(50)]
_FAILING = "p-07"  # second batch of five
_CONSENTING = "p-30"  # changed by its owner while the rollout is paused


def _version(folder: Path, version: str, **fields: Any) -> tuple[ModuleType, Path]:
    """Write and import one version of the operator's module (its own directory)."""
    where = folder / f"v{version}"
    where.mkdir()
    path = where / f"rollout_operator_{version}.py"
    path.write_text(textwrap.dedent(_SOURCE.format(version=version, **fields)))
    return import_file(path), path


def _versions(folder: Path, namespace: str) -> tuple[ModuleType, ModuleType, str]:
    """Version 1 (accepts every value) and version 2 (adds ``release: "2"``, refuses "bad") of
    one operator, and the ``optk`` target of version 2."""
    fields = {"name": f"r-{uuid.uuid4().hex[:6]}", "namespace": namespace,
              "api_version": API_VERSION}
    one, _ = _version(folder, "1", strict=False, extra="", **fields)
    two, path = _version(folder, "2", strict=True, extra='"release": "2"', **fields)
    return one, two, f"{path}:operator"


def _writes(kube_api: Any, namespace: str, since: float) -> dict[str, int]:
    """Writes since ``since`` per parent name (to the parent or its ConfigMap ``<name>-cfg``)."""
    counts: dict[str, int] = {}
    for record in kube_api.request_log():
        if record.at >= since and record.namespace == namespace and record.verb in _WRITES and (
                record.resource in (f"things.{GROUP}", f"things.{GROUP}/status", "configmaps")):
            parent = (record.name or "").removesuffix("-cfg")
            counts[parent] = counts.get(parent, 0) + 1
    return counts


def _state(runtime: OperatorRuntime) -> RolloutState | None:
    """The rollout as the runtime last saw it (None: none, or not yet read)."""
    return None if runtime.rollout is None else runtime.rollout.state


def _phase(runtime: OperatorRuntime) -> Phase | None:
    return None if (state := _state(runtime)) is None else state.phase


def _cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["rollout", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_new_version_rolls_out_in_batches_pauses_on_a_failure_and_resumes(
    client: KubernetesClient, kube_api: Any, ns: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="optk")
    one, two, target = _versions(tmp_path, ns)
    rollout = Rollout(max_in_flight=5, batch_timeout=20, poll=0.1)
    new = attrs.evolve(two.operator, rollout=rollout, reporting=Reporting(events=True))
    kubeconfig = str(kube_api.kubeconfig_path)
    with running(one.operator, client) as runtime:
        for parent in _PARENTS:
            client.create(thing(ns, parent, "bad" if parent == _FAILING else "1"))
        assert wait_until(lambda: all(child_data(client, ns, p) is not None for p in _PARENTS),
                          timeout=20)
        assert wait_idle(runtime, 10)
        assert wait_until(lambda: runtime.upgrade.completed)
    kube_api.enable_request_log()
    started = time.time()
    with running(new, client) as runtime:
        assert wait_until(lambda: _phase(runtime) is Phase.PAUSED, timeout=20)
        state = _state(runtime)
        assert state is not None
        assert (state.batch, state.failed) == (2, f"{ns}/{_FAILING}")
        assert "no longer accepted" in state.reason
        pauses = [r for r in caplog.records if "paused at batch 2 by" in r.getMessage()]
        assert [r.levelno for r in pauses] == [logging.WARNING]  # one log line
        assert wait_idle(runtime, 10, settle=0.3)
        # the first two batches run the new code (the failing parent aside), later ones nothing
        assert all(child_data(client, ns, p) == {"value": "1", "release": "2"}
                   for p in _PARENTS[:10] if p != _FAILING)
        assert all(child_data(client, ns, p) == {"value": "1"} for p in _PARENTS[10:])
        paused = client.get(API_VERSION, "Thing", _FAILING, namespace=ns)
        condition = {c["type"]: c for c in paused["status"]["conditions"]}[PAUSED_CONDITION]
        assert condition["status"] == "True"
        assert "batch 2" in condition["message"]
        events = client.list("v1", "Event", namespace=ns)["items"]
        assert any(e.get("reason") == "RolloutPaused"
                   and e["involvedObject"]["name"] == _FAILING for e in events)
        assert b"optk_rollout_paused 1.0" in runtime.metrics.exposition()
        # a spec change is consent: that parent is reconciled with the new version at once
        client.patch(API_VERSION, "Thing", _CONSENTING, {"spec": {"value": "3"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: child_data(client, ns, _CONSENTING) == {
            "value": "3", "release": "2"})
    code, out = _cli("status", target, "--kubeconfig", kubeconfig, "-o", "json", capsys=capsys)
    assert code == 0
    record = json.loads(out)["rollout"]
    assert (record["phase"], record["batch"], record["failed"]) == ("Paused", 2, f"{ns}/p-07")
    writes = _writes(kube_api, ns, started)
    assert {p for p in _PARENTS[10:] if writes.get(p)} == {_CONSENTING}, writes
    # a restart in the middle continues where it stopped: still paused at batch 2
    with running(new, client) as runtime:
        assert wait_until(lambda: _phase(runtime) is Phase.PAUSED)
        assert getattr(_state(runtime), "batch", None) == 2
        assert wait_idle(runtime, 10, settle=0.3)
        assert {p for p in _PARENTS[10:] if _writes(kube_api, ns, started).get(p)} == {
            _CONSENTING}
        # the owner fixes the parent (consent: reconciled at once), then resumes the rollout
        client.patch(API_VERSION, "Thing", _FAILING, {"spec": {"value": "1"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        assert wait_until(lambda: child_data(client, ns, _FAILING) == {
            "value": "1", "release": "2"})
        code, out = _cli("resume", target, "--kubeconfig", kubeconfig, capsys=capsys)
        assert code == 0
        assert "Rolling" in out
        assert wait_until(lambda: runtime.upgrade.completed, timeout=30)
        assert all(child_data(client, ns, p) == {"value": "3" if p == _CONSENTING else "1",
                                                 "release": "2"} for p in _PARENTS)
        fixed = client.get(API_VERSION, "Thing", _FAILING, namespace=ns)
        condition = {c["type"]: c for c in fixed["status"]["conditions"]}[PAUSED_CONDITION]
        assert condition["status"] == "False"
    lease = client.get("coordination.k8s.io/v1", "Lease", f"{new.name}-resync", namespace=ns)
    assert lease["metadata"]["annotations"]["optk.dev/operator-fingerprint"] == (
        operator_fingerprint(new))
    code, out = _cli("status", target, "--kubeconfig", kubeconfig, capsys=capsys)
    assert code == 0
    assert "Done" in out
    assert _cli("resume", target, "--kubeconfig", kubeconfig, capsys=capsys)[0] == 1


def test_abort_leaves_the_unrolled_parents_alone_across_restarts(
    client: KubernetesClient, kube_api: Any, ns: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    one, two, target = _versions(tmp_path, ns)
    rollout = Rollout(max_in_flight=2, batch_timeout=20, poll=0.1)
    old = attrs.evolve(one.operator, rollout=rollout)
    new = attrs.evolve(two.operator, rollout=rollout)
    parents = [f"q-{index}" for index in range(6)]
    with running(old, client) as runtime:  # a first start: nothing to roll out
        for parent in parents:
            client.create(thing(ns, parent, "bad" if parent == "q-2" else "1"))
        assert wait_until(lambda: all(child_data(client, ns, p) is not None for p in parents))
        assert wait_until(lambda: runtime.upgrade.completed)
        assert wait_idle(runtime, 10)
    with running(old, client) as runtime:  # the same code again: the gate opens, no herd
        assert wait_until(lambda: runtime.upgrade.completed)
        assert wait_idle(runtime, 10, settle=0.3)
        assert (runtime.stats.total, runtime.stats.writes) == (0, 0)
    kube_api.enable_request_log()
    started = time.time()
    kubeconfig = str(kube_api.kubeconfig_path)
    with running(new, client) as runtime:
        assert wait_until(lambda: _phase(runtime) is Phase.PAUSED, timeout=20)
        code, out = _cli("abort", target, "--kubeconfig", kubeconfig, capsys=capsys)
        assert code == 0, out
        assert "Aborted" in out
        assert "unreconciled by this version" in out
        assert wait_until(lambda: _phase(runtime) is Phase.ABORTED)
        runtime.resync_all()  # a resync of everything still leaves the rest alone
        assert wait_idle(runtime, 10, settle=0.3)
    with running(new, client) as runtime:  # and so does a restart: abort is final
        assert wait_until(lambda: _phase(runtime) is Phase.ABORTED)
        runtime.resync_all()
        assert wait_idle(runtime, 10, settle=0.3)
        assert not runtime.upgrade.completed
    assert [child_data(client, ns, p) for p in parents[:2]] == [
        {"value": "1", "release": "2"}] * 2
    assert [child_data(client, ns, p) for p in parents[4:]] == [{"value": "1"}] * 2
    writes = _writes(kube_api, ns, started)
    assert not writes.get("q-4")
    assert not writes.get("q-5")
    assert _cli("abort", target, "--kubeconfig", kubeconfig, capsys=capsys)[0] == 1


def test_a_new_leader_continues_the_rollout_where_the_old_one_paused(
    client: KubernetesClient, kube_api: Any, ns: str, tmp_path: Path,
) -> None:
    one, two, _ = _versions(tmp_path, ns)
    election = LeaderElection(namespace=ns, lease_duration=20.0, renew_deadline=12.0,
                              retry_period=8.0)
    rollout = Rollout(max_in_flight=2, batch_timeout=20, poll=0.1)
    new = attrs.evolve(two.operator, rollout=rollout, leader_election=election)
    parents = [f"q-{index}" for index in range(6)]
    with running(one.operator, client) as runtime:
        for parent in parents:
            client.create(thing(ns, parent, "bad" if parent == "q-2" else "1"))
        assert wait_until(lambda: all(child_data(client, ns, p) is not None for p in parents))
        assert wait_until(lambda: runtime.upgrade.completed)
    first = new.start(client, identity="first")
    second = None
    try:
        assert wait_until(lambda: _phase(first) is Phase.PAUSED, timeout=20)
        second = new.start(client, identity="second")
        first.stop(5)  # releases the leader Lease: the standby takes over at once
        assert wait_until(lambda: second is not None and second.leading, timeout=10)
        assert wait_until(lambda: _phase(second) is Phase.PAUSED)
        assert getattr(_state(second), "batch", None) == 2
        assert [child_data(client, ns, p) for p in parents[4:]] == [{"value": "1"}] * 2
        client.patch(API_VERSION, "Thing", "q-2", {"spec": {"value": "1"}},
                     patch_type="application/merge-patch+json", namespace=ns)
        store = rollout_store(client, new)
        assert rollout_action(store, "resume", now=time.time())[0] is not None
        assert wait_until(lambda: second is not None and second.upgrade.completed, timeout=20)
        assert all(child_data(client, ns, p) == {"value": "1", "release": "2"} for p in parents)
    finally:
        if not first.finished:
            first.stop(5)
        if second is not None:
            second.stop(5)


def _deployments(client: KubernetesClient, namespace: str) -> set[str]:
    return {d["metadata"]["name"] for d in client.list(
        "apps/v1", "Deployment", namespace=namespace)["items"]}


def test_a_batch_not_ready_by_its_timeout_pauses_the_rollout(
    client: KubernetesClient, ns: str, tmp_path: Path,
) -> None:
    one, _, _ = _versions(tmp_path, ns)
    # the new version adds a Deployment, which never becomes available here (the embedded
    # server runs no controller): its parents never turn Ready
    new = attrs.evolve(one.operator, build=with_web,
                       reporting=attrs.evolve(one.operator.reporting,
                                              readiness=Readiness(recheck=0.2)),
                       rollout=Rollout(max_in_flight=2, batch_timeout=2.0, poll=0.1))
    parents = ["t-0", "t-1", "t-2"]
    with running(one.operator, client) as runtime:
        for parent in parents:
            client.create(thing(ns, parent))
        assert wait_until(lambda: all(child_data(client, ns, p) is not None for p in parents))
        assert wait_until(lambda: runtime.upgrade.completed)
    with running(new, client) as runtime:
        assert wait_until(lambda: _phase(runtime) is Phase.PAUSED, timeout=20)
        state = _state(runtime)
        assert state is not None
        assert (state.batch, state.failed) == (1, f"{ns}/t-0")
        # not Ready (or, on a machine loaded enough, not even reconciled) within the timeout
        assert re.match(r"not (Ready|reconciled) 2s after batch 1 started \([12] of 2 parents",
                        state.reason), state.reason
        assert wait_until(lambda: len(_deployments(client, ns)) >= 2)
        time.sleep(0.5)  # the third parent's resync or recheck would come now: it does not
    assert _deployments(client, ns) == {"t-0-web", "t-1-web"}  # its batch never came
