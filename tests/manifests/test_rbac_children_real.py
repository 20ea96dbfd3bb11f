"""Operators that install RBAC, run as their ServiceAccount under the role ``optk manifests``
derives, on the real control plane with RBAC on (issue 36, 1).

Kubernetes lets a user write a Role or ClusterRole only when it holds every permission the role
grants (or has ``escalate``), and bind one only when it holds its permissions (or has
``bind``). The manifests of the Observer example (which installs the Thanos operator: its CRD,
ClusterRole, binding, ServiceAccount, Deployment, then a ``Thanos``) and of the ``teams``
fixture (whose child roles grant Secrets by name, Pods and their logs, Nodes and ``/healthz``,
none of them a kind it builds, and which binds the built-in ``view``) are applied as they are;
each operator runs in-process with its ServiceAccount's token, reached as in a pod, and
installs everything with zero answers 403 in the audit log.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from examples.observer.crds import API_VERSION as OBSERVER_API_VERSION
from examples.observer.crds import KIND as OBSERVER_KIND
from examples.thanos.crds import API_VERSION as THANOS_API_VERSION
from examples.thanos.crds import THANOS_CRD
from reconciler import AlreadyExistsError, KubernetesClient, NotFoundError, Operator
from reconciler._client.incluster import InClusterConfig, incluster_api_client
from reconciler._commands.manifests import manifests_command
from reconciler._driver.deployed import deployed_operator
from reconciler.envtest import ControlPlane
from reconciler.testing import make_available
from tests.manifests import teams_operator
from tests.manifests.test_rbac_real import _token, _wait_for_service_account

pytestmark = pytest.mark.timeout(300)

_TIMEOUT = 60.0
_RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="module")
def plane(kube_assets: Path) -> Iterator[ControlPlane]:
    with ControlPlane(kube_assets) as cp:
        yield cp


class Refusals:
    """The requests of one user the API server answered 403, from its audit log."""

    def __init__(self, plane: ControlPlane, user: str) -> None:
        self.plane, self.user = plane, user
        self.found: list[str] = []
        self._offset = 0

    def read(self) -> list[str]:
        self.plane.request_counts(user=self.user)  # the log is complete up to now
        with self.plane.audit_log_path.open(encoding="utf-8") as log:
            log.seek(self._offset)
            lines = log.readlines()
        if lines and not lines[-1].endswith("\n"):
            lines.pop()
        self._offset += sum(len(line.encode()) for line in lines)
        for line in lines:
            event = json.loads(line)
            if ((event.get("user") or {}).get("username") == self.user
                    and event.get("stage") == "ResponseComplete"
                    and (event.get("responseStatus") or {}).get("code") == 403):
                ref = event.get("objectRef") or {}
                self.found.append(f"{event['verb']} {ref.get('resource')}"
                                  f"{'/' + ref['subresource'] if ref.get('subresource') else ''}"
                                  f" {ref.get('namespace', '')}/{ref.get('name', '')}: "
                                  f"{(event.get('responseStatus') or {}).get('message', '')}")
        return self.found


def _wait(check: Callable[[], bool], refusals: Refusals) -> bool:
    """Poll ``check`` until it holds; give up at the first 403 (the install is stuck) or after
    ``_TIMEOUT`` seconds."""
    deadline = time.monotonic() + _TIMEOUT
    while time.monotonic() < deadline:
        if refusals.read():
            return False
        with contextlib.suppress(NotFoundError):
            if check():
                return True
        time.sleep(0.25)
    return False


def _deploy(plane: ControlPlane, operator: Operator, target: str,
            tmp_path: Path) -> tuple[KubernetesClient, KubernetesClient, Refusals]:
    """Apply ``optk manifests TARGET`` as an administrator would; the admin client, a client
    with the ServiceAccount's token reached as in a pod, and its refusals."""
    admin = KubernetesClient(plane.api_client())
    documents = [d for d in yaml.safe_load_all(manifests_command(target)) if d]
    namespace = next(d["metadata"]["name"] for d in documents if d["kind"] == "Namespace")
    for obj in documents:
        if obj["kind"] == "CustomResourceDefinition":
            with contextlib.suppress(AlreadyExistsError):  # two operators of the Team kind
                admin.create(obj)
            continue
        admin.create(obj)
    _wait_for_service_account(plane, namespace, operator.name)
    secrets = tmp_path / "serviceaccount"
    secrets.mkdir()
    (secrets / "token").write_text(_token(plane, namespace, operator.name))
    (secrets / "ca.crt").write_bytes(Path(plane.ca_cert_path).read_bytes())
    (secrets / "namespace").write_text(namespace)
    host, port = plane.url.removeprefix("https://").rsplit(":", 1)
    config = InClusterConfig.from_environment(
        {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}, directory=secrets)
    user = f"system:serviceaccount:{namespace}:{operator.name}"
    refusals = Refusals(plane, user)
    refusals.read()
    return admin, KubernetesClient(incluster_api_client(config)), refusals


def _reconciled(admin: KubernetesClient, api_version: str, kind: str, name: str,
                namespace: str) -> bool:
    parent = admin.get(api_version, kind, name, namespace=namespace)
    return any(c.get("type") == "Reconciled" and c.get("status") == "True"
               for c in (parent.get("status") or {}).get("conditions") or ())


@contextlib.contextmanager
def _running(plane: ControlPlane, operator: Operator, target: str,
             tmp_path: Path) -> Iterator[tuple[KubernetesClient, Refusals]]:
    """``optk manifests TARGET`` applied and ``operator`` running as its Deployment runs it
    (its ServiceAccount's token, leader election, its Leases in its own namespace) once its
    parent kind is served: the admin client and the operator's refusals, none at the end."""
    admin, client, refusals = _deploy(plane, operator, target, tmp_path)
    deadline = time.monotonic() + _TIMEOUT
    while (not admin.is_served(operator.api_version, operator.kind)
           and time.monotonic() < deadline):
        admin.invalidate_discovery()
        time.sleep(0.2)
    runtime = deployed_operator(operator, leader_elect=True,
                                lease_namespace=f"{operator.name}-system",
                                watch_namespace=None).start(client)
    try:
        yield admin, refusals
    finally:
        runtime.stop(timeout=10.0)
    assert refusals.read() == []


def _team(admin: KubernetesClient, refusals: Refusals, name: str, namespace: str,
          spec: dict[str, Any]) -> None:
    """Create a Team and wait until it is reconciled (refusals fail at once)."""
    admin.create({"apiVersion": teams_operator.API_VERSION, "kind": teams_operator.KIND,
                  "metadata": {"name": name, "namespace": namespace}, "spec": spec})
    assert _wait(lambda: _reconciled(admin, teams_operator.API_VERSION, teams_operator.KIND,
                                     name, namespace), refusals), refusals.found


def test_the_observer_installs_the_thanos_operator_under_its_derived_role(
    plane: ControlPlane, tmp_path: Path
) -> None:
    from examples.observer.operator import operator

    with _running(plane, operator, "examples.observer.operator:operator",
                  tmp_path) as (admin, refusals):
        ns = "observed"
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        admin.create({"apiVersion": OBSERVER_API_VERSION, "kind": OBSERVER_KIND,
                      "metadata": {"name": "obs", "namespace": ns},
                      "spec": {"thanos": {"spec": {"objectStorageSecret": "objstore",
                                                   "query": {"replicas": 2}}}}})
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "obs-thanos-operator", "namespace": ns}}
        assert _wait(lambda: bool(admin.get("apps/v1", "Deployment", "obs-thanos-operator",
                                            namespace=ns)), refusals), refusals.found
        for api_version, kind, name in (
                ("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                 THANOS_CRD["metadata"]["name"]),
                ("rbac.authorization.k8s.io/v1", "ClusterRole", f"{ns}-obs-thanos-operator"),
                ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding",
                 f"{ns}-obs-thanos-operator")):
            assert admin.get(api_version, kind, name)["metadata"]["name"] == name
        make_available(admin, deployment)  # as a kubelet would: no kubelet runs here
        assert _wait(lambda: bool(admin.get(THANOS_API_VERSION, "Thanos", "obs", namespace=ns))
                     and _reconciled(admin, OBSERVER_API_VERSION, OBSERVER_KIND, "obs", ns),
                     refusals), refusals.found


def test_a_composite_whose_child_roles_grant_what_it_does_not_use_installs_them(
    plane: ControlPlane, tmp_path: Path
) -> None:
    with _running(plane, teams_operator.operator, "tests.manifests.teams_operator:operator",
                  tmp_path) as (admin, refusals):
        ns = "teamed"
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        _team(admin, refusals, "red", ns, {})
        assert admin.get(_RBAC, "Role", "red-reader", namespace=ns)["rules"][0][
            "resourceNames"] == ["red-creds"]
        assert admin.get(_RBAC, "RoleBinding", "red-view", namespace=ns)["roleRef"]["name"] == \
            "view"
        assert admin.get(_RBAC, "ClusterRoleBinding", f"{ns}-red-nodes")


def test_escalate_and_bind_let_it_write_roles_whose_rules_samples_cannot_tell(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """An aggregated ClusterRole (``escalate`` on ClusterRoles: kube-apiserver checks it
    without the name on a create, so a name-limited one is refused: 'must have cluster-admin
    privileges to use the aggregationRule') and a Role whose rule names the resource the Team's
    spec gives (``escalate`` and ``bind`` on Roles in the one namespace the operator watches:
    a namespaced role)."""
    ns = teams_operator.EXTRAS_NAMESPACE
    KubernetesClient(plane.api_client()).create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    with _running(plane, teams_operator.extras, "tests.manifests.teams_operator:extras",
                  tmp_path) as (admin, refusals):
        _team(admin, refusals, "green", ns, {"owner": "endpoints"})
        assert admin.get(_RBAC, "Role", "green-owner", namespace=ns)["rules"][0][
            "resources"] == ["endpoints"]
        assert admin.get(_RBAC, "RoleBinding", "green-owner", namespace=ns)
        assert admin.get(_RBAC, "ClusterRole", "teams-aggregate")["aggregationRule"]
