"""A declared input the operator may not read, on the real control plane (RBAC enforced).

The operator runs as a user of its own (a client certificate, ``ControlPlane.kubeconfig_for``)
bound to the role ``optk manifests`` derives for it (``derive_rules``), less the rule for its
input kind (Secrets): its Secret informer's list is refused. The parent's ``Reconciled``
condition says ``InputForbidden`` naming the Secret; the parent is not retried (one reconcile in
the next 60 s) and the informer lists again only on its backoff (``Informer``: 50 ms doubling,
capped at 30 s), so the user's requests in those 60 s stay few. Once a Role grants the Secrets,
the informer's next list succeeds and the parent converges: within the backoff cap, 30 s,
since nothing tells a client that RBAC changed (client-go's reflector backs off the same way).

Both windows are virtual (the operator runs on a ``VirtualClock``, stepped as in
``tests/driver/test_inputs.py``): no minute of wall time. The session's real control plane is
shared (``real_kube_api``); the embedded server enforces no RBAC, so this runs there only.
"""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from reconciler import AlreadyExistsError, ForbiddenError, KubernetesClient, ResyncPolicy
from reconciler._commands.rbac import derive_rules, operator_facts
from reconciler.envtest import ControlPlane
from reconciler.testing import VirtualClock
from tests.driver.conftest import make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION, THING_CRD
from tests.driver.test_inputs import _advance, _reconciled, build, declare

WINDOW = 60.0
BACKOFF_CAP = 30.0
"""The informer's list backoff cap (``Informer``'s default ``ExponentialBackoff``)."""


@pytest.fixture
def namespace(real_kube_api: ControlPlane) -> Iterator[str]:
    """A fresh namespace on the session's real control plane, the Thing CRD served."""
    admin = KubernetesClient(real_kube_api.api_client())
    with contextlib.suppress(AlreadyExistsError):
        admin.create(THING_CRD)
    assert wait_until(lambda: admin.is_served(API_VERSION, "Thing"), 30)
    name = f"inputs-{uuid.uuid4().hex[:8]}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    admin.delete("v1", "Namespace", name)


def _role(ns: str, name: str, rules: list[dict[str, Any]], user: str) -> list[dict[str, Any]]:
    meta = {"name": name, "namespace": ns}
    return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
             "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": meta, "subjects": [{"kind": "User", "name": user}],
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": name}}]


def _can_list_secrets(client: KubernetesClient, ns: str) -> bool:
    try:
        client.list("v1", "Secret", namespace=ns)
    except ForbiddenError:
        return False
    return True


def test_a_forbidden_input_is_reported_not_retried_hot_and_converges_once_granted(
    real_kube_api: ControlPlane, namespace: str
) -> None:
    ns, user = namespace, f"inputs-op-{uuid.uuid4().hex[:6]}"
    admin = KubernetesClient(real_kube_api.api_client())
    operator = make_operator(ns, build=build, inputs=declare,
                             resync=ResyncPolicy(heartbeat_namespace=ns))
    parent = thing(ns, "p") | {"spec": {"value": "1", "secret": "s"}}
    rules = derive_rules(operator_facts(operator), parents=[parent], lease_namespace=ns,
                         namespaced=True)
    secrets = [r for r in rules if "secrets" in r.resources]
    assert [(r.resources, r.verbs) for r in secrets] == [(("secrets",), ("list", "watch"))]
    for obj in _role(ns, "operator", [r.to_dict() for r in rules if r not in secrets], user):
        admin.create(obj)
    admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns},
                  "data": {"password": base64.b64encode(b"value").decode()}})
    api = kubernetes.config.new_client_from_config(str(real_kube_api.kubeconfig_for(user)))
    client = KubernetesClient(api)
    assert not _can_list_secrets(client, ns)

    clock = VirtualClock()
    with running(operator, client, clock=clock) as runtime:
        admin.create(parent)
        assert wait_until(lambda: _reconciled(admin, ns, "p").get("reason") == "InputForbidden",
                          30), _reconciled(admin, ns, "p")
        condition = _reconciled(admin, ns, "p")
        assert f"Secret.v1 {ns}/s" in condition["message"], condition
        assert client.get("v1", "ConfigMap", "p-cfg", namespace=ns)  # the rest converged
        _advance(clock, runtime, 1.0)  # the echo of the status write has come and gone

        # The next 60 s: no reconcile, and the refused list only on the informer's backoff.
        reconciles = runtime.stats.reconciles[(ns, "p")]
        before = real_kube_api.request_counts(user=user)
        _advance(clock, runtime, WINDOW)
        spent = {verb: n - before[verb] for verb, n in real_kube_api.request_counts(user=user)
                 .items() if n != before[verb]}
        assert runtime.stats.reconciles[(ns, "p")] == reconciles, runtime.stats.reconciles
        assert spent.get("list", 0) <= 10, spent  # 50 ms doubling to 30 s: 9 lists in 60 s
        assert sum(spent.values()) - spent.get("list", 0) <= 1, spent  # a heartbeat
        assert _reconciled(admin, ns, "p").get("reason") == "InputForbidden"

        # Granted: the informer's next list succeeds and the parent converges.
        for obj in _role(ns, "secrets", [secrets[0].to_dict()], user):
            admin.create(obj)
        assert wait_until(lambda: _can_list_secrets(client, ns), 30)  # the authorizer knows
        granted = clock.monotonic()
        converged = None
        for _ in range(int(BACKOFF_CAP) + 5):
            _advance(clock, runtime, 1.0, first=1.0)
            if _reconciled(admin, ns, "p").get("status") == "True":
                converged = clock.monotonic() - granted
                break
        assert converged is not None, _reconciled(admin, ns, "p")
        assert converged <= BACKOFF_CAP + 1, converged
        assert runtime.stats.triggers["input"] >= 1  # the late list queued its reader
        assert client.get("apps/v1", "Deployment", "p-app", namespace=ns)
