"""``optk plan -f FILE`` plans the spec in the file, with the live parent's identity."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml

from reconciler import KubernetesClient, ParentReconciler
from reconciler._commands.cli import build_parser
from reconciler._commands.plans import plan_command
from tests.reconciler import plan_operator
from tests.reconciler.test_plans import API, stack, stack_kind

__all__ = ["stack_kind"]  # the fixture, used by name


def test_plan_uses_the_files_spec_and_the_live_identity(
    kube_api: Any, client: KubernetesClient, stack_kind: None, ns: str, tmp_path: Path,
) -> None:
    live = client.create(stack(ns, size=1))
    ParentReconciler(client, plan_operator.build, operator_name="plan-operator").reconcile(live)
    parent_file = tmp_path / "parent.yaml"
    parent_file.write_text(yaml.safe_dump(stack(ns, size=5)))  # no uid, a new size
    stream = io.StringIO()
    assert plan_command("tests.reconciler.plan_operator", files=[str(parent_file)],
                        kubeconfig=str(kube_api.kubeconfig_path), out=stream) == 0
    out = stream.getvalue()
    assert f"update    ConfigMap.v1 {ns}/s-config" in out
    assert '~ data.size: "1" -> "5"' in out
    assert "Secret" not in out  # owned by the live uid: unchanged, not re-created
    assert client.get(API, "Stack", "s", namespace=ns)["spec"] == {"size": 1}


def test_plan_help_says_the_file_is_planned() -> None:
    plan = build_parser()._subparsers._group_actions[0].choices["plan"]  # type: ignore[union-attr]
    text = " ".join(plan.format_help().split())
    assert "the spec (and labels, annotations) IN THE FILE is built" in text
    assert "identity (uid, resourceVersion)" in text
