"""A kind the operator may not list fails only the parents that build it (issue 35, item 6).

The operator prunes Ingresses and builds one only for parents whose spec asks
(``spec.ingress``). It runs without the right to list and watch Ingresses: on the real control
plane as a user of its own (``ControlPlane.kubeconfig_for``) bound to the role ``optk
manifests`` derives for it less ``list``/``watch`` on ingresses; on the embedded server, which
enforces no RBAC, the server refuses those two verbs for ingresses (fault injection; the test's
own client never lists them). Three parents:

- ``plain`` never had an Ingress, ``gone`` had one and no longer asks for it: both use the kind
  only to prune. They converge (``Ready`` True) and say ``PruneBlocked=True`` naming the kind;
  no reconcile of theirs fails in the next two minutes, and ``gone``'s Ingress is kept;
- ``web`` builds an Ingress: it fails, retried with backoff;
- the WARNING lines of those two minutes are few: one per cause per interval, not one per
  parent per retry.

Once the kind lists again (a Role granted; the faults lifted), ``gone``'s Ingress is pruned,
``PruneBlocked`` turns False and ``web`` converges, without a resync. The windows are virtual
(``VirtualClock``, stepped as in ``tests/driver/test_inputs.py``); the session's servers are
shared.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from builders import ResourceBuilder, child_name, resource_builder
from builders.objects import config_map
from reconciler import ForbiddenError, KubernetesClient, NotFoundError, Policies, ResyncPolicy
from reconciler._commands.rbac import derive_rules, operator_facts
from reconciler._driver.operators import Operator
from reconciler._driver.runtime import OperatorRuntime
from reconciler.embedded import Faults
from reconciler.testing import VirtualClock
from tests.driver.conftest import make_operator, running, thing, wait_until
from tests.driver.sample_operator import API_VERSION
from tests.driver.test_inputs import _advance
from tests.driver.test_inputs_forbidden_real import _role

pytestmark = pytest.mark.both_servers

INGRESS = ("networking.k8s.io/v1", "Ingress")
FORBID_INGRESS_LISTS = Faults(error_rate=1.0, error_code=403, verbs={"list", "watch"},
                              resources={"ingresses.networking.k8s.io"})
WINDOW = 120.0
GRANT_BOUND = 40.0
"""Virtual seconds for the first list after the grant: the informer's backoff cap (30 s)."""
MERGE = "application/merge-patch+json"


@resource_builder
def _settings(parent: Any) -> dict[str, Any]:
    return config_map(metadata={"name": child_name(parent["metadata"]["name"], "cfg")},
                      data={"value": str(parent["spec"].get("value", ""))})


@resource_builder
def _ingress(parent: Any) -> dict[str, Any]:
    name = child_name(parent["metadata"]["name"], "web")
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": name},
            "spec": {"defaultBackend": {"service": {"name": name, "port": {"number": 80}}}}}


def build(parent: Any) -> list[ResourceBuilder]:
    """A ConfigMap; an Ingress too when ``spec.ingress``."""
    return [_settings(parent), *([_ingress(parent)] if parent["spec"].get("ingress") else [])]


def _conditions(client: KubernetesClient, ns: str, name: str) -> dict[str, dict[str, Any]]:
    parent = client.get(API_VERSION, "Thing", name, namespace=ns)
    return {c["type"]: c for c in (parent.get("status") or {}).get("conditions") or ()}


def _status(client: KubernetesClient, ns: str, name: str, type_: str) -> str | None:
    return _conditions(client, ns, name).get(type_, {}).get("status")


def _ingress_exists(client: KubernetesClient, ns: str, name: str) -> bool:
    try:
        client.get(*INGRESS, name, namespace=ns)
    except NotFoundError:
        return False
    return True


def _stepped(clock: VirtualClock, runtime: OperatorRuntime, predicate: Any,
             seconds: float) -> bool:
    """Step ``clock`` by 0.5 s until ``predicate`` holds, at most ``seconds``."""
    for _ in range(int(seconds / 0.5)):
        if predicate():
            return True
        _advance(clock, runtime, 0.5, first=0.5)
    return bool(predicate())


class _Refusal:
    """Ingress lists refused to the operator: its client, and ``grant()`` to end it."""

    def __init__(self, kube_api: Any, ns: str, operator: Operator, admin: KubernetesClient):
        self.kube_api, self.ns, self.admin = kube_api, ns, admin
        self.embedded = hasattr(kube_api, "set_faults")
        if self.embedded:
            kube_api.set_faults(FORBID_INGRESS_LISTS)
            self.client = admin
            return
        self.user = f"prune-op-{ns[-6:]}"
        samples = [thing(ns, "p") | {"spec": {"value": "1", "ingress": True}}]
        rules = [r.to_dict() for r in derive_rules(
            operator_facts(operator), parents=samples, lease_namespace=ns, namespaced=True)]
        kept = []
        for rule in rules:
            others = [r for r in rule["resources"] if r != "ingresses"]
            if others:
                kept.append({**rule, "resources": others})
            if "ingresses" in rule["resources"]:
                verbs = [v for v in rule["verbs"] if v not in ("list", "watch")]
                if verbs:
                    kept.append({**rule, "resources": ["ingresses"], "verbs": verbs})
        for obj in _role(ns, "operator", kept, self.user):
            admin.create(obj)
        api = kubernetes.config.new_client_from_config(
            str(kube_api.kubeconfig_for(self.user)))
        self.client = KubernetesClient(api)
        assert wait_until(lambda: not self._can_list(), 30)

    def _can_list(self) -> bool:
        try:
            self.client.list(*INGRESS, namespace=self.ns)
        except ForbiddenError:
            return False
        return True

    def grant(self) -> None:
        if self.embedded:
            self.kube_api.set_faults(None)
            return
        for obj in _role(self.ns, "ingresses", [{
                "apiGroups": ["networking.k8s.io"], "resources": ["ingresses"],
                "verbs": ["list", "watch"]}], self.user):
            self.admin.create(obj)
        assert wait_until(self._can_list, 30)  # the authorizer knows


@pytest.fixture
def lifted(kube_api: Any) -> Iterator[None]:
    """The embedded server's faults lifted after the test, whatever happens."""
    yield
    if hasattr(kube_api, "set_faults"):
        kube_api.set_faults(None)


def test_a_parent_that_only_prunes_an_unlistable_kind_converges_and_says_pruning_is_blocked(
        kube_api: Any, client: KubernetesClient, ns: str, lifted: None,
        caplog: pytest.LogCaptureFixture) -> None:
    operator = make_operator(
        ns, build=build, resync=ResyncPolicy(heartbeat_namespace=ns),
        policies=Policies(prune=[INGRESS]),
    )
    with running(operator, client):  # allowed: "gone" gets its Ingress
        client.create(thing(ns, "gone") | {"spec": {"value": "1", "ingress": True}})
        assert wait_until(lambda: _ingress_exists(client, ns, "gone-web"), 15)
        assert wait_until(lambda: _status(client, ns, "gone", "Ready") == "True", 15)

    refusal = _Refusal(kube_api, ns, operator, client)
    clock = VirtualClock()
    caplog.set_level(logging.INFO)
    with running(operator, refusal.client, clock=clock) as runtime:
        client.patch(API_VERSION, "Thing", "gone", {"spec": {"ingress": None}},
                     patch_type=MERGE, namespace=ns)
        client.create(thing(ns, "plain"))
        client.create(thing(ns, "web") | {"spec": {"value": "1", "ingress": True}})
        assert _stepped(clock, runtime, lambda: all(
            _status(client, ns, n, "PruneBlocked") == "True" for n in ("gone", "plain"))
            and _status(client, ns, "web", "Reconciled") == "False", 30), [
            _conditions(client, ns, n) for n in ("gone", "plain", "web")]
        for name in ("gone", "plain"):
            conditions = _conditions(client, ns, name)
            assert conditions["Ready"]["status"] == "True", conditions
            assert conditions["Stalled"]["status"] == "False", conditions
            blocked = conditions["PruneBlocked"]
            assert blocked["reason"] == "KindUnlistable", blocked
            assert "Ingress" in blocked["message"], blocked
        assert "Ingress" in _conditions(client, ns, "web")["Reconciled"]["message"]
        assert _ingress_exists(client, ns, "gone-web")  # pruning waits for the kind

        # Two minutes: no failure of the parents that only prune, few WARNING lines.
        failures = {n: runtime.stats.failures[(ns, n)] for n in ("gone", "plain", "web")}
        caplog.clear()
        _advance(clock, runtime, WINDOW)
        failed = {n: runtime.stats.failures[(ns, n)] - failures[n] for n in failures}
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        print(f"in {WINDOW:g}s: reconcile errors {failed}, {len(warnings)} WARNING lines")
        assert failed["gone"] == failed["plain"] == 0, failed
        assert failed["web"] >= 1, failed  # it still builds the kind: retried
        assert not [w for w in warnings if "/gone]" in w or "/plain]" in w], warnings
        assert len(warnings) <= 6, "\n".join(warnings)
        assert _status(client, ns, "gone", "PruneBlocked") == "True"

        refusal.grant()
        assert _stepped(clock, runtime, lambda: not _ingress_exists(client, ns, "gone-web")
                        and all(_status(client, ns, n, "PruneBlocked") == "False"
                                for n in ("gone", "plain"))
                        and _status(client, ns, "web", "Ready") == "True", GRANT_BOUND), [
            _conditions(client, ns, n) for n in ("gone", "plain", "web")]
        assert runtime.stats.triggers.get("resync", 0) == 0
        with contextlib.suppress(NotFoundError):
            assert _ingress_exists(client, ns, "web-web")
