"""One child kind the operator may not list blocks only what needs it (issue 21, 2 and 3).

The embedded server answers every list and watch of ServiceAccounts 403, as a role without
that rule would (fault injection: embedded server only; the real control plane's RBAC case is
in tests/manifests/test_rbac_real.py). The operator is restarted into that state:

- a parent without a ServiceAccount (but pruning the kind) still has a hand-edited ConfigMap
  repaired at once, not after a 30 s wait for a sync that cannot happen;
- the parent whose ServiceAccount is deleted meanwhile says so (``Reconciled=False`` naming the
  kind) instead of claiming its children are as desired;
- ``/readyz`` answers 200 and names what is degraded;
- once the kind lists again, the deleted ServiceAccount is re-created and both parents are
  ``Reconciled=True``, with no manual trigger and no periodic resync.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from builders import ResourceBuilder, child_name, resource_builder
from builders.objects import config_map
from reconciler import KubernetesClient, NotFoundError, Policies, Serving
from reconciler.embedded import EmbeddedApiServer, Faults
from tests.driver.conftest import child_data, make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION

MERGE = "application/merge-patch+json"
FORBID_ACCOUNTS = Faults(error_rate=1.0, error_code=403, verbs={"list", "watch"},
                         resources={"serviceaccounts"})


@resource_builder
def _settings(parent: Any) -> dict[str, Any]:
    return config_map(metadata={"name": child_name(parent["metadata"]["name"], "cfg")},
                      data={"value": str(parent["spec"].get("value", ""))})


@resource_builder
def _account(parent: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": child_name(parent["metadata"]["name"], "sa")}}


def build(parent: Any) -> Sequence[ResourceBuilder]:
    """A ConfigMap; a ServiceAccount too when ``spec.account``."""
    return [_settings(parent), *([_account(parent)] if parent["spec"].get("account") else [])]


def _reconciled(client: KubernetesClient, ns: str, name: str) -> dict[str, Any] | None:
    parent = client.get(API_VERSION, "Thing", name, namespace=ns)
    for condition in (parent.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Reconciled":
            return dict(condition)
    return None


def _account_uid(client: KubernetesClient, ns: str) -> str | None:
    try:
        return str(client.get("v1", "ServiceAccount", "with-sa", namespace=ns)["metadata"]["uid"])
    except NotFoundError:
        return None


def _ready(url: str) -> str | None:
    """``/readyz``'s body when it answers 200, else None."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return str(answer.read().decode())
    except urllib.error.HTTPError:
        return None


def test_an_unlistable_kind_blocks_only_its_children_and_is_repaired_when_it_lists(
    kube_api: EmbeddedApiServer, client: KubernetesClient, ns: str
) -> None:
    operator = make_operator(ns, build=build, policies=Policies(prune=[("v1", "ServiceAccount")]))
    with running(operator, client):
        client.create({**thing(ns, "with"), "spec": {"value": "1", "account": True}})
        client.create(thing(ns, "without"))
        assert wait_until(lambda: _account_uid(client, ns) is not None
                          and child_data(client, ns, "without") is not None, 15)
        assert wait_until(lambda: all((_reconciled(client, ns, n) or {}).get("status") == "True"
                                      for n in ("with", "without")), 15)
    before = _account_uid(client, ns)
    kube_api.set_faults(FORBID_ACCOUNTS)
    try:
        with running(operator, client, serving=Serving(metrics_port=0)) as runtime:
            # 3: the rest is served; readiness says "serving, degraded" once the kind's first
            # list was refused (its informer starts with the first reconcile: until its list is
            # answered, it is a cache not synced yet, as at any start)
            assert runtime.health is not None
            url = f"{runtime.health.url}/readyz"
            assert wait_until(lambda: _ready(url) is not None, 15), "never ready"
            body = _ready(url) or ""
            assert "degraded" in body, body
            assert "ServiceAccount" in body, body
            client.delete("v1", "ServiceAccount", "with-sa", namespace=ns)
            client.patch("v1", "ConfigMap", "without-cfg", {"data": {"value": "by-hand"}},
                         patch_type=MERGE, namespace=ns)
            edited = time.monotonic()
            assert wait_until(lambda: child_data(client, ns, "without") == {"value": "1"}, 20)
            repair = time.monotonic() - edited
            assert repair < 10.0, f"a ConfigMap waited {repair:.1f}s for an unlistable kind"
            # 2: the parent whose kind cannot be listed does not claim to be as desired.
            assert wait_until(lambda: (_reconciled(client, ns, "with") or {}).get(
                "status") == "False", 15), _reconciled(client, ns, "with")
            message = str((_reconciled(client, ns, "with") or {}).get("message"))
            assert "ServiceAccount" in message, message
            kube_api.set_faults(None)
            # Listed again: the deleted child comes back without a trigger or resync.
            assert wait_until(lambda: _account_uid(client, ns) not in (None, before), 45), \
                runtime.triggers()
            assert wait_until(lambda: all(
                (_reconciled(client, ns, n) or {}).get("status") == "True"
                for n in ("with", "without")), 20), (
                _reconciled(client, ns, "with"), _reconciled(client, ns, "without"))
            assert runtime.triggers().get("resync", 0) == 0
    finally:
        kube_api.set_faults(None)
