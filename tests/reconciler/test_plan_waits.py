"""``optk plan`` tells what would wait and why (issue 36): a child held back by its dependency
is listed with what it waits for, a missing declared input is a line naming the input (not an
error with an exception's class), and a builder that raises is said once, with where."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml

from reconciler import KubernetesClient
from reconciler._commands.plans import plan_command
from tests.reconciler import plan_waits_operator
from tests.reconciler.test_plans import stack, stack_kind

__all__ = ["stack_kind"]  # the fixture, used by name

_OPERATOR = "tests.reconciler.plan_waits_operator"


def _plan(kube_api: Any, tmp_path: Path, parent: dict[str, Any]) -> tuple[int, str]:
    parent_file = tmp_path / "parent.yaml"
    parent_file.write_text(yaml.safe_dump(parent))
    out = io.StringIO()
    code = plan_command(_OPERATOR, files=[str(parent_file)],
                        kubeconfig=str(kube_api.kubeconfig_path), out=out)
    return code, out.getvalue()


def test_plan_lists_waiting_children_and_a_missing_input_by_name(
    kube_api: Any, client: KubernetesClient, stack_kind: None, ns: str, tmp_path: Path,
) -> None:
    code, out = _plan(kube_api, tmp_path, stack(ns, secret="creds"))
    lines = out.splitlines()
    assert f"  create    Deployment.apps/v1 {ns}/s-web" in lines, out
    [waiting] = [line for line in lines if line.startswith("  wait ")]
    assert f"ConfigMap.v1 {ns}/s-after" in waiting, out
    assert "DependencyNotReady" in waiting, out
    assert "component 'web'" in waiting, out
    assert f"  missing   Secret.v1 {ns}/creds  (input: builder build.settings waits until it " \
           "exists)" in lines, out
    assert "error" not in out.lower(), out
    assert code == 0  # waiting is no failure

    client.create({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "creds", "namespace": ns}, "data": {"k": "dg=="}})
    code, out = _plan(kube_api, tmp_path, stack(ns, secret="creds"))
    assert f"  create    ConfigMap.v1 {ns}/s-settings" in out.splitlines(), out
    assert "missing" not in out
    assert code == 0


def test_plan_says_a_failing_builder_once_with_where_it_raised(
    kube_api: Any, client: KubernetesClient, stack_kind: None, ns: str, tmp_path: Path,
) -> None:
    client.create({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "creds", "namespace": ns}, "data": {"k": "dg=="}})
    code, out = _plan(kube_api, tmp_path, stack(ns, secret="creds", fail=True))
    line = next(line for line in out.splitlines() if "KeyError" in line)
    source = Path(plan_waits_operator.__file__).read_text().splitlines()
    raised = 1 + next(i for i, text in enumerate(source) if "# a KeyError" in text)
    assert line.startswith(f"  error     builder build.settings of parent {ns}/s failed: "
                           "KeyError: 'metadata' ("), out
    assert line.endswith(f"plan_waits_operator.py:{raised})"), out  # where, without -v
    assert out.count("build.settings") == 1, out
    assert code == 1
