"""The per-cluster roles of ``optk manifests`` at work on two real control planes (issue 41).

The session's control plane is the management cluster, the session's second one
(``second_real_kube_api``, tests/conftest.py) is the workload cluster ``edge-1``. At home the
generated stream's RBAC is applied and the operator (``tests.reconciler.placed_operator``, as
deployed: leader election in its namespace) runs with its ServiceAccount's token; in ``edge-1``
the ``--cluster edge-1`` stream is applied and the cluster's Secret holds a kubeconfig of that
cluster's ServiceAccount. A parent converges in both clusters and its deletion removes the
remote children, and neither API server answered that ServiceAccount with a 403 (read from both
audit logs): the derived roles are enough.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import kubernetes
import pytest
import yaml

from reconciler import AlreadyExistsError, KubernetesClient, NotFoundError
from reconciler._commands.manifests import manifests_command
from reconciler._driver.deployed import deployed_operator
from reconciler.envtest import ControlPlane
from tests.reconciler import placed_operator
from tests.reconciler.conftest import install_crd

pytestmark = pytest.mark.timeout(300)

TARGET = "tests.reconciler.placed_operator"
API = "sites.optk.dev/v1"
OP_NS = "site-operator-system"
SA_USER = f"system:serviceaccount:{OP_NS}:site-operator"
_RBAC = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
         "RoleBinding"}
SAMPLE = {"apiVersion": API, "kind": "Site", "metadata": {"name": "s", "namespace": "default"},
          "spec": {"cluster": "edge-1"}}


@pytest.fixture(scope="module")
def edge(second_real_kube_api: ControlPlane) -> ControlPlane:
    """The workload cluster: the session's second control plane (shared with the other
    multi-cluster real tests, so the session starts at most one extra plane)."""
    return second_real_kube_api


def _apply_rbac(client: KubernetesClient, text: str) -> None:
    for doc in yaml.safe_load_all(text):
        if doc and doc["kind"] in _RBAC:
            with contextlib.suppress(AlreadyExistsError):
                client.create(doc)


def _forbidden(plane: ControlPlane) -> list[str]:
    """The requests of the operator's ServiceAccount that ``plane`` answered 403."""
    plane.request_counts(user=SA_USER)  # flushes the audit log up to now
    out: list[str] = []
    for line in plane.audit_log_path.read_text().splitlines():
        event = json.loads(line)
        if ((event.get("user") or {}).get("username") == SA_USER
                and (event.get("responseStatus") or {}).get("code") == 403):
            out.append(f"{event.get('verb')} {event.get('requestURI')}")
    return out


def _eventually(check: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except NotFoundError:
            pass
        time.sleep(0.2)
    return False


def _client_of(kubeconfig: Path) -> KubernetesClient:
    return KubernetesClient(kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig)))


def test_the_derived_roles_place_and_remove_children_with_no_403(
        real_kube_api: ControlPlane, edge: ControlPlane, tmp_path: Path) -> None:
    home = KubernetesClient(real_kube_api.api_client())
    remote = KubernetesClient(edge.api_client())
    if not home.is_served(API, "Site"):
        install_crd(home, group="sites.optk.dev", kind="Site", plural="sites", status=True)
    samples = tmp_path / "samples.yaml"
    samples.write_text(yaml.safe_dump(SAMPLE))
    _apply_rbac(home, manifests_command(TARGET, namespace=OP_NS, samples=[str(samples)]))
    _apply_rbac(remote, manifests_command(TARGET, namespace=OP_NS, samples=[str(samples)],
                                          cluster="edge-1"))
    with contextlib.suppress(AlreadyExistsError):
        home.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sites-real"}})
    edge_config = edge.kubeconfig_for(SA_USER).read_text()
    home.create({"apiVersion": "v1", "kind": "Secret",
                 "metadata": {"name": "edge-1", "namespace": placed_operator.FLEET_NAMESPACE},
                 "data": {"kubeconfig": base64.b64encode(edge_config.encode()).decode()}})
    operator = deployed_operator(placed_operator.operator, leader_elect=True,
                                 lease_namespace=OP_NS, watch_namespace=None)
    runtime = operator.start(_client_of(real_kube_api.kubeconfig_for(SA_USER)))
    try:
        home.create({"apiVersion": API, "kind": "Site",
                     "metadata": {"name": "r", "namespace": "sites-real"},
                     "spec": {"cluster": "edge-1", "size": 2}})

        def converged() -> bool:
            parent = home.get(API, "Site", "r", namespace="sites-real")
            ready = {c["type"]: c["status"]
                     for c in (parent.get("status") or {}).get("conditions") or ()}
            remote.get("rbac.authorization.k8s.io/v1", "Role", "site-reader",
                       namespace="site-r")
            return ready.get("Ready") == "True" and remote.get(
                "v1", "ConfigMap", "settings", namespace="site-r")["data"] == {"size": "2"}

        assert _eventually(converged), (_forbidden(real_kube_api), _forbidden(edge))
        home.get("v1", "ConfigMap", "r-home", namespace="sites-real")
        home.delete(API, "Site", "r", namespace="sites-real")

        def removed() -> bool:
            try:
                remote.get("v1", "ConfigMap", "settings", namespace="site-r")
            except NotFoundError:
                pass
            else:
                return False
            try:
                home.get(API, "Site", "r", namespace="sites-real")
            except NotFoundError:
                return True
            return False

        assert _eventually(removed), (_forbidden(real_kube_api), _forbidden(edge))
    finally:
        runtime.stop(5)
    assert _forbidden(real_kube_api) == []
    assert _forbidden(edge) == []
    with contextlib.suppress(NotFoundError):  # deleted with the parent, or being finalized
        assert remote.get("v1", "Namespace", "site-r")["metadata"].get("deletionTimestamp")
