"""``optk plan``: a dry-run parent reconcile, printed; nothing is written to the cluster."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import ObjectRef
from objectmatcher import DiffItem
from reconciler import KubernetesClient, NotFoundError, ParentReconciler, ResourceSettings
from reconciler._commands.cli import main
from reconciler._commands.plans import format_plan, plan_command, plan_parents
from reconciler._reconcile.changelog import describe_changes
from reconciler._reconcile.conditions import ParentResult
from reconciler._reconcile.reconciling import Action, ReconcileResult
from tests.reconciler import plan_operator
from tests.reconciler.conftest import install_crd

API = "plans.optk.dev/v1"


@pytest.fixture(scope="module")
def stack_kind(client: KubernetesClient) -> None:
    if not client.is_served(API, "Stack"):
        install_crd(client, group="plans.optk.dev", kind="Stack", plural="stacks", status=True)


def stack(ns: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Stack", "metadata": {"name": "s", "namespace": ns},
            "spec": spec}


@pytest.mark.both_servers
def test_plan_of_a_new_parent_lists_creates_and_writes_nothing(
    client: KubernetesClient, stack_kind: None, ns: str
) -> None:
    [result] = plan_parents(client, plan_operator.build, [stack(ns, size=2)],
                            operator_name="plan-operator")
    text = format_plan([result])
    assert f"create    ConfigMap.v1 {ns}/s-config" in text
    assert f"create    Secret.v1 {ns}/s-secret" in text
    with pytest.raises(NotFoundError):
        client.get("v1", "ConfigMap", "s-config", namespace=ns)
    with pytest.raises(NotFoundError):
        client.get(API, "Stack", "s", namespace=ns)


@pytest.mark.both_servers
def test_plan_shows_the_field_diff_with_secret_values_redacted(
    client: KubernetesClient, stack_kind: None, ns: str
) -> None:
    parent = client.create(stack(ns, size=1, password="old-secret"))
    ParentReconciler(client, plan_operator.build, operator_name="plan-operator").reconcile(parent)
    changed = client.patch(API, "Stack", "s", {"spec": {"size": 3, "password": "new-secret"}},
                           patch_type="application/merge-patch+json", namespace=ns)
    [result] = plan_parents(client, plan_operator.build, [changed],
                            operator_name="plan-operator")
    text = format_plan([result])
    assert f"update    ConfigMap.v1 {ns}/s-config" in text
    assert '~ data.size: "1" -> "3"' in text
    assert "last-applied" not in text
    assert f"update    Secret.v1 {ns}/s-secret" in text
    assert "old-secret" not in text
    assert "new-secret" not in text
    assert client.get("v1", "ConfigMap", "s-config", namespace=ns)["data"] == {"size": "1"}


@pytest.mark.both_servers
def test_optk_plan_command(
    kube_api: Any, client: KubernetesClient, stack_kind: None, ns: str, tmp_path: Path
) -> None:
    parent_file = tmp_path / "parent.yaml"
    parent_file.write_text(yaml.safe_dump(stack(ns, size=5)))
    out = io.StringIO()
    code = plan_command("tests.reconciler.plan_operator", files=[str(parent_file)],
                        kubeconfig=str(kube_api.kubeconfig_path), out=out)
    assert code == 0
    assert f"create    ConfigMap.v1 {ns}/s-config" in out.getvalue()
    with pytest.raises(NotFoundError):
        client.get("v1", "ConfigMap", "s-config", namespace=ns)

    assert main(["plan", "tests.reconciler.plan_operator", "-f", str(parent_file),
                 "--kubeconfig", str(kube_api.kubeconfig_path)]) == 0


@pytest.mark.both_servers
def test_optk_plan_puts_a_parent_without_namespace_in_the_context_namespace(
    kube_api: Any, stack_kind: None, ns: str, tmp_path: Path
) -> None:
    """As ``kubectl apply -f``: the kubeconfig context's namespace, else ``default``."""
    parent = stack(ns, size=2)
    del parent["metadata"]["namespace"]
    parent_file = tmp_path / "parent.yaml"
    parent_file.write_text(yaml.safe_dump(parent))
    out = io.StringIO()
    assert plan_command("tests.reconciler.plan_operator", files=[str(parent_file)],
                        kubeconfig=str(kube_api.kubeconfig_path), out=out) == 0, out.getvalue()
    assert "create    ConfigMap.v1 default/s-config" in out.getvalue()
    config = yaml.safe_load(Path(kube_api.kubeconfig_path).read_text())
    for context in config["contexts"]:
        context["context"]["namespace"] = ns
    in_ns = tmp_path / "kubeconfig-ns"
    in_ns.write_text(yaml.safe_dump(config))
    out = io.StringIO()
    assert plan_command("tests.reconciler.plan_operator", files=[str(parent_file)],
                        kubeconfig=str(in_ns), out=out) == 0, out.getvalue()
    assert f"create    ConfigMap.v1 {ns}/s-config" in out.getvalue()


@pytest.mark.both_servers
def test_optk_plan_prints_each_outcome_once(
    kube_api: Any, stack_kind: None, tmp_path: Path
) -> None:
    """A child that would fail is in the printed plan, not repeated as log lines on stderr."""
    import subprocess
    import sys

    parent_file = tmp_path / "parent.yaml"
    parent_file.write_text(yaml.safe_dump(stack("no-such-namespace", size=1)))
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "plan", "tests.reconciler.plan_operator",
         "-f", str(parent_file), "--kubeconfig", str(kube_api.kubeconfig_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "error     ConfigMap.v1 no-such-namespace/s-config" in done.stdout
    assert 'namespaces "no-such-namespace" not found' in done.stdout
    assert done.stderr == ""


def test_plan_and_change_log_print_field_paths_alike() -> None:
    """One formatter (``DiffItem.dotted_path``) for ``optk plan`` and the INFO change line."""
    path = ("spec", "template", "spec", "containers", 0, "ports", 0, "containerPort")
    child = ReconcileResult(
        action=Action.UPDATED,
        ref=ObjectRef(api_version="apps/v1", kind="Deployment", name="web", namespace="ns"),
        diff=(DiffItem(op="change", path=path, old=80, new=8080),))
    result = ParentResult(
        parent=ObjectRef(api_version=API, kind="Stack", name="s", namespace="ns"),
        children=(child,))
    shown = "spec.template.spec.containers[0].ports[0].containerPort"
    assert describe_changes(result) == f"patched Deployment web ({shown})"
    assert f"~ {shown}: 80 -> 8080" in format_plan([result])


@pytest.mark.both_servers
def test_plan_shows_the_migration_to_server_side_apply(
    client: KubernetesClient, stack_kind: None, ns: str
) -> None:
    from reconciler import ServerSideApply

    parent = client.create(stack(ns, size=1))
    ParentReconciler(client, plan_operator.build, operator_name="plan-operator").reconcile(parent)
    before = client.get("v1", "ConfigMap", "s-config", namespace=ns)
    [result] = plan_parents(client, plan_operator.build, [parent],
                            operator_name="plan-operator",
                            resource_settings=ResourceSettings(apply=ServerSideApply()))
    text = format_plan([result])
    assert (f"update    ConfigMap.v1 {ns}/s-config  (migrate from optk.dev/last-applied to "
            "server-side apply)") in text
    after = client.get("v1", "ConfigMap", "s-config", namespace=ns)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
