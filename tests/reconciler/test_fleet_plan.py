"""``optk plan --all``: every parent planned from one LIST per kind; nothing written."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from builders import DesiredState, ObjectRef, ResourceBuilder
from reconciler import KubernetesClient, ParentReconciler, Policies, ReconcilerUsageError
from reconciler._commands.cli import main
from reconciler._commands.fleet_plans import plan_fleet
from reconciler._commands.fleet_report import (
    EXIT_CHILD_ERRORS,
    EXIT_NO_CHANGES,
    EXIT_OVER_MAX_CHANGES,
    FleetPlan,
    FleetSummary,
    fleet_exit_code,
    fleet_plan_json,
    format_fleet_plan,
    summarize,
)
from reconciler._driver.operators import Operator
from reconciler._reconcile.conditions import ChildError, ParentResult
from reconciler._reconcile.reconciling import Action, ReconcileResult
from reconciler.embedded import Faults
from reconciler.envtest._argv import ADMIN_USER
from tests.reconciler import plan_operator
from tests.reconciler.conftest import Requests
from tests.reconciler.test_plans import API, stack_kind

__all__ = ["stack_kind"]  # the fixture, used by name

TARGET = "tests.reconciler.plan_operator"
NEW_VERSION = '''
from builders import DesiredState
from reconciler import Policies
from reconciler._driver.operators import Operator
from reconciler.embedded import Faults
from tests.reconciler import plan_operator


def build(parent):
    """Version 2: the ConfigMap gains a key, the Secret a new password; parent p2 drops it."""
    config, secret = [b()[0] for b in plan_operator.build(parent)]
    config = {**config, "data": {**config["data"], "version": "2"}}
    secret = {**secret, "stringData": {"password": "s3cret-v2"}}
    wanted = [(config, DesiredState.PRESENT)]
    if parent["metadata"]["name"] != "p2":
        wanted.append((secret, DesiredState.PRESENT))
    return [lambda w=w: w for w in wanted]


operator = Operator(api_version="plans.optk.dev/v1", kind="Stack", build=build,
                    name="plan-operator", policies=Policies(prune=[("v1", "Secret")]))
'''


def fleet(client: KubernetesClient, ns: str, count: int) -> list[dict[str, Any]]:
    """``count`` Stack parents, each reconciled by the operator as it is (version 1)."""
    reconciler = ParentReconciler(client, plan_operator.build, operator_name="plan-operator")
    parents = []
    for index in range(count):
        parent = client.create({"apiVersion": API, "kind": "Stack",
                                "metadata": {"name": f"p{index}", "namespace": ns},
                                "spec": {"size": index, "password": f"pw-{index}"}})
        assert reconciler.reconcile(parent).ok
        parents.append(parent)
    return parents


def object_gets(kube_api: Any, ns: str) -> int:
    """GET requests for objects in ``ns`` so far: on the real control plane from its audit log
    (whose ``get`` verb also counts the client's ``/version`` probe and discovery documents),
    once it has settled: kube-apiserver writes a request's event after its response, so the
    setup's last reads may reach the log after the test has its answers. Only the admin's
    requests count (the test's client and ``optk`` use its kubeconfig): kube-controller-manager
    reads in a new namespace too (its ServiceAccount and root CA ConfigMap), whenever it gets
    round to it on a loaded machine."""
    if not hasattr(kube_api, "audit_log_path"):
        return int(kube_api.request_counts().get("get", 0))
    seen, deadline = _audited_gets(kube_api, ns), time.monotonic() + 10.0
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = _audited_gets(kube_api, ns)
        if now == seen:
            break
        seen = now
    return seen


def _audited_gets(kube_api: Any, ns: str) -> int:
    kube_api.request_counts()  # reads the audit log up to now
    seen = set()
    for line in Path(kube_api.audit_log_path).read_text().splitlines():
        event = json.loads(line)
        if (event.get("verb") == "get"
                and (event.get("user") or {}).get("username") == ADMIN_USER
                and (event.get("objectRef") or {}).get("namespace") == ns):
            seen.add(event["auditID"])
    return len(seen)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


@pytest.mark.both_servers
def test_plan_all_unchanged_then_a_new_version(
    kube_api: Any, client: KubernetesClient, stack_kind: None, ns: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fleet(client, ns, 3)
    kubeconfig = str(kube_api.kubeconfig_path)
    gets = object_gets(kube_api, ns)
    with Requests(kube_api) as unchanged:
        code, out = run(["plan", "--all", TARGET, "--namespace", ns,
                         "--kubeconfig", kubeconfig], capsys)
    assert (code, out.strip()) == (EXIT_NO_CHANGES, "no changes: 3 parents, 6 unchanged")
    assert unchanged.writes == 0
    assert object_gets(kube_api, ns) == gets  # one list per kind, no per-parent read

    new_version = tmp_path / "operator_v2.py"
    new_version.write_text(NEW_VERSION)
    with Requests(kube_api) as planned:
        code, out = run(["plan", "--all", str(new_version), "--namespace", ns,
                         "--kubeconfig", kubeconfig], capsys)
    assert code == EXIT_OVER_MAX_CHANGES
    assert planned.writes == 0
    assert object_gets(kube_api, ns) == gets
    # parents, ConfigMaps, Secrets: one list each (the CRD schemas are not read: core kinds)
    assert planned.count("list") == 3
    for index in range(3):
        assert f"update    ConfigMap.v1 {ns}/p{index}-config" in out
        assert '+ data.version: "2"' in out
    assert f"delete    Secret.v1 {ns}/p2-secret" in out  # pruned: no longer built
    assert f"update    Secret.v1 {ns}/p0-secret" in out
    assert "s3cret-v2" not in out
    assert "pw-0" not in out
    assert out.strip().splitlines()[-1] == (
        "plan: 3 of 3 parents change: 0 to create, 5 to update, 0 to recreate, 1 to delete "
        "(6 writes); 0 unchanged")

    code, out = run(["plan", "--all", str(new_version), "--namespace", ns, "-o", "json",
                     "--max-changes", "6", "--kubeconfig", kubeconfig], capsys)
    document = json.loads(out)
    assert code == EXIT_NO_CHANGES == document["exitCode"]  # within the threshold
    assert document["summary"]["changes"] == 6
    assert document["summary"]["delete"] == 1
    assert document["requests"] == {"list": 3}
    [p0, _p1, p2] = document["parents"]
    assert (p0["namespace"], p0["name"], p0["unchanged"]) == (ns, "p0", 0)
    [config, secret] = p0["children"]
    assert config["action"] == "update"
    assert config["kind"] == "ConfigMap"
    assert {"op": "add", "path": ["data", "version"], "old": None, "new": "2"} in config["diff"]
    assert secret["action"] == "update"
    assert secret["diff"]
    assert "s3cret-v2" not in out
    assert "pw-1" not in out
    assert [c["action"] for c in p2["children"]] == ["update", "delete"]

    # a selector, and a parent whose pause is honoured: nothing planned for it
    client.patch(API, "Stack", "p1", {"metadata": {"labels": {"tier": "gold"},
                                                   "annotations": {"optk.dev/paused": "true"}}},
                 patch_type="application/merge-patch+json", namespace=ns)
    code, out = run(["plan", "--all", str(new_version), "--namespace", ns, "-l", "tier=gold",
                     "--kubeconfig", kubeconfig], capsys)
    assert code == EXIT_NO_CHANGES
    assert f"{ns}/p1" in out
    assert "paused" in out
    assert out.strip().splitlines()[-1] == "no changes: 1 parent, 0 unchanged, 1 parent paused"


def test_plan_fleet_reports_a_failing_builder_and_children_of_every_namespace(
    client: KubernetesClient, stack_kind: None, ns: str,
) -> None:
    fleet(client, ns, 2)

    def build(parent: Any) -> list[ResourceBuilder]:
        if parent["metadata"]["name"] == "p1":
            raise RuntimeError("version 2 cannot build p1")
        return plan_operator.build(parent)

    operator = Operator(api_version=API, kind="Stack", build=build, name="plan-operator")
    plan = plan_fleet(client, operator, selector=None, namespace=ns)
    summary = summarize(plan)
    assert (summary.parents, summary.errors, summary.changes) == (2, 1, 0)
    assert fleet_exit_code(summary, max_changes=100) == EXIT_CHILD_ERRORS
    text = format_fleet_plan(plan)
    assert "version 2 cannot build p1" in text
    assert f"{ns}/p1" in text
    assert plan.requests.get("get", 0) == 0


def test_parents_that_cannot_be_listed_are_a_command_error(
    kube_api: Any, client: KubernetesClient, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    module = tmp_path / "unserved.py"
    module.write_text(NEW_VERSION.replace("plans.optk.dev/v1", "unserved.optk.dev/v1"))
    assert main(["plan", "--all", str(module), "--kubeconfig", str(kube_api.kubeconfig_path)]) == 2
    assert "unserved.optk.dev/v1" in capsys.readouterr().err
    cluster = Operator(api_version="rbac.authorization.k8s.io/v1", kind="ClusterRole",
                       build=plan_operator.build, name="plan-operator")
    with pytest.raises(ReconcilerUsageError, match=r"ClusterRole .* parents are cluster-scoped"):
        plan_fleet(client, cluster, namespace="default")


def test_optk_plan_all_flags_need_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", TARGET, "-f", "x.yaml", "--max-changes", "3"]) == 2
    assert "--max-changes only with --all" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plan", TARGET, "-f", "x.yaml", "--all"])
    assert main(["plan", "--all", TARGET, "--max-changes", "-1"]) == 2
    assert "--max-changes must be 0 or more, got -1" in capsys.readouterr().err


def _child(action: Action, name: str, **extra: Any) -> ReconcileResult:
    return ReconcileResult(action=action, ref=ObjectRef(api_version="v1", kind="ConfigMap",
                                                        name=name, namespace="n"), **extra)


PARENT = ObjectRef(api_version=API, kind="Stack", name="p", namespace="n")


@pytest.mark.parametrize(("children", "errors", "max_changes", "code"), [
    ((), (), 0, EXIT_NO_CHANGES),
    ((Action.UNCHANGED, Action.SKIPPED), (), 0, EXIT_NO_CHANGES),
    ((Action.CREATED, Action.DELETED), (), 0, EXIT_OVER_MAX_CHANGES),
    ((Action.CREATED, Action.DELETED), (), 2, EXIT_NO_CHANGES),
    ((Action.RECREATED, Action.UPDATED, Action.UPDATED), (), 2, EXIT_OVER_MAX_CHANGES),
    ((Action.CREATED,), ("boom",), 5, EXIT_CHILD_ERRORS),
])
def test_exit_codes(children: tuple[Action, ...], errors: tuple[str, ...], max_changes: int,
                    code: int) -> None:
    result = ParentResult(
        parent=PARENT, children=tuple(_child(a, f"c{i}") for i, a in enumerate(children)),
        errors=tuple(ChildError(ref=PARENT, message=m, error=RuntimeError(m)) for m in errors))
    plan = FleetPlan(operator="o", parent_kind=(API, "Stack"), results=(result,))
    assert fleet_exit_code(summarize(plan), max_changes=max_changes) == code
    assert fleet_plan_json(plan, max_changes=max_changes)["exitCode"] == code


def test_held_writes_are_not_changes() -> None:
    held = _child(Action.UPDATED, "h", held="policy create-only", drift=("/data/a",))
    plan = FleetPlan(operator="o", parent_kind=(API, "Stack"),
                     results=(ParentResult(parent=PARENT, children=(held,)),))
    assert summarize(plan) == FleetSummary(parents=1, held=1)
    assert "held      ConfigMap.v1 n/h  (policy create-only)" in format_fleet_plan(plan)
    [entry] = fleet_plan_json(plan)["parents"][0]["children"]
    assert (entry["action"], entry["drift"]) == ("held", ["/data/a"])


def _deployment(parent: Any, selector: dict[str, str]) -> list[ResourceBuilder]:
    name = parent["metadata"]["name"]
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"{name}-app"},
           "spec": {"replicas": 1, "selector": {"matchLabels": selector},
                    "template": {"metadata": {"labels": selector}, "spec": {"containers": [
                        {"name": "app", "image": "nginx:1.25"}]}}}}
    return [lambda: (obj, DesiredState.PRESENT)]


def test_server_dry_run_finds_the_recreate_an_immutable_field_needs(
    client: KubernetesClient, stack_kind: None, ns: str, kube_api: Any,
) -> None:
    parent = client.create({"apiVersion": API, "kind": "Stack",
                            "metadata": {"name": "d", "namespace": ns}, "spec": {}})
    assert ParentReconciler(client, lambda p: _deployment(p, {"app": "d"}),
                            operator_name="plan-operator").reconcile(parent).ok
    operator = Operator(
        api_version=API, kind="Stack", name="plan-operator",
        build=lambda p: _deployment(p, {"app": "d", "track": "v2"}),
        policies=Policies(recreate=True),
    )
    local = plan_fleet(client, operator, namespace=ns)
    assert [c.action for c in local.results[0].children] == [Action.UPDATED]
    assert "patch" not in local.requests
    with Requests(kube_api) as sent:
        asked = plan_fleet(client, operator, namespace=ns, server_dry_run=True)
    assert [c.action for c in asked.results[0].children] == [Action.RECREATED]
    assert "recreate  Deployment.apps/v1" in format_fleet_plan(asked)
    assert asked.requests["patch"] == 1  # the one dry run, refused on spec.selector
    assert sent.count("patch") == 1
    assert sent.count("delete") == sent.count("create") == 0
    live = client.get("apps/v1", "Deployment", "d-app", namespace=ns)
    assert live["spec"]["selector"] == {"matchLabels": {"app": "d"}}


def test_plan_fleet_honours_policies_and_ignored_fields(
    client: KubernetesClient, stack_kind: None, ns: str,
) -> None:
    fleet(client, ns, 3)
    for name, annotation in (("p0", {"optk.dev/policy": "create-only"}),
                             ("p1", {"optk.dev/ignore-fields": "/data/version"})):
        client.patch("v1", "ConfigMap", f"{name}-config", {"metadata": {"annotations": annotation}},
                      patch_type="application/merge-patch+json", namespace=ns)

    def build(parent: Any) -> list[ResourceBuilder]:
        config, secret = [b()[0] for b in plan_operator.build(parent)]
        config = {**config, "data": {**config["data"], "version": "2"}}
        return [lambda: (config, DesiredState.PRESENT), lambda: (secret, DesiredState.PRESENT)]

    operator = Operator(api_version=API, kind="Stack", build=build, name="plan-operator")
    plan = plan_fleet(client, operator, namespace=ns)
    assert summarize(plan) == FleetSummary(parents=3, parents_changed=1, update=1, held=1,
                                           unchanged=4)
    text = format_fleet_plan(plan)
    assert f"held      ConfigMap.v1 {ns}/p0-config  (policy create-only: patch not sent)" in text
    assert f"{ns}/p1" not in text  # its one change is in an ignored field
    assert f"update    ConfigMap.v1 {ns}/p2-config" in text
    every = format_fleet_plan(plan, show_unchanged=True)
    assert f"unchanged ConfigMap.v1 {ns}/p1-config" in every


def test_a_refused_child_list_fails_those_children_with_one_request(
    client: KubernetesClient, stack_kind: None, ns: str, kube_api: Any,
) -> None:
    fleet(client, ns, 3)
    operator = Operator(api_version=API, kind="Stack", build=plan_operator.build,
                        name="plan-operator")
    with kube_api.faults(Faults(error_rate=1.0, error_code=403, verbs={"list"},
                                resources={"configmaps"})), Requests(kube_api) as sent:
        plan = plan_fleet(client, operator, namespace=ns)
    summary = summarize(plan)
    assert (summary.errors, summary.unchanged, summary.changes) == (3, 3, 0)  # the Secrets
    assert fleet_exit_code(summary) == EXIT_CHILD_ERRORS
    assert all("listing its kind failed" in e.message
               for result in plan.results for e in result.errors)
    assert sent.count("list") == 3  # parents, ConfigMaps (refused once), Secrets
